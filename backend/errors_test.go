package backend

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		desc   string
		err    error
		want   Failure
		status int
	}{
		{desc: "nil", err: nil, want: FailureNone, status: 200},
		{desc: "refused", err: fmt.Errorf("%w: %w", ErrBackendUnreachable, syscall.ECONNREFUSED), want: FailureConnect, status: 503},
		{desc: "dial op error", err: &net.OpError{Op: "dial", Err: errors.New("x")}, want: FailureConnect, status: 503},
		{desc: "dns", err: &net.DNSError{Err: "no such host", Name: "x"}, want: FailureConnect, status: 503},
		{desc: "no free conns", err: fasthttp.ErrNoFreeConns, want: FailureConnect, status: 503},
		{desc: "h2 stream refused", err: fmt.Errorf("%w (3 times): x", ErrStreamRefused), want: FailureConnect, status: 503},
		{desc: "fasthttp timeout", err: fasthttp.ErrTimeout, want: FailureTimeout, status: 504},
		{desc: "deadline", err: os.ErrDeadlineExceeded, want: FailureTimeout, status: 504},
		{desc: "closed early", err: fasthttp.ErrConnectionClosed, want: FailureProtocol, status: 502},
		{desc: "garbage", err: errors.New("cannot parse response status line"), want: FailureProtocol, status: 502},
		{desc: "eof", err: io.ErrUnexpectedEOF, want: FailureProtocol, status: 502},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := Classify(tc.err)
			if f != tc.want || f.Status() != tc.status {
				t.Fatalf("Classify(%v) = %v (%d), want %v (%d)", tc.err, f, f.Status(), tc.want, tc.status)
			}
		})
	}
}

func TestPoolsSurviveAndRetain(t *testing.T) {
	p := NewPools()
	s := PoolSettings{Dialing: Dialing{ConnectTimeout: DefaultConnectTimeout, Keepalive: DefaultKeepalive}}
	a := p.Get("127.0.0.1:1", s)
	if p.Get("127.0.0.1:1", s) != a {
		t.Fatal("same address and settings must share a pool")
	}
	s2 := s
	s2.ConnectTimeout = 1
	if p.Get("127.0.0.1:1", s2) == a {
		t.Fatal("different settings must not share a pool")
	}
	p.Retain(map[*Upstream]bool{a: true})
	if p.Len() != 1 || p.Get("127.0.0.1:1", s) != a {
		t.Fatalf("Retain kept %d pools", p.Len())
	}
	if a.HostName != "" || a.HostHeader != nil {
		t.Fatal("IP backend must keep the client's Host")
	}
	n := p.Get("localhost:80", s)
	if n.HostName != "localhost" || string(n.HostHeader) != "localhost" {
		t.Fatalf("hostname backend Host %q", n.HostHeader)
	}
	if m := p.Get("localhost:8080", s); string(m.HostHeader) != "localhost:8080" {
		t.Fatalf("hostname backend Host %q", m.HostHeader)
	}
}

func TestDynamic(t *testing.T) {
	d := NewDynamic(PoolSettings{})
	d.max = 2
	if _, err := d.For(nil, "80"); !errors.Is(err, ErrNoDestination) {
		t.Fatalf("empty authority: %v", err)
	}
	u, err := d.For([]byte("example.test"), "80")
	if err != nil || u.Addr != "example.test:80" {
		t.Fatalf("%v %v", u, err)
	}
	if again, _ := d.For([]byte("example.test"), "80"); again != u {
		t.Fatal("pool not reused")
	}
	d.For([]byte("b.test:81"), "80")
	d.For([]byte("c.test:82"), "80")
	if len(d.byAddr) > 2 {
		t.Fatalf("dynamic pools unbounded: %d", len(d.byAddr))
	}
	if _, err := d.For([]byte(":"), "80"); !errors.Is(err, ErrNoDestination) {
		t.Fatalf("bad authority: %v", err)
	}
}

func TestIdempotent(t *testing.T) {
	for m, want := range map[string]bool{"GET": true, "HEAD": true, "PUT": true, "DELETE": true, "OPTIONS": true, "POST": false, "PATCH": false, "get": false} {
		if Idempotent([]byte(m)) != want {
			t.Errorf("Idempotent(%s) != %v", m, want)
		}
	}
}
