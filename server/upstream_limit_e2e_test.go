package server

import (
	"bytes"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// An upstream pool at its connection limit makes a request wait for a
// connection, up to the connect timeout, then answers 503 with a body that
// says so; poolMaxSize (agentgateway's meaning) bounds the idle
// connections, not those open.
func TestUpstreamConnectionLimit(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		maxConns int64  // the pools' limit, lowered for the test (0: the default)
		backend  string // config.backend
		// Requests sent at once: the first `held` of them reach the
		// upstream and wait there; the rest get `want`, or, when `free`,
		// wait for a connection, which the test frees.
		requests, held int
		free           bool
		want           int
		wantBody       string
		minTime        time.Duration
	}{
		{desc: "none comes free within the connect timeout", maxConns: 1, backend: "{connectTimeout: 200ms}",
			requests: 2, held: 1, want: 503, wantBody: "upstream connection limit reached", minTime: 190 * time.Millisecond},
		{desc: "a request waits for a connection that comes free", maxConns: 1, backend: "{connectTimeout: 10s}",
			requests: 2, held: 1, free: true, want: 200},
		{desc: "poolMaxSize does not limit the connections open", backend: "{poolMaxSize: 1}",
			requests: 3, held: 3, want: 200},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			poolMaxConns.Store(tc.maxConns)
			t.Cleanup(func() { poolMaxConns.Store(0) })
			arrived := make(chan struct{}, tc.requests)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				w.Write([]byte("ok")) //nolint:errcheck
			}))
			tg := startGateway(t, "config:\n  backend: "+tc.backend+"\nbinds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends: [{host: '${UP}'}]\n", map[string]string{"UP": up})
			type answer struct {
				status int
				body   string
				took   time.Duration
			}
			send := func() chan answer {
				c := make(chan answer, 1)
				go func() {
					start := time.Now()
					resp, err := testClient.Get(tg.url(3000) + "/")
					if err != nil {
						c <- answer{body: err.Error()}
						return
					}
					defer resp.Body.Close()
					var b bytes.Buffer
					b.ReadFrom(resp.Body) //nolint:errcheck
					c <- answer{resp.StatusCode, strings.TrimSpace(b.String()), time.Since(start)}
				}()
				return c
			}
			var heldAnswers []chan answer
			for range tc.held {
				heldAnswers = append(heldAnswers, send())
				select {
				case <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("a request did not reach the upstream")
				}
			}
			var rest []chan answer
			for range tc.requests - tc.held {
				rest = append(rest, send())
			}
			if tc.free {
				// The request waits in the pool (fasthttp keeps its
				// waiters to itself: the goroutine is found by its stack)
				// until a held one is answered.
				buf := make([]byte, 1<<20)
				eventually(t, 10*time.Second, "a request waiting for a connection", func() bool {
					return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("fasthttp.(*HostClient).AcquireConn("))
				})
				release <- struct{}{}
				<-arrived
			}
			for _, c := range rest {
				if tc.free {
					release <- struct{}{}
				}
				a := <-c
				if a.status != tc.want || tc.wantBody != "" && a.body != tc.wantBody {
					t.Fatalf("got %d %q, want %d %q", a.status, a.body, tc.want, tc.wantBody)
				}
				if a.took < tc.minTime {
					t.Fatalf("answered after %v, want no sooner than %v", a.took, tc.minTime)
				}
			}
			if !tc.free {
				for range heldAnswers {
					release <- struct{}{}
				}
			}
			for _, c := range heldAnswers {
				if a := <-c; a.status != 200 {
					t.Fatalf("a held request got %d %q", a.status, a.body)
				}
			}
		})
	}
}
