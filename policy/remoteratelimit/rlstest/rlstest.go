// Package rlstest runs a real rate limit service (gRPC,
// envoy.service.ratelimit.v3) for tests: a fixed number of hits per
// descriptor, counted across every client, as a shared service counts for
// every gateway replica.
package rlstest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/relaygate/gateway/policy/policytest"
)

// Server allows Limit hits per distinct descriptor (its entries, in
// order) of a domain, and keeps the requests it got.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	Limit uint64
	Delay time.Duration
	// RequestHeaders are added to an allowed request after the service's
	// own x-ratelimit-checked; ResponseHeaders to a refusal's answer after
	// its x-ratelimit-limit (limited); OKResponseHeaders to an allowed
	// request's response.
	RequestHeaders, ResponseHeaders, OKResponseHeaders []*corev3.HeaderValue
	// ReportLimits makes each descriptor's status say its limit (Limit
	// per minute), the hits it has left and ResetIn, as Envoy's service
	// reports them; a refusal's answer then has no x-ratelimit-limit of
	// the service's own.
	ReportLimits bool
	ResetIn      time.Duration
	// RawBody is a refusal's raw_body.
	RawBody []byte

	mu       sync.Mutex
	hits     map[string]uint64
	requests []*rlsv3.RateLimitRequest
	metadata []metadata.MD
}

// ShouldRateLimit implements the rate limit service.
func (s *Server) ShouldRateLimit(ctx context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if s.Delay > 0 {
		select {
		case <-time.After(s.Delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metadata = append(s.metadata, md)
	if s.hits == nil {
		s.hits = map[string]uint64{}
	}
	s.requests = append(s.requests, r)
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for _, d := range r.GetDescriptors() {
		var key strings.Builder
		key.WriteString(r.GetDomain())
		for _, e := range d.GetEntries() {
			key.WriteString("\x00" + e.GetKey() + "=" + e.GetValue())
		}
		add := uint64(1)
		if h := d.GetHitsAddend(); h != nil {
			add = h.GetValue()
		} else if r.GetHitsAddend() > 0 {
			add = uint64(r.GetHitsAddend())
		}
		s.hits[key.String()] += add
		code := rlsv3.RateLimitResponse_OK
		if s.hits[key.String()] > s.Limit {
			code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = code
		}
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: code}
		if s.ReportLimits {
			st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(s.Limit), Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE}
			st.LimitRemaining = uint32(s.Limit - min(s.hits[key.String()], s.Limit))
			st.DurationUntilReset = durationpb.New(s.ResetIn)
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		resp.ResponseHeadersToAdd = s.ResponseHeaders
		if !s.ReportLimits {
			resp.ResponseHeadersToAdd = append([]*corev3.HeaderValue{{Key: "x-ratelimit-limit", Value: "limited"}}, s.ResponseHeaders...)
		}
		resp.RawBody = s.RawBody
	} else {
		resp.RequestHeadersToAdd = append([]*corev3.HeaderValue{{Key: "x-ratelimit-checked", Value: "yes"}}, s.RequestHeaders...)
		resp.ResponseHeadersToAdd = s.OKResponseHeaders
	}
	return resp, nil
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*rlsv3.RateLimitRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*rlsv3.RateLimitRequest(nil), s.requests...)
}

// Metadata returns the gRPC metadata of each request received so far, in
// the order of Requests.
func (s *Server) Metadata() []metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metadata.MD(nil), s.metadata...)
}

// Start serves s on 127.0.0.1 until the test ends and returns its address.
func Start(t testing.TB, s *Server) string {
	t.Helper()
	return policytest.ServeGRPC(t, func(srv *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(srv, s) })
}
