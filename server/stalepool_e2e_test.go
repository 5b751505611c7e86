package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// idleClosingUpstream is an HTTP/1.1 upstream that echoes request bodies
// and can close every keep-alive connection that sits idle, as a server
// does at its idle timeout: the gateway's pooled connections then wait in
// CLOSE-WAIT for their next request.
type idleClosingUpstream struct {
	srv  *http.Server
	addr string

	mu     sync.Mutex
	conns  map[net.Conn]http.ConnState
	closed int
	// hold, when set, keeps each request until release is closed, so
	// that a burst of requests opens a connection each.
	hold    chan struct{}
	arrived chan struct{}
}

func newIdleClosingUpstream(t *testing.T) *idleClosingUpstream {
	t.Helper()
	u := &idleClosingUpstream{conns: map[net.Conn]http.ConnState{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.mu.Lock()
			hold, arrived := u.hold, u.arrived
			u.mu.Unlock()
			if hold != nil {
				arrived <- struct{}{}
				<-hold
			}
			b, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Write(b) //nolint:errcheck
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			u.mu.Lock()
			defer u.mu.Unlock()
			if s == http.StateClosed || s == http.StateHijacked {
				delete(u.conns, c)
				u.closed++
				return
			}
			u.conns[c] = s
		},
	}
	go u.srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { u.srv.Close() })
	u.addr = ln.Addr().String()
	return u
}

// open returns how many connections are open, and how many closed so far.
func (u *idleClosingUpstream) open() (open, closed int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.conns), u.closed
}

// warm has the gateway pool n connections to the upstream: n requests
// are held until all of them arrived, each on a connection of its own.
func (u *idleClosingUpstream) warm(t *testing.T, gatewayURL string, n int) {
	t.Helper()
	hold, arrived := make(chan struct{}), make(chan struct{}, n)
	u.mu.Lock()
	u.hold, u.arrived = hold, arrived
	u.mu.Unlock()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			resp, err := testClient.Get(fmt.Sprintf("%s/warm/%d", gatewayURL, i))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("warm-up request: %d", resp.StatusCode)
				}
			}
			errs <- err
		}()
	}
	for range n {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the warm-up requests did not all reach the upstream")
		}
	}
	u.mu.Lock()
	u.hold, u.arrived = nil, nil
	u.mu.Unlock()
	close(hold)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// closeIdle closes every connection of the upstream, all idle in the
// gateway's pool, and waits until they are closed.
func (u *idleClosingUpstream) closeIdle(t *testing.T) {
	t.Helper()
	// A connection counts as idle once its response is out, which may
	// come after the client read it: closing is asked again until none
	// is left. Turning keep-alives off closes the idle connections.
	eventually(t, 10*time.Second, "the upstream closing its idle connections", func() bool {
		u.srv.SetKeepAlivesEnabled(false)
		open, _ := u.open()
		return open == 0
	})
	u.srv.SetKeepAlivesEnabled(true)
}

// TestStalePooledConnectionsRequestBodySentOnce: after the upstream closed
// all of the gateway's idle pooled connections (its idle timeout, a
// restart), requests that cannot be sent twice (a POST, a body streamed
// from the client) must still each go on a live connection: they used to
// get 502 (upstream_error EOF) once more stale connections waited than
// the gateway looked at before sending, about one request in four after a
// burst had left forty. Sequential and concurrent requests alike arrive
// whole and are answered.
func TestStalePooledConnectionsRequestBodySentOnce(t *testing.T) {
	const pooled = 40
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up := newIdleClosingUpstream(t)
			tg := startGatewayWith(t, oneRoute(up.addr), nil, tr)
			for _, tc := range []struct {
				desc       string
				method     string
				chunked    bool
				size       int
				concurrent bool
			}{
				{desc: "chunked POST, sequential", method: http.MethodPost, chunked: true, size: 9000},
				{desc: "chunked POST, concurrent", method: http.MethodPost, chunked: true, size: 9000, concurrent: true},
				{desc: "small chunked POST, sequential", method: http.MethodPost, chunked: true, size: 8},
				{desc: "content-length POST, sequential", method: http.MethodPost, size: 9000},
				{desc: "content-length POST, concurrent", method: http.MethodPost, size: 9000, concurrent: true},
				// Sent again once after a stale connection, which took
				// the pool's stale connections two looks at a time.
				{desc: "GET, sequential", method: http.MethodGet},
			} {
				t.Run(tc.desc, func(t *testing.T) {
					up.warm(t, tg.url(3000), pooled)
					up.closeIdle(t)
					post := func(i int) error {
						want := strings.Repeat(fmt.Sprintf("%s-%d;", tc.desc, i), tc.size/len(tc.desc)+1)[:tc.size]
						var body io.Reader
						if tc.size > 0 {
							body = strings.NewReader(want)
						}
						if tc.chunked {
							body = io.MultiReader(body) // unknown length: sent chunked
						}
						req, err := http.NewRequest(tc.method, fmt.Sprintf("%s/req/%d", tg.url(3000), i), body)
						if err != nil {
							return err
						}
						resp, err := testClient.Do(req)
						if err != nil {
							return err
						}
						defer resp.Body.Close()
						got, err := io.ReadAll(resp.Body)
						if err != nil {
							return err
						}
						if resp.StatusCode != 200 {
							return fmt.Errorf("%s %d: status %d: %s", tc.method, i, resp.StatusCode, got)
						}
						if !bytes.Equal(got, []byte(want)) {
							return fmt.Errorf("%s %d: upstream got %d bytes, want the %d sent", tc.method, i, len(got), len(want))
						}
						return nil
					}
					errs := make(chan error, pooled)
					for i := range pooled {
						if tc.concurrent {
							go func() { errs <- post(i) }()
						} else {
							errs <- post(i)
						}
					}
					failed := 0
					for range pooled {
						if err := <-errs; err != nil {
							failed++
							t.Error(err)
						}
					}
					if failed > 0 {
						t.Fatalf("%d of %d requests failed after the upstream closed the pooled connections", failed, pooled)
					}
				})
			}
		})
	}
}
