package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// waitFor polls cond until it holds or the bound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, bounded above
	}
}

func TestOpenerOpen(t *testing.T) {
	tests := []struct {
		desc       string
		handler    http.HandlerFunc
		n          int
		wantOpened int
		wantErr    string
	}{
		{
			desc:       "all connections held",
			handler:    func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello")) },
			n:          25,
			wantOpened: 25,
		},
		{
			desc:       "error status counts as a failure",
			handler:    func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) },
			n:          5,
			wantOpened: 0,
			wantErr:    "response status 502",
		},
		{
			desc: "server closing the connection counts as a failure",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				_, _ = w.Write([]byte("bye"))
			},
			n:          3,
			wantOpened: 0,
			wantErr:    "asked to close",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			o := opener{addr: addr, request: newRequest(addr, "/x"), parallel: 4}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p, err := o.open(ctx, tc.n)
			defer p.close()
			if got := p.opened(); got != tc.wantOpened {
				t.Fatalf("opened = %d, want %d (err %v)", got, tc.wantOpened, err)
			}
			if got := p.stillOpen(); got != tc.wantOpened {
				t.Fatalf("stillOpen = %d, want %d", got, tc.wantOpened)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("open error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPoolNoticesServerClose(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	o := opener{addr: addr, request: newRequest(addr, "/"), parallel: 2}
	p, err := o.open(context.Background(), 6)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer p.close()
	if p.stillOpen() != 6 {
		t.Fatalf("stillOpen = %d, want 6", p.stillOpen())
	}
	srv.CloseClientConnections()
	waitFor(t, "the pool to notice closed connections", func() bool { return p.stillOpen() == 0 })
	if p.opened() != 6 {
		t.Fatalf("opened = %d after server close, want 6", p.opened())
	}
}

func TestOpenerDialFailure(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // nothing listens there any more
	o := opener{addr: addr, request: newRequest(addr, "/"), parallel: 2}
	p, err := o.open(context.Background(), 3)
	defer p.close()
	if err == nil || p.opened() != 0 {
		t.Fatalf("open on a closed port: opened %d, err %v; want 0 and an error", p.opened(), err)
	}
}
