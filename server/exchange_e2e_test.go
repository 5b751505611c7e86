package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap/zapcore"

	"github.com/relaygate/gateway/codec/logline"
)

// TestProxyPathAllocations asserts the plain proxied GET allocates nothing,
// on both transports, with the access log off and with the binary's
// (logline.AccessWriter, the default): client, gateway and upstream run in
// this process, and the client and upstream alone allocate nothing
// (BenchmarkDirectGET).
func TestProxyPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	up := fastUpstream(t)
	logs := []struct {
		name string
		log  func() logline.AccessLogger
	}{
		{"log off", func() logline.AccessLogger { return nil }},
		{"access log", func() logline.AccessLogger {
			w := logline.NewAccessWriter("text", zapcore.AddSync(io.Discard), logline.AccessWriterOptions{BufferSize: 64 << 10, FlushInterval: time.Second})
			t.Cleanup(func() { _ = w.Stop() })
			return w
		}},
	}
	for _, tr := range e2eTransports {
		for _, lg := range logs {
			t.Run(string(tr)+"/"+lg.name, func(t *testing.T) {
				requireNoAllocations(t, up, tr, lg.log())
			})
		}
	}
}

// requireNoAllocations fails unless a GET proxied through a gateway on
// transport tr, logging to access (nil: the nop logger), allocates nothing.
func requireNoAllocations(t *testing.T, up string, tr Transport, access logline.AccessLogger) {
	t.Helper()
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }, Transport: tr, AccessLog: access})
	if err := gw.Apply(parseConfig(t, oneRoute(up), nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Shutdown(expiredContext()) })
	addr := gw.Addrs()[3000].String()
	c := &fasthttp.HostClient{Addr: addr}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + addr + "/alloc")
	for i := 0; i < 200; i++ { // warm pools
		if err := c.Do(req, resp); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(2000, func() {
		if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("%v %d", err, resp.StatusCode())
		}
	})
	if allocs >= 0.5 {
		t.Fatalf("%.2f allocations per proxied GET, want 0", allocs)
	}
}

// upstreamConns counts an upstream's connections.
type upstreamConns struct{ opened, closed atomic.Int32 }

// connCountingUpstream serves h and counts the connections it accepts and
// closes.
func connCountingUpstream(t *testing.T, h http.Handler) (string, *upstreamConns) {
	var n upstreamConns
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n.opened.Add(1)
		case http.StateClosed:
			n.closed.Add(1)
		}
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &n
}

// TestExchangeConnectionReuse: streamed bodies (large and chunked) read to the
// end give their upstream connection back to the pool.
func TestExchangeConnectionReuse(t *testing.T) {
	big := bytes.Repeat([]byte("z"), 256<<10)
	up, conns := connCountingUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write(big[:1000])
			w.(http.Flusher).Flush()
			w.Write(big)
		case "/large":
			w.Header().Set("Content-Length", "262144")
			w.Write(big)
		default:
			io.WriteString(w, "small")
		}
	}))
	tg := startGateway(t, oneRoute(up), nil)
	for i := 0; i < 5; i++ {
		for _, p := range []string{"/small", "/large", "/chunked"} {
			resp, body := get(t, tg.url(3000)+p)
			if resp.StatusCode != 200 || len(body) == 0 {
				t.Fatalf("%s: %d (%d bytes)", p, resp.StatusCode, len(body))
			}
		}
	}
	if n := conns.opened.Load(); n != 1 {
		t.Fatalf("%d upstream connections for 15 sequential requests, want 1 (pooled)", n)
	}
}

// TestExchangeReusesTheLatestConnection: the upstream pool hands out the
// connection given back last (LIFO, as nginx's keepalive cache does). After
// a burst, steady traffic stays on one connection and the others idle out
// (the pool's idle timeout) instead of each being kept alive in turn; the
// connection used last is also the least likely to have been closed by the
// upstream meanwhile.
func TestExchangeReusesTheLatestConnection(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // ends held handlers if the test stops early
	var held atomic.Int32
	up, conns := connCountingUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held.Add(1)
			<-release
		}
		io.WriteString(w, r.RemoteAddr) // the gateway's end of this upstream connection
	}))
	tg := startGateway(t, "config:\n  backend:\n    poolIdleTimeout: 300ms\n"+oneRoute(up), nil)

	const burst = 3
	answers := make(chan string, burst)
	for i := 0; i < burst; i++ {
		go func() {
			resp, err := http.Get(tg.url(3000) + "/hold")
			if err != nil {
				answers <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers <- string(b)
		}()
	}
	eventually(t, 10*time.Second, "the burst held at the upstream", func() bool { return held.Load() == burst })
	// Released one at a time: the small body is read whole and its
	// connection given back before the client has the answer.
	var last string
	for i := 0; i < burst; i++ {
		release <- struct{}{}
		last = <-answers
	}
	if n := conns.opened.Load(); n != burst {
		t.Fatalf("%d upstream connections for a burst of %d", n, burst)
	}
	// Steady traffic, one request after another: it stays on the connection
	// given back last, and the other two idle out meanwhile. Handed out in
	// turn, each would be used every third request and never idle.
	eventually(t, 10*time.Second, "the burst's other connections closed as idle", func() bool {
		if _, body := get(t, tg.url(3000)+"/"); body != last {
			t.Fatalf("a request went on upstream connection %s, want %s (the one given back last)", body, last)
		}
		return conns.closed.Load() == burst-1
	})
	if n := conns.opened.Load(); n != burst {
		t.Fatalf("%d upstream connections opened, want still %d", n, burst)
	}
}

// TestExchangeStaleConnection: an upstream that drops an idle keep-alive
// connection without saying so; the next GET is resent on a new connection.
func TestExchangeStaleConnection(t *testing.T) {
	var mu sync.Mutex
	served := 0
	addr := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err != nil {
			return
		}
		mu.Lock()
		served++
		mu.Unlock()
		// Answers as keep-alive, then closes anyway.
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tg := startGateway(t, oneRoute(addr), nil)
	for i := 0; i < 3; i++ {
		resp, body := get(t, tg.url(3000)+"/")
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	mu.Lock()
	n := served
	mu.Unlock()
	if n < 3 {
		t.Fatalf("upstream served %d requests, want 3", n)
	}
	// A POST is not resent: the upstream might have acted on it.
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/", strings.NewReader("x"))
	resp, _ := do(t, req)
	if resp.StatusCode != 200 && resp.StatusCode != 502 {
		t.Fatalf("POST on a possibly stale connection: %d", resp.StatusCode)
	}
}

// TestExchangeUnaskedBytesOnAnIdleConnection: an upstream writes to a
// keep-alive connection while it is idle in the gateway's pool, a 408
// before closing it (as servers do at their idle timeout, which Go's
// net/http client expects, golang/go#32310) or a response nobody asked
// for. What it wrote is no answer to the next request: that request goes
// on a new connection and gets its own response, never the stray one.
func TestExchangeUnaskedBytesOnAnIdleConnection(t *testing.T) {
	for _, tc := range []struct {
		name, unasked string
		closes        bool
	}{
		{"a 408, then the close", "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true},
		{"a response nobody asked for", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			strayed := make(chan struct{}, 1)
			var conns atomic.Int32
			addr := rawUpstream(t, func(c net.Conn) {
				defer c.Close()
				first := conns.Add(1) == 1
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body := "for " + req.URL.Path
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
					if !first {
						continue
					}
					first = false
					// Idle a while (longer than the gateway's pool
					// skips its look for), as at an idle timeout.
					time.Sleep(20 * time.Millisecond)
					io.WriteString(c, tc.unasked)
					strayed <- struct{}{}
					if tc.closes {
						return
					}
				}
			})
			tg := startGateway(t, oneRoute(addr), nil)
			for i, path := range []string{"/one", "/two", "/three"} {
				resp, body := get(t, tg.url(3000)+path)
				if resp.StatusCode != 200 || body != "for "+path {
					t.Fatalf("request %d: %d %q; want 200 %q", i, resp.StatusCode, body, "for "+path)
				}
				if i == 0 {
					select {
					case <-strayed:
					case <-time.After(10 * time.Second):
						t.Fatal("the upstream never wrote its unasked bytes")
					}
				}
			}
			if n := conns.Load(); n != 2 {
				t.Fatalf("%d upstream connections, want 2 (the one with unasked bytes dropped)", n)
			}
		})
	}
}

// TestExchangeUpstreamAnswersBeforeTheBody: an HTTP/1.1 upstream answers a
// large upload before reading it (a 413, as Go's net/http server does for
// a handler that never reads: it stops reading, then resets the
// connection). The gateway stops writing the body, relays the answer, and
// closes the upstream connection; it used to write on until the reset,
// which took the answer with it, and the client got 502.
func TestExchangeUpstreamAnswersBeforeTheBody(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too big", http.StatusRequestEntityTooLarge)
	}))
	t.Cleanup(up.Close)
	const size = 32 << 20
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(strings.TrimPrefix(up.URL, "http://")), nil, tr)
			for _, chunked := range []bool{false, true} {
				var body io.Reader = io.LimitReader(zeros{}, size)
				req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/upload", body)
				if err != nil {
					t.Fatal(err)
				}
				if !chunked {
					req.ContentLength = size
				}
				resp, got := do(t, req)
				if resp.StatusCode != http.StatusRequestEntityTooLarge || got != "too big\n" {
					t.Fatalf("chunked %v: %d %q; want the upstream's 413", chunked, resp.StatusCode, got)
				}
			}
			// The gateway serves on.
			if resp, got := get(t, tg.url(3000)+"/"); resp.StatusCode != http.StatusRequestEntityTooLarge || got != "too big\n" {
				t.Fatalf("then a GET: %d %q", resp.StatusCode, got)
			}
		})
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestExchangeUnaskedContinueDoesNotStopTheBody: an upstream that sends
// 100 Continue to every request with a body, asked or not (RFC 9110 lets
// it), or its success before the body's end, and reads the body after it,
// is no upstream refusing the body: the gateway sends all of it and
// relays the final answer.
func TestExchangeUnaskedContinueDoesNotStopTheBody(t *testing.T) {
	const size = 32 << 20
	for _, tc := range []struct {
		name  string
		early string // written when the request head is in
		final bool   // the early answer is the final one
	}{
		{"100 Continue", "HTTP/1.1 100 Continue\r\n\r\n", false},
		{"200 before the body's end", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := make(chan int64, 1)
			addr := rawUpstream(t, func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.WriteString(c, tc.early)
					n, err := io.Copy(io.Discard, req.Body)
					read <- n
					if err != nil {
						return
					}
					if !tc.final {
						body := strconv.FormatInt(n, 10)
						fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
					}
				}
			})
			tg := startGateway(t, oneRoute(addr), nil)
			req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/upload", io.LimitReader(zeros{}, size))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = size
			resp, got := do(t, req)
			want := strconv.Itoa(size)
			if tc.final {
				want = "early"
			}
			if resp.StatusCode != http.StatusOK || got != want {
				t.Fatalf("%d %q; want 200 %q", resp.StatusCode, got, want)
			}
			select {
			case n := <-read:
				if n != size {
					t.Fatalf("the upstream read %d bytes of the body, want %d", n, size)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the upstream never read the body to its end")
			}
		})
	}
}

// TestExchangeUpstreamHangsUpWhileTheClientIsQuiet: an HTTP/1.1 upstream
// closes or resets its connection while the client's streamed body is
// open and quiet, with an answer first or without: the client gets the
// answer, or the gateway's 502, at once, not when its body's idle timeout
// passes (a 408 that blamed the client), over HTTP/1.1 with a chunked body
// and over HTTP/2.
func TestExchangeUpstreamHangsUpWhileTheClientIsQuiet(t *testing.T) {
	old := bodyIdleTimeout.Swap(int64(20 * time.Second))
	t.Cleanup(func() { bodyIdleTimeout.Store(old) })
	for _, tc := range []struct {
		name   string
		hangUp func(c net.Conn)
		status int
	}{
		{"reset", func(c net.Conn) { _ = c.(*net.TCPConn).SetLinger(0); c.Close() }, http.StatusBadGateway},
		{"close", func(c net.Conn) { c.Close() }, http.StatusBadGateway},
		{"answer then close", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 7\r\nConnection: close\r\n\r\ntoo big")
			c.Close()
		}, http.StatusRequestEntityTooLarge},
	} {
		for _, h2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/h2 %v", tc.name, h2), func(t *testing.T) {
				addr := rawUpstream(t, func(c net.Conn) {
					req, err := http.ReadRequest(bufio.NewReader(c))
					if err != nil {
						c.Close()
						return
					}
					if _, err := io.ReadFull(req.Body, make([]byte, 5)); err != nil {
						c.Close()
						return
					}
					tc.hangUp(c)
				})
				// HTTP/1.1 to the upstream whatever the client speaks.
				tg := startGateway(t, oneRouteVersion(addr, "HTTP1"), nil)
				start := time.Now()
				var status int
				var err error
				closes := true
				if h2 {
					status, err = quietH2Post(t, tg.url(3000), make(chan struct{}))
				} else {
					status, closes, err = quietChunkedPostClose(t, tg.addr(3000), make(chan struct{}))
				}
				if !closes {
					// The body's rest is still on the connection.
					t.Error("the answer keeps the connection open")
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("answered after %v (status %d, %v); want at once", d, status, err)
				}
				if err != nil || status != tc.status {
					t.Fatalf("status %d, %v; want %d", status, err, tc.status)
				}
				if tc.status == http.StatusBadGateway {
					// The failure is the upstream's, not the client's.
					lines := tg.accessLogs().FilterMessage("request").All()
					if len(lines) != 1 || lines[0].ContextMap()["upstream_error"] == nil {
						t.Errorf("access lines %v; want one naming the upstream's error", lines)
					}
				}
			})
		}
	}
}
