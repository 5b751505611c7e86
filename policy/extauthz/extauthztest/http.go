package extauthztest

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// HTTP is an HTTP authorization service (extAuthz's protocol http): each
// check is answered with the status Decide returns (200 when Decide is
// nil), and kept.
type HTTP struct {
	Decide func(*http.Request) int
	// Hold, when set, holds the checks Held picks (every one when Held is
	// nil) until it is closed or the gateway gives up on the check (a
	// service too slow to answer).
	Hold chan struct{}
	Held func(*http.Request) bool

	mu      sync.Mutex
	checks  []HTTPCheck
	arrived chan struct{}
}

// HTTPCheck is a check request as the service saw it.
type HTTPCheck struct {
	// RemoteAddr is the address the check came from (the gateway's
	// connection to the service).
	RemoteAddr  string
	Method, URI string
	Header      http.Header
	Body        string
}

// ServeHTTP answers a check (http.Handler).
func (s *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	s.mu.Lock()
	s.checks = append(s.checks, HTTPCheck{RemoteAddr: r.RemoteAddr, Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
	if s.arrived != nil {
		select {
		case s.arrived <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	if s.Hold != nil && (s.Held == nil || s.Held(r)) {
		select {
		case <-s.Hold:
		case <-r.Context().Done():
			return
		}
	}
	status := http.StatusOK
	if s.Decide != nil {
		status = s.Decide(r)
	}
	w.WriteHeader(status)
}

// Checks returns the checks received so far.
func (s *HTTP) Checks() []HTTPCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]HTTPCheck(nil), s.checks...)
}

// AwaitChecks waits up to bound for n checks in all and returns them; the
// test fails if they do not come.
func (s *HTTP) AwaitChecks(t testing.TB, n int, bound time.Duration) []HTTPCheck {
	t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if len(s.checks) >= n {
			c := append([]HTTPCheck(nil), s.checks...)
			s.mu.Unlock()
			return c
		}
		if s.arrived == nil {
			s.arrived = make(chan struct{}, 1)
		}
		arrived := s.arrived
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-deadline.C:
			t.Fatalf("%d checks after %v, want %d", len(s.Checks()), bound, n)
		}
	}
}

// StartHTTP serves s on 127.0.0.1 until the test ends and returns its
// address (host:port).
func StartHTTP(t testing.TB, s *HTTP) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
