package server

//lint:file-ignore SA1019 the tests drive x/net's HTTP/2 client directly (server/h2.go says why the server).

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// grpcTestService is grpc-go's interop test service, answering as the
// tests need: echoes, streams of the sizes asked for, the status asked
// for, and a sleep that ignores the deadline (the gateway's to enforce).
type grpcTestService struct {
	testgrpc.UnimplementedTestServiceServer
	sleeping chan struct{} // a sleeping call has begun
	wake     chan struct{} // ends sleeping calls
}

func (s *grpcTestService) UnaryCall(ctx context.Context, in *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if st := in.GetResponseStatus(); st != nil {
		return nil, status.Error(codes.Code(st.Code), st.Message)
	}
	if string(in.GetPayload().GetBody()) == "sleep" {
		s.sleeping <- struct{}{}
		<-s.wake
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", "h", "x-saw-authority", strings.Join(md.Get(":authority"), ",")))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t"))
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: append([]byte("echo:"), in.GetPayload().GetBody()...)}}, nil
}

func (s *grpcTestService) StreamingOutputCall(in *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	for _, p := range in.GetResponseParameters() {
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *grpcTestService) StreamingInputCall(stream grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	n := 0
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(n)})
		}
		if err != nil {
			return err
		}
		n += len(in.GetPayload().GetBody())
	}
}

func (s *grpcTestService) FullDuplexCall(stream grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// grpcUpstream starts a gRPC server with the test service on loopback, in
// cleartext, or over TLS when creds is not nil.
func grpcUpstream(t *testing.T, creds credentials.TransportCredentials) (string, *grpcTestService) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	svc := &grpcTestService{sleeping: make(chan struct{}, 4), wake: make(chan struct{})}
	testgrpc.RegisterTestServiceServer(srv, svc)
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() {
		close(svc.wake)
		srv.Stop()
	})
	return ln.Addr().String(), svc
}

// grpcClient is a client connection through the gateway at addr.
func grpcClient(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func TestGRPCThroughGateway(t *testing.T) {
	up, svc := grpcUpstream(t, nil)
	pki := newTestPKI(t, "grpc")
	srv := pki.Server("grpc.test", "grpc.test", "127.0.0.1")
	routes := `
    routes:
    - matches: [{path: {pathPrefix: /grpc.testing.TestService/}, headers: [{name: x-deny, value: {exact: "yes"}}]}]
      policies: {authorization: {rules: ['false']}}
      backends: [{host: ${UP}}]
    - matches: [{path: {pathPrefix: /grpc.testing.TestService/}, headers: [{name: x-down, value: {exact: "yes"}}]}]
      backends: [{host: ${DOWN}}]
    - matches: [{path: {pathPrefix: /grpc.testing.TestService/}}]
      backends: [{host: ${UP}}]
`
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - name: plain
    protocol: HTTP`+routes+`
  - name: tls
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}`+routes,
		map[string]string{"UP": up, "DOWN": closedAddr(t), "CERT": srv.CertFile, "KEY": srv.KeyFile})
	clients := map[string]*grpc.ClientConn{
		"h2c": grpcClient(t, tg.addr(1), nil),
		"h2":  grpcClient(t, tg.addr(1), credentials.NewClientTLSFromCert(pki.Pool, "grpc.test")),
	}
	for name, cc := range clients {
		tc := testgrpc.NewTestServiceClient(cc)
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			t.Run("unary, with header and trailer metadata", func(t *testing.T) {
				var header, trailer metadata.MD
				resp, err := tc.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("hi")}}, grpc.Header(&header), grpc.Trailer(&trailer))
				if err != nil {
					t.Fatal(err)
				}
				if string(resp.GetPayload().GetBody()) != "echo:hi" {
					t.Fatalf("payload %q", resp.GetPayload().GetBody())
				}
				if header.Get("x-header")[0] != "h" || len(trailer.Get("x-trailer")) != 1 || trailer.Get("x-trailer")[0] != "t" {
					t.Fatalf("header %v trailer %v", header, trailer)
				}
			})
			t.Run("server streaming", func(t *testing.T) {
				stream, err := tc.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}, {Size: 100}, {Size: 70000}}})
				if err != nil {
					t.Fatal(err)
				}
				var sizes []int
				for {
					m, err := stream.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					sizes = append(sizes, len(m.GetPayload().GetBody()))
				}
				if len(sizes) != 3 || sizes[0] != 1 || sizes[1] != 100 || sizes[2] != 70000 {
					t.Fatalf("sizes %v", sizes)
				}
			})
			t.Run("client streaming", func(t *testing.T) {
				stream, err := tc.StreamingInputCall(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range []int{10, 20000, 30} {
					if err := stream.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, n)}}); err != nil {
						t.Fatal(err)
					}
				}
				resp, err := stream.CloseAndRecv()
				if err != nil || resp.GetAggregatedPayloadSize() != 20040 {
					t.Fatalf("%v %v", resp, err)
				}
			})
			t.Run("bidirectional", func(t *testing.T) {
				stream, err := tc.FullDuplexCall(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// Each answer comes before the next message is sent: both
				// directions are open at once.
				for _, m := range []string{"a", "bb", "ccc"} {
					if err := stream.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(m)}}); err != nil {
						t.Fatal(err)
					}
					got, err := stream.Recv()
					if err != nil || string(got.GetPayload().GetBody()) != m {
						t.Fatalf("%v %v", got, err)
					}
				}
				if err := stream.CloseSend(); err != nil {
					t.Fatal(err)
				}
				if _, err := stream.Recv(); err != io.EOF {
					t.Fatalf("after the last: %v", err)
				}
			})
			t.Run("the upstream's status", func(t *testing.T) {
				_, err := tc.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.NotFound), Message: "no such thing: ünïcode"}})
				if st, _ := status.FromError(err); st.Code() != codes.NotFound || st.Message() != "no such thing: ünïcode" {
					t.Fatalf("%v", err)
				}
			})
			t.Run("the gateway's statuses", func(t *testing.T) {
				for _, c := range []struct {
					md   []string
					code codes.Code
				}{
					{[]string{"x-deny", "yes"}, codes.PermissionDenied},
					{[]string{"x-down", "yes"}, codes.Unavailable},
				} {
					_, err := tc.UnaryCall(metadata.AppendToOutgoingContext(ctx, c.md...), &testgrpc.SimpleRequest{})
					if st, _ := status.FromError(err); st.Code() != c.code {
						t.Errorf("%v: %v; want %v", c.md, err, c.code)
					}
				}
				// No route: the method is not served here.
				_, err := testgrpc.NewUnimplementedServiceClient(cc).UnimplementedCall(ctx, &testgrpc.Empty{})
				if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "route not found") {
					t.Errorf("no route: %v", err)
				}
			})
			t.Run("deadline", func(t *testing.T) {
				short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_, err := tc.UnaryCall(short, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("sleep")}})
				<-svc.sleeping
				if st, _ := status.FromError(err); st.Code() != codes.DeadlineExceeded {
					t.Fatalf("%v", err)
				}
			})
		})
	}
}

// TestGRPCDeadlineEnforced: the gateway holds a gRPC request to its
// grpc-timeout whatever the upstream does, and answers DEADLINE_EXCEEDED
// as a gRPC status.
func TestGRPCDeadlineEnforced(t *testing.T) {
	up, svc := grpcUpstream(t, nil)
	tg := startGateway(t, oneRoute(up), nil)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
	// A unary call's message: uncompressed, the payload "sleep".
	msg := []byte{0, 0, 0, 0, 9, 0x1a, 7, 0x12, 5, 's', 'l', 'e', 'e', 'p'}
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/grpc.testing.TestService/UnaryCall", strings.NewReader(string(msg)))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Grpc-Timeout", "150m")
	req.Header.Set("Te", "trailers")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	<-svc.sleeping
	grpcStatus := resp.Header.Get("Grpc-Status")
	if grpcStatus == "" {
		grpcStatus = resp.Trailer.Get("Grpc-Status")
	}
	if resp.StatusCode != 200 || grpcStatus != "4" {
		t.Fatalf("%d grpc-status %q; want 200 and 4 (DEADLINE_EXCEEDED)", resp.StatusCode, grpcStatus)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %v", d)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

// TestTrailersBothWays: request and response trailer fields pass through
// the gateway, from HTTP/1.1 and HTTP/2 clients, to HTTP/1.1 and HTTP/2
// upstreams.
func TestTrailersBothWays(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Resp-Trailer")
		w.Header().Set("X-Upstream-Proto", r.Proto)
		_, _ = w.Write(b)
		w.Header().Set("X-Resp-Trailer", "resp-"+r.Trailer.Get("X-Req-Trailer"))
	}))
	for _, version := range []string{"HTTP1", "HTTP2"} {
		tg := startGateway(t, oneRouteVersion(up, version), nil)
		for _, client := range bothClients() {
			t.Run(client.name+" to "+version, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/t", io.NopCloser(strings.NewReader("body")))
				req.ContentLength = -1
				req.Trailer = http.Header{"X-Req-Trailer": {"v"}}
				resp, err := client.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantProto := map[string]string{"HTTP1": "HTTP/1.1", "HTTP2": "HTTP/2.0"}[version]
				if string(b) != "body" || resp.Header.Get("X-Upstream-Proto") != wantProto {
					t.Fatalf("%q %v", b, resp.Header)
				}
				if got := resp.Trailer.Get("X-Resp-Trailer"); got != "resp-v" {
					t.Fatalf("trailer %q (%v); want resp-v", got, resp.Trailer)
				}
			})
		}
	}
}

// TestHTTP2VersionWhereServed: http.version HTTP2 on a backend kind that
// speaks HTTP/1.1 to its targets is a config error, not a setting ignored.
func TestHTTP2VersionWhereServed(t *testing.T) {
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	t.Cleanup(func() { gw.Shutdown(expiredContext()) })
	err := gw.Apply(parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - { name: a, mcp: { host: 'http://127.0.0.1:1/mcp' } }
        policies: {http: {version: HTTP2}}
`, nil))
	if err == nil || !strings.Contains(err.Error(), "http.version: HTTP2 applies to host and dynamic backends") {
		t.Fatalf("%v", err)
	}
}

// TestGRPCLocalReplyReplacesStatus: the gateway's own answer to a gRPC
// request carries its grpc-status and grpc-message alone, even when the
// answer came with those fields, twice (here an ext_proc service's
// immediate response, 403 without a gRPC status): PERMISSION_DENIED and
// the answer's text, over HTTP/1.1 and HTTP/2.
func TestGRPCLocalReplyReplacesStatus(t *testing.T) {
	proc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		var set []*corev3.HeaderValueOption
		for _, kv := range [][2]string{{"grpc-status", "0"}, {"grpc-status", "0"}, {"grpc-message", "fine"}, {"grpc-message", "fine"}} {
			set = append(set, &corev3.HeaderValueOption{
				Header:       &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])},
				AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD,
				Append:       wrapperspb.Bool(true),
			})
		}
		return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
			Headers: &procv3.HeaderMutation{SetHeaders: set},
			Body:    []byte("denied"),
		}}}}
	}}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extProc: {host: '${PROC}'}
      backends: [{host: '${UP}'}]
`, map[string]string{"PROC": extproctest.Start(t, proc), "UP": closedAddr(t)})
	for _, client := range bothClients() {
		t.Run(client.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/grpc.testing.TestService/UnaryCall", strings.NewReader("\x00\x00\x00\x00\x00"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			resp, _ := doWith(t, client.client, req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := resp.Header.Values("Grpc-Status"); !slices.Equal(got, []string{"7"}) {
				t.Errorf("grpc-status %q, want [7]", got)
			}
			if got := resp.Header.Values("Grpc-Message"); !slices.Equal(got, []string{"denied"}) {
				t.Errorf("grpc-message %q, want [denied]", got)
			}
		})
	}
}

// TestGRPCTimeoutHeader: grpc-timeout's eight digits and unit read as a
// duration; one beyond what a duration holds (292 years) is no deadline,
// not a product wrapped negative that ends the call at once.
func TestGRPCTimeoutHeader(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"150m", 150 * time.Millisecond, true},
		{"5S", 5 * time.Second, true},
		{"99999999n", 99999999, true},
		{"2562047H", 2562047 * time.Hour, true},
		{"2562048H", 0, false},
		{"99999999H", 0, false},
		{"99999999M", 99999999 * time.Minute, true},
		{"1x", 0, false},
		{"123456789S", 0, false},
		{"S", 0, false},
	} {
		var h fasthttp.RequestHeader
		h.Set("Grpc-Timeout", tc.v)
		got, ok := grpcTimeout(&h)
		if got != tc.want || ok != tc.ok {
			t.Errorf("grpc-timeout %q: %v %v, want %v %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
