// Package policytest builds requests and policy contexts for the tests of
// policy kinds, as the server would hand them over, and serves the gRPC
// services their tests stand up.
package policytest

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"

	"github.com/relaygate/gateway/policy"
)

// NewRequest builds a request context; headers are name/value pairs.
func NewRequest(method, uri string, headers ...string) *fasthttp.RequestCtx {
	var fctx fasthttp.RequestCtx
	fctx.Request.Header.SetMethod(method)
	fctx.Request.SetRequestURI(uri)
	fctx.Request.Header.SetHost("gw.test")
	for i := 0; i+1 < len(headers); i += 2 {
		fctx.Request.Header.Add(headers[i], headers[i+1])
	}
	return &fctx
}

// Ctx wraps a request as the server does: Path is the raw path.
func Ctx(fctx *fasthttp.RequestCtx) *policy.Ctx {
	uri := fctx.Request.Header.RequestURI()
	path := uri
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		path = uri[:i]
	}
	return &policy.Ctx{Fast: fctx, Path: path, Host: []byte("gw.test"), Scheme: []byte("http")}
}

// ServeGRPC serves a gRPC server on 127.0.0.1 (an OS-chosen port) until
// the test ends, with the services register puts on it, and returns its
// "host:port": the external services of the policies' tests.
func ServeGRPC(t testing.TB, register func(*grpc.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// ClosingService listens on 127.0.0.1 and closes every connection as soon
// as it is accepted, as a gRPC service in an outage looks to its clients;
// attempts gets the time of each connection (64 at most waiting).
func ClosingService(t testing.TB) (addr string, attempts <-chan time.Time) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan time.Time, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case accepted <- time.Now():
			default:
			}
		}
	}()
	return ln.Addr().String(), accepted
}

// Reconnects fails t unless n connection attempts come within the bound,
// none more than maxGap after the one before: a client's reconnect backoff
// is bounded (policy.GRPCReconnect). grpc-go's default waits 1, 1.6, 2.56,
// 4.1 s (±20%) between attempts, so its third wait is over 2 s.
func Reconnects(t testing.TB, attempts <-chan time.Time, n int, maxGap, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	var last time.Time
	for i := range n {
		select {
		case at := <-attempts:
			if i > 0 && at.Sub(last) > maxGap {
				t.Fatalf("attempt %d came %v after the one before, want at most %v", i+1, at.Sub(last), maxGap)
			}
			last = at
		case <-deadline:
			t.Fatalf("%d connection attempts in %v, want %d", i, within, n)
		}
	}
}
