package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
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

// TestRetryNeverResendsAPartBody: a streamed request body (larger than
// maxBufferSize, of declared length or chunked) is consumed by the first
// attempt, so a retry must not be made: fasthttp drops the spent stream,
// and the request would go again with only its pre-read bytes (or none).
// A buffered body (a chunked one within maxBufferSize too) is retried
// whole.
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
		{desc: "chunked body", body: "hello", chunked: true, wantStatus: 200, wantLens: []int{5, 5}},
		{desc: "body above maxBufferSize", body: strings.Repeat("x", 20000), wantStatus: 503, wantLens: []int{20000}},
		{desc: "chunked body above maxBufferSize", body: strings.Repeat("z", 20000), chunked: true, wantStatus: 503, wantLens: []int{20000}},
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

// receivedBody is what an upstream got of one request: its body and the
// trailer field X-T.
type receivedBody struct{ body, trailer string }

// bodyTrailerLog is an upstream (HTTP/1.1 and h2c) that records what each
// request brought, by path, and answers 503 to the first request of a
// path under /retry.
type bodyTrailerLog struct {
	mu   sync.Mutex
	got  map[string][]receivedBody
	addr string
}

func newBodyTrailerLog(t *testing.T) *bodyTrailerLog {
	rec := &bodyTrailerLog{got: map[string][]receivedBody{}}
	rec.addr = upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.got[r.URL.Path] = append(rec.got[r.URL.Path], receivedBody{string(b), r.Trailer.Get("X-T")})
		first := len(rec.got[r.URL.Path]) == 1
		rec.mu.Unlock()
		if first && strings.HasPrefix(r.URL.Path, "/retry") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	return rec
}

func (rec *bodyTrailerLog) of(path string) []receivedBody {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]receivedBody(nil), rec.got[path]...)
}

// TestUnknownLengthBodyRetriedAndMirrored: a request body of unknown length
// (chunked HTTP/1.1, HTTP/2 without content-length) on a route with
// retries or a mirror is read whole, as one of declared length is, up to
// the limit (maxBufferSize for a retry, mirrorBodyLimit for a mirror):
// retried and mirrored whole, its trailer field with it. One beyond the
// limit streams as one of declared length does: sent once and whole, not
// retried (the client gets the 503), not mirrored.
func TestUnknownLengthBodyRetriedAndMirrored(t *testing.T) {
	main, mirror := newBodyTrailerLog(t), newBodyTrailerLog(t)
	tg := startGateway(t, `
frontendPolicies:
  http: {maxBufferSize: 8192}
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /retry}}]
      policies: {retry: {attempts: 3, codes: [503]}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /mirror}}]
      policies: {requestMirror: {backend: {host: '${MIRROR}'}, percentage: 1.0}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": main.addr, "MIRROR": mirror.addr})
	body := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(i%23)
		}
		return string(b)
	}
	tests := []struct {
		desc, route string
		size        int
		status      int
		attempts    int // the requests the backend gets
		mirrored    bool
	}{
		{desc: "retried within maxBufferSize", route: "/retry", size: 5000, status: 200, attempts: 2},
		{desc: "retry: maxBufferSize exactly", route: "/retry", size: 8192, status: 200, attempts: 2},
		{desc: "retry: beyond maxBufferSize streams once", route: "/retry", size: 8193, status: 503, attempts: 1},
		{desc: "retry: far beyond maxBufferSize", route: "/retry", size: 100000, status: 503, attempts: 1},
		{desc: "mirrored within the mirror's limit", route: "/mirror", size: 5000, status: 200, attempts: 1, mirrored: true},
		{desc: "mirror: beyond its limit streams unmirrored", route: "/mirror", size: mirrorBodyLimit + 1, status: 200, attempts: 1},
	}
	for _, c := range bothClients() {
		for i, tc := range tests {
			t.Run(c.name+"/"+tc.desc, func(t *testing.T) {
				path := tc.route + "/" + strings.ReplaceAll(c.name, "/", "") + "-" + strconv.Itoa(i)
				want := receivedBody{body(tc.size), "v"}
				req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+path, io.MultiReader(strings.NewReader(want.body)))
				req.ContentLength = -1 // chunked, or no content-length over HTTP/2
				req.Trailer = http.Header{"X-T": {"v"}}
				resp, _ := doWith(t, c.client, req)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				got := main.of(path)
				if len(got) != tc.attempts {
					t.Fatalf("the backend got %d requests, want %d", len(got), tc.attempts)
				}
				for j, g := range got {
					if g != want {
						t.Fatalf("attempt %d brought %d bytes (trailer %q): not the body sent (%d bytes, trailer %q)", j+1, len(g.body), g.trailer, tc.size, want.trailer)
					}
				}
				// A copy holds a mirror slot until the mirror answered.
				eventually(t, 10*time.Second, "the mirrored requests", func() bool { return len(tg.gw.mirrorSlots) == 0 })
				copies := mirror.of(path)
				switch {
				case !tc.mirrored && len(copies) != 0:
					t.Fatalf("the mirror got %d copies, want none", len(copies))
				case tc.mirrored && (len(copies) != 1 || copies[0] != want):
					t.Fatalf("the mirror got %d copies, want one of the body sent", len(copies))
				}
			})
		}
	}
}

// TestStreamedBodyGoesOnBeforeItsEnd: on a route with a retry or a mirror,
// a request body of unknown length streams to the upstream as it comes,
// recorded meanwhile: over HTTP/2 the upstream answers after the body's
// first piece, and the client reads that answer before it sends the rest,
// as a bidirectional stream (gRPC's) does. The body used to be read whole
// first, so neither side went on: the stream hung until a deadline.
func TestStreamedBodyGoesOnBeforeItsEnd(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, first); err != nil {
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		rest, _ := io.ReadAll(r.Body)
		w.Write([]byte("got " + string(first) + string(rest)))
	}))
	mirrorUp := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /retry}}]
      policies: {retry: {attempts: 2, codes: [503]}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /mirror}}]
      policies: {requestMirror: {backend: {host: '${MIRROR}'}, percentage: 1.0}}
      backends: [{host: '${UP}'}]
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "MIRROR": mirrorUp})
	for _, path := range []string{"/plain", "/retry", "/mirror"} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pr, pw := io.Pipe()
			defer pw.Close()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(3000)+path, pr)
			req.ContentLength = -1
			go pw.Write([]byte("hello")) //nolint:errcheck
			answered := make(chan *http.Response, 1)
			failed := make(chan error, 1)
			go func() {
				resp, err := h2cClient().Do(req)
				if err != nil {
					failed <- err
					return
				}
				answered <- resp
			}()
			var resp *http.Response
			select {
			case resp = <-answered:
			case err := <-failed:
				t.Fatal(err)
			case <-time.After(5 * time.Second):
				t.Fatal("no answer within 5 s of the body's first piece")
			}
			defer resp.Body.Close()
			if _, err := pw.Write([]byte(" world")); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != "got hello world" {
				t.Fatalf("status %d body %q (%v), want %q", resp.StatusCode, body, err, "got hello world")
			}
		})
	}
}
