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

// TestStaleConnectionNeverResendsAPartBody: a request that cannot be sent
// again (a streamed body, a POST) goes on a pooled connection only after the
// connection was checked: the upstream may have closed it while it was
// idle. So such a request gets a fresh connection and arrives whole, where
// it used to fail with 502 (and, before that, to arrive cut short).
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
	waitClosed := func(what string) {
		t.Helper()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("upstream did not close the %s connection", what)
		}
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(addr), nil, tr)
			for _, tc := range []struct {
				desc    string
				method  string
				size    int
				chunked bool
			}{
				{desc: "content-length body", method: http.MethodPut, size: 20000},
				{desc: "chunked body", method: http.MethodPut, size: 20000, chunked: true},
				{desc: "small POST", method: http.MethodPost, size: 3},
			} {
				t.Run(tc.desc, func(t *testing.T) {
					if resp, _ := get(t, tg.url(3000)+"/warm"); resp.StatusCode != 200 {
						t.Fatalf("warm-up: %d", resp.StatusCode)
					}
					waitClosed("warm-up")
					before := len(log.get())
					var body io.Reader = strings.NewReader(strings.Repeat("z", tc.size))
					if tc.chunked {
						body = io.MultiReader(body)
					}
					req, _ := http.NewRequest(tc.method, tg.url(3000)+"/put", body)
					resp, _ := do(t, req)
					if resp.StatusCode != 200 {
						t.Fatalf("status %d: the request must go on a fresh connection", resp.StatusCode)
					}
					if got := log.get()[before:]; !slices.Equal(got, []int{tc.size}) {
						t.Fatalf("upstream received bodies of %v bytes, want one of %d", got, tc.size)
					}
					waitClosed("request's")
				})
			}
		})
	}
}
