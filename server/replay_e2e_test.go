package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// bodyLog records the length of every request body an upstream received.
type bodyLog struct {
	mu   sync.Mutex
	lens []int
}

func (l *bodyLog) add(n int) {
	l.mu.Lock()
	l.lens = append(l.lens, n)
	l.mu.Unlock()
}

func (l *bodyLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.lens...)
}

// TestRetryNeverResendsAPartBody: a streamed request body (chunked, or
// larger than maxBufferSize) is consumed by the first attempt, so a retry
// must not be made: fasthttp drops the spent stream, and the request would
// go again with only its pre-read bytes (or none). A buffered body is
// retried whole.
func TestRetryNeverResendsAPartBody(t *testing.T) {
	var log bodyLog
	var mu sync.Mutex
	seen := map[string]int{}
	addr := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		log.add(len(b))
		mu.Lock()
		seen[r.URL.Path]++
		first := seen[r.URL.Path] == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	tg := startGateway(t, `
frontendPolicies:
  http: {maxBufferSize: 1024}
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {retry: {attempts: 2, codes: [503]}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": addr})
	tests := []struct {
		desc       string
		body       string
		chunked    bool
		wantStatus int
		wantLens   []int
	}{
		{desc: "chunked body", body: "hello", chunked: true, wantStatus: 503, wantLens: []int{5}},
		{desc: "body above maxBufferSize", body: strings.Repeat("x", 20000), wantStatus: 503, wantLens: []int{20000}},
		{desc: "buffered body retried whole", body: strings.Repeat("y", 500), wantStatus: 200, wantLens: []int{500, 500}},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := len(log.get())
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPut, tg.url(3000)+"/r"+string(rune('a'+i)), body)
			resp, _ := do(t, req)
			got := log.get()[before:]
			if resp.StatusCode != tc.wantStatus || !slices.Equal(got, tc.wantLens) {
				t.Fatalf("got %d with upstream bodies %v, want %d with %v", resp.StatusCode, got, tc.wantStatus, tc.wantLens)
			}
		})
	}
}

// TestStaleConnectionNeverResendsAPartBody: the gateway resends an
// idempotent request once when its pooled connection turns out to have
// been closed by the upstream, but only a request whose body it still has
// whole. A streamed PUT body on a stale connection gets an error; it never
// reaches the upstream cut short.
func TestStaleConnectionNeverResendsAPartBody(t *testing.T) {
	var log bodyLog
	closed := make(chan struct{}, 16)
	addr := rawUpstream(t, func(c net.Conn) {
		// One request per connection, answered as keep-alive, then the
		// connection is closed unannounced.
		defer func() { c.Close(); closed <- struct{}{} }()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		log.add(len(b))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": addr})
	for _, tc := range []struct {
		desc    string
		chunked bool
	}{{desc: "content-length body"}, {desc: "chunked body", chunked: true}} {
		t.Run(tc.desc, func(t *testing.T) {
			if resp, _ := get(t, tg.url(3000)+"/warm"); resp.StatusCode != 200 {
				t.Fatalf("warm-up: %d", resp.StatusCode)
			}
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("upstream did not close the warm-up connection")
			}
			before := len(log.get())
			const size = 20000
			var body io.Reader = strings.NewReader(strings.Repeat("z", size))
			if tc.chunked {
				body = io.MultiReader(body)
			}
			req, _ := http.NewRequest(http.MethodPut, tg.url(3000)+"/put", body)
			resp, _ := do(t, req)
			for _, n := range log.get()[before:] {
				if n != size {
					t.Fatalf("upstream received a %d-byte body of %d (client got %d)", n, size, resp.StatusCode)
				}
			}
			if resp.StatusCode == 200 && len(log.get()) == before {
				t.Fatalf("client got 200 but the upstream received nothing")
			}
			// Drain the close of the PUT's own connection, if one was made.
			select {
			case <-closed:
			default:
			}
		})
	}
}
