// Package extauthztest runs real authorization services for tests of the
// extAuthz and networkExtAuthz policies: Envoy's Authorization service
// (gRPC, envoy.service.auth.v3) and an HTTP one (http.go).
package extauthztest

import (
	"context"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/relaygate/gateway/policy/policytest"
)

// Server answers each check with what Decide returns (after Delay) and
// keeps the checks it got.
type Server struct {
	authv3.UnimplementedAuthorizationServer
	Decide func(*authv3.CheckRequest) *authv3.CheckResponse
	Delay  time.Duration

	mu       sync.Mutex
	checks   []*authv3.CheckRequest
	metadata []metadata.MD
}

// Check implements the Authorization service.
func (s *Server) Check(ctx context.Context, r *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.checks = append(s.checks, r)
	s.metadata = append(s.metadata, md)
	s.mu.Unlock()
	if s.Delay > 0 {
		select {
		case <-time.After(s.Delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Decide(r), nil
}

// Checks returns the checks received so far.
func (s *Server) Checks() []*authv3.CheckRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*authv3.CheckRequest(nil), s.checks...)
}

// Metadata returns the gRPC metadata of each check received so far, in
// the order of Checks.
func (s *Server) Metadata() []metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metadata.MD(nil), s.metadata...)
}

// Last returns the last check received; the test fails without one.
func (s *Server) Last(t testing.TB) *authv3.CheckRequest {
	t.Helper()
	c := s.Checks()
	if len(c) == 0 {
		t.Fatal("the authorization service got no check")
	}
	return c[len(c)-1]
}

// Start serves s on 127.0.0.1 until the test ends and returns its address.
func Start(t testing.TB, s *Server) string {
	t.Helper()
	return policytest.ServeGRPC(t, func(srv *grpc.Server) { authv3.RegisterAuthorizationServer(srv, s) })
}

// Allow is an allowing answer with ok (may be nil) and dynamic metadata
// md (may be nil).
func Allow(ok *authv3.OkHttpResponse, md map[string]any) *authv3.CheckResponse {
	r := &authv3.CheckResponse{Status: &status.Status{Code: int32(codes.OK)}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok}}
	if md != nil {
		r.DynamicMetadata, _ = structpb.NewStruct(md)
	}
	return r
}

// Deny is a bare refusal with the gRPC code.
func Deny(code codes.Code) *authv3.CheckResponse {
	return &authv3.CheckResponse{Status: &status.Status{Code: int32(code)}}
}
