package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// heldUpstream is an upstream whose answers wait for the test: each value
// sent on release lets one request be answered. It counts the connections
// it was given.
type heldUpstream struct {
	u       *Upstream
	h2      bool
	arrived chan string
	release chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// startHeld starts a held upstream, in HTTP/2 over TLS allowing one
// stream per connection when h2, and a pool to it of at most maxConns
// connections whose requests wait up to wait for one.
func startHeld(t *testing.T, h2 bool, maxConns int, wait time.Duration) *heldUpstream {
	t.Helper()
	hu := &heldUpstream{h2: h2, arrived: make(chan string, 16), release: make(chan struct{}), conns: map[net.Conn]bool{}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hu.arrived <- r.URL.Path
		select {
		case <-hu.release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "answer "+r.URL.Path) //nolint:errcheck
	})
	track := func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			hu.mu.Lock()
			hu.conns[c] = true
			hu.mu.Unlock()
		}
	}
	s := PoolSettings{MaxConns: maxConns, Dialing: Dialing{ConnectTimeout: wait}}
	if h2 {
		addr, roots := h2sTLSUpstream(t, true, handler, func(ts *httptest.Server) {
			ts.Config.ConnState = track
			ts.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
		})
		s.TLS = UpstreamTLS{Enabled: true, RootsFile: roots}
		hu.u = NewUpstream(addr, s)
	} else {
		ts := httptest.NewUnstartedServer(handler)
		ts.Config.ConnState = track
		ts.Start()
		t.Cleanup(ts.Close)
		hu.u = NewUpstream(ts.Listener.Addr().String(), s)
	}
	t.Cleanup(hu.u.Close)
	// Before the server's Close, which waits for its handlers: the ones
	// still held are answered.
	t.Cleanup(func() { close(hu.release) })
	return hu
}

// exchange sends GET path with the deadline, in the upstream's version,
// and returns the body.
func (hu *heldUpstream) exchange(path string, deadline time.Time) (string, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(path)
	req.SetHost("upstream")
	var err error
	if hu.h2 {
		err = hu.u.ExchangeH2(context.Background(), req, resp, deadline, nil, false)
	} else {
		err = hu.u.Exchange(req, resp, deadline)
	}
	if err != nil {
		return "", err
	}
	if s := resp.BodyStream(); s != nil {
		b, err := io.ReadAll(s)
		_ = resp.CloseBodyStream()
		return string(b), err
	}
	return string(resp.Body()), nil
}

// start sends GET path on a goroutine of its own; its result comes on the
// channel returned.
func (hu *heldUpstream) start(path string, deadline time.Time) chan error {
	done := make(chan error, 1)
	go func() {
		body, err := hu.exchange(path, deadline)
		if err == nil && body != "answer "+path {
			err = fmt.Errorf("body %q", body)
		}
		done <- err
	}()
	return done
}

// held waits for path's request to reach the upstream, and, in HTTP/2,
// for the pool to know that its connection allows no second stream.
func (hu *heldUpstream) held(t *testing.T, path string) {
	t.Helper()
	select {
	case got := <-hu.arrived:
		if got != path {
			t.Fatalf("%s reached the upstream, want %s", got, path)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not reach the upstream", path)
	}
	if hu.h2 {
		poll(t, "the upstream's SETTINGS", func() bool {
			p := hu.u.h2Conns()
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, cc := range p.conns {
				if cc.State().MaxConcurrentStreams != 1 {
					return false
				}
			}
			return true
		})
	}
}

// waiting waits until a request waits for a connection of the pool.
func (hu *heldUpstream) waiting(t *testing.T) {
	t.Helper()
	if hu.h2 {
		poll(t, "a request waiting for a stream", func() bool { return hu.u.h2Conns().waiting.Load() == 1 })
		return
	}
	// fasthttp keeps its waiters to itself: the waiting goroutine is found
	// by its stack.
	buf := make([]byte, 1<<20)
	poll(t, "a request waiting for a connection", func() bool {
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("fasthttp.(*HostClient).AcquireConn("))
	})
}

func (hu *heldUpstream) connCount() int {
	hu.mu.Lock()
	defer hu.mu.Unlock()
	return len(hu.conns)
}

// poll waits, for up to 10 s, until cond holds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func result(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not end")
		return nil
	}
}

// A request that finds every connection of its pool busy waits for one
// (HTTP/2: for a stream, the pool being at its connection limit) rather
// than failing at once, as fasthttp's 512-connection pool did: it goes on
// the first that comes free. Past the wait (the connect timeout) it fails
// with ErrPoolFull, a 503; a request deadline ending sooner is a timeout.
func TestUpstreamPoolLimitWaits(t *testing.T) {
	for _, version := range []struct {
		name string
		h2   bool
	}{{"HTTP/1.1", false}, {"HTTP/2", true}} {
		t.Run(version.name, func(t *testing.T) {
			t.Run("a connection comes free", func(t *testing.T) {
				hu := startHeld(t, version.h2, 2, 10*time.Second)
				far := time.Now().Add(20 * time.Second)
				first := hu.start("/1", far)
				hu.held(t, "/1")
				second := hu.start("/2", far)
				hu.held(t, "/2")
				third := hu.start("/3", far)
				hu.waiting(t)
				hu.release <- struct{}{} // one of the first two is answered
				hu.held(t, "/3")
				hu.release <- struct{}{}
				hu.release <- struct{}{}
				for i, done := range []chan error{first, second, third} {
					if err := result(t, done); err != nil {
						t.Fatalf("request %d: %v", i+1, err)
					}
				}
				if n := hu.connCount(); n != 2 {
					t.Fatalf("the upstream got %d connections, want the limit, 2", n)
				}
			})
			for _, tc := range []struct {
				desc     string
				wait     time.Duration
				deadline time.Duration
				want     error
				status   int
			}{
				{desc: "none comes free within the wait", wait: 200 * time.Millisecond, deadline: 20 * time.Second, want: ErrPoolFull, status: fasthttp.StatusServiceUnavailable},
				{desc: "the request's deadline ends the wait", wait: 10 * time.Second, deadline: 200 * time.Millisecond, want: fasthttp.ErrTimeout, status: fasthttp.StatusGatewayTimeout},
			} {
				t.Run(tc.desc, func(t *testing.T) {
					hu := startHeld(t, version.h2, 1, tc.wait)
					first := hu.start("/1", time.Now().Add(20*time.Second))
					hu.held(t, "/1")
					start := time.Now()
					_, err := hu.exchange("/2", start.Add(tc.deadline))
					took := time.Since(start)
					if !errors.Is(err, tc.want) {
						t.Fatalf("error %v, want %v", err, tc.want)
					}
					if st := Classify(err).Status(); st != tc.status {
						t.Fatalf("status %d, want %d", st, tc.status)
					}
					if bound := min(tc.wait, tc.deadline); took < bound-10*time.Millisecond || took > bound+5*time.Second {
						t.Fatalf("failed after %v; want after about %v", took, bound)
					}
					hu.release <- struct{}{}
					if err := result(t, first); err != nil {
						t.Fatalf("the request holding the connection: %v", err)
					}
					if n := hu.connCount(); n != 1 {
						t.Fatalf("the upstream got %d connections, want the limit, 1", n)
					}
				})
			}
		})
	}
}

// PoolSettings.MaxIdle (poolMaxSize, agentgateway's meaning) bounds the
// connections kept idle, not those open: the requests get a connection
// each, and the ones given back beyond the bound close.
func TestUpstreamPoolMaxIdle(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		maxIdle  int
		wantIdle int
	}{
		{desc: "no bound", maxIdle: 0, wantIdle: 3},
		{desc: "one kept", maxIdle: 1, wantIdle: 1},
		{desc: "none kept (poolMaxSize 0)", maxIdle: NoIdleConns, wantIdle: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			hu := startHeld(t, false, 0, 10*time.Second)
			hu.u.maxIdle = tc.maxIdle
			far := time.Now().Add(20 * time.Second)
			var dones []chan error
			for i := range 3 {
				path := "/" + fmt.Sprint(i)
				dones = append(dones, hu.start(path, far))
				hu.held(t, path)
			}
			for range dones {
				hu.release <- struct{}{}
			}
			for _, done := range dones {
				if err := result(t, done); err != nil {
					t.Fatal(err)
				}
			}
			if n := hu.connCount(); n != 3 {
				t.Fatalf("the upstream got %d connections, want one per request, 3", n)
			}
			if n := hu.u.client.IdleConnsCount(); n != tc.wantIdle {
				t.Fatalf("%d idle connections, want %d", n, tc.wantIdle)
			}
		})
	}
}
