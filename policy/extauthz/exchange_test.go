package extauthz

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
)

// rawAuthz is an HTTP authorization service on raw TCP: answer says, for
// the n-th check on a connection (from 1), whether to answer it 200
// (keeping the connection) or to close the connection without a word.
type rawAuthz struct {
	answer func(n int) bool
	// closeIdle closes a connection once it has answered a check, as a
	// service whose idle timeout is short; closed gets one value per
	// connection closed so.
	closeIdle bool
	closed    chan struct{}

	mu     sync.Mutex
	checks int
}

func (s *rawAuthz) start(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s.closed = make(chan struct{}, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return ln.Addr().String()
}

func (s *rawAuthz) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		req.Body.Close()
		s.mu.Lock()
		s.checks++
		s.mu.Unlock()
		if !s.answer(n) {
			return
		}
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")); err != nil {
			return
		}
		if s.closeIdle {
			c.Close()
			s.closed <- struct{}{}
			return
		}
	}
}

func (s *rawAuthz) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checks
}

// TestHTTPCheckOneAttempt: a service that closes the connection without
// answering is asked once per check, for a request of any method and for
// networkExtAuthz's check of a connection. fasthttp's HostClient sent a
// GET's check (and every connection's) five times.
func TestHTTPCheckOneAttempt(t *testing.T) {
	s := &rawAuthz{answer: func(int) bool { return false }}
	addr := s.start(t)
	cfg := config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}
	p := newPolicy(t, cfg, addr)
	for i, method := range []string{"GET", "POST", "HEAD", "PUT"} {
		c := policytest.Ctx(policytest.NewRequest(method, "/x", "Authorization", "Bearer a"))
		if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 403 {
			t.Fatalf("%s: %d, want the failure's 403", method, c.Fast.Response.StatusCode())
		}
		if n := s.count(); n != i+1 {
			t.Fatalf("%s: the service got %d checks in all, want %d", method, n, i+1)
		}
	}
	conn := connPolicy(t, cfg, addr, time.Second)
	before := s.count()
	if v := conn.CheckConnection(connSource, connDest); v != Failed {
		t.Fatalf("networkExtAuthz: verdict %d, want Failed", v)
	}
	if n := s.count() - before; n != 1 {
		t.Fatalf("networkExtAuthz: the service got %d checks, want 1", n)
	}
}

// TestHTTPCheckStalePooledConnection: a check does not fail because the
// service closed a pooled connection: one it closed while idle is not
// used, and one whose close crossed the check (the service read it and
// closed without answering, on a connection that had served a check
// before) has the check sent once more, on another connection. A POST's
// check was not resent by fasthttp (not idempotent) and failed.
func TestHTTPCheckStalePooledConnection(t *testing.T) {
	t.Run("closed while idle", func(t *testing.T) {
		s := &rawAuthz{answer: func(int) bool { return true }, closeIdle: true}
		p := newPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}, s.start(t))
		for i, method := range []string{"POST", "POST", "GET", "PUT"} {
			c := policytest.Ctx(policytest.NewRequest(method, "/x", "Authorization", "Bearer a"))
			if p.OnRequest(c) != policy.Continue {
				t.Fatalf("check %d (%s) on a connection the service closed while idle: %d", i+1, method, c.Fast.Response.StatusCode())
			}
			select {
			case <-s.closed:
			case <-time.After(5 * time.Second):
				t.Fatal("the service did not close its connection")
			}
			if n := s.count(); n != i+1 {
				t.Fatalf("check %d: the service got %d checks in all", i+1, n)
			}
		}
	})
	t.Run("closed across the check", func(t *testing.T) {
		// Each connection answers its first check and drops its second.
		s := &rawAuthz{answer: func(n int) bool { return n == 1 }}
		p := newPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}, s.start(t))
		for i, want := range []int{1, 3, 5} {
			c := policytest.Ctx(policytest.NewRequest("POST", "/x", "Authorization", "Bearer a"))
			if p.OnRequest(c) != policy.Continue {
				t.Fatalf("check %d: %d", i+1, c.Fast.Response.StatusCode())
			}
			if n := s.count(); n != want {
				t.Fatalf("check %d: the service got %d checks in all, want %d", i+1, n, want)
			}
		}
	})
}
