package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestH2LargeBodies: bodies far past every flow-control window go through
// whole, both ways and on several streams at once: the gateway gives the
// client's request bodies their room back as the upstream takes them, and
// sends responses as the client's windows open.
func TestH2LargeBodies(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		w.Header().Set("X-Got", fmt.Sprintf("%d %x", n, h.Sum(nil)))
		if r.URL.Path == "/big" {
			chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
			for range 48 {                                          // 3 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}
	}))
	for _, version := range []string{"HTTP1", "HTTP2"} {
		t.Run(version, func(t *testing.T) {
			tg := startGateway(t, "frontendPolicies:\n  http: {http2WindowSize: 65535, http2ConnectionWindowSize: 65535}\n"+oneRouteVersion(up, version), nil)
			c := h2cClient()
			body := bytes.Repeat([]byte("request body "), 250000) // about 3 MiB
			want := fmt.Sprintf("%d %x", len(body), sha256.Sum256(body))
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/big", bytes.NewReader(body))
					resp, err := c.Do(req)
					if err != nil {
						errs <- err
						return
					}
					defer resp.Body.Close()
					got, err := io.ReadAll(resp.Body)
					if err != nil {
						errs <- fmt.Errorf("stream %d: reading: %v", i, err)
						return
					}
					if resp.Header.Get("X-Got") != want {
						errs <- fmt.Errorf("stream %d: upstream got %q; want %q", i, resp.Header.Get("X-Got"), want)
					}
					if len(got) != 48*64<<10 || !bytes.Equal(got[:16], []byte("0123456789abcdef")) {
						errs <- fmt.Errorf("stream %d: response of %d bytes", i, len(got))
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestH2ManyStreams: many streams at once on one connection, each answered
// with its own response (the output batches them, the race detector
// watches).
func TestH2ManyStreams(t *testing.T) {
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRouteVersion(up, "HTTP1"), nil)
	c := h2cClient()
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(tg.url(3000) + "/s/" + itoa(i))
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := "GET /s/" + itoa(i) + " "; resp.StatusCode != 200 || string(b) != want {
				errs <- fmt.Errorf("%d %q; want 200 %q", resp.StatusCode, b, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestH2HeadLimitsAndContinue: a request head over http2MaxHeaderSize is
// answered 431 (within twice the limit; past it the connection goes,
// TestH2Floods); a request that expects 100 (Continue) gets it when its
// body is first read; a response head larger than a frame goes in
// CONTINUATION frames.
func TestH2HeadLimitsAndContinue(t *testing.T) {
	big := strings.Repeat("x", 30000)
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/bighead" {
			w.Header().Set("X-Big", big)
		}
		fmt.Fprintf(w, "%s %s", r.URL.Path, b)
	}))
	tg := startGateway(t, "frontendPolicies:\n  http: {http2MaxHeaderSize: 4096}\n"+oneRouteVersion(up, "HTTP2"), nil)

	t.Run("header list too large", func(t *testing.T) {
		h := dialH2Raw(t, tg.addr(3000))
		if err := h.request(1, "GET", "/h", true, "x-long", strings.Repeat("y", 5000)); err != nil {
			t.Fatal(err)
		}
		answers := map[uint32]*h2Answer{}
		if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[1] != nil && answers[1].done }); err != nil {
			t.Fatal(err)
		}
		if a := answers[1]; a.status != "431" {
			t.Fatalf("%q %q; want 431", a.status, a.body)
		}
		// The connection goes on.
		if err := h.request(3, "GET", "/after", true); err != nil {
			t.Fatal(err)
		}
		if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[3] != nil && answers[3].done }); err != nil {
			t.Fatal(err)
		}
		if a := answers[3]; a.status != "200" || string(a.body) != "/after " {
			t.Fatalf("next stream: %q %q", a.status, a.body)
		}
	})

	t.Run("100-continue", func(t *testing.T) {
		h := dialH2Raw(t, tg.addr(3000))
		if err := h.request(1, "POST", "/c", false, "expect", "100-continue"); err != nil {
			t.Fatal(err)
		}
		answers := map[uint32]*h2Answer{}
		if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[1] != nil && answers[1].status != "" }); err != nil {
			t.Fatal(err)
		}
		if a := answers[1]; a.status != "100" || a.done {
			t.Fatalf("first answer %q (done %v); want 100", a.status, a.done)
		}
		if err := h.write(func(fr *http2.Framer) error { return fr.WriteData(1, true, []byte("body")) }); err != nil {
			t.Fatal(err)
		}
		if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[1].done }); err != nil {
			t.Fatal(err)
		}
		if a := answers[1]; a.status != "200" || string(a.body) != "/c body" {
			t.Fatalf("%q %q", a.status, a.body)
		}
	})

	t.Run("response head in CONTINUATION frames", func(t *testing.T) {
		resp, body := doWith(t, h2cClient(), mustRequest(t, http.MethodGet, tg.url(3000)+"/bighead"))
		if resp.StatusCode != 200 || resp.Header.Get("X-Big") != big || body != "/bighead " {
			t.Fatalf("%d, X-Big of %d bytes, %q", resp.StatusCode, len(resp.Header.Get("X-Big")), body)
		}
	})
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestH2RequestFields: an HTTP/2 request's fields reach the upstream as an
// HTTP/1.1 request carries them: the cookie fields HTTP/2 splits joined in
// one Cookie (RFC 9113 8.2.3), the Host from :authority, and a request
// whose fields HTTP/2 forbids reset, not forwarded.
func TestH2RequestFields(t *testing.T) {
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRouteVersion(up, "HTTP1"), nil)
	h := dialH2Raw(t, tg.addr(3000))
	if err := h.request(1, "GET", "/f", true, "cookie", "a=1", "cookie", "b=2", "x-echo", "Cookie"); err != nil {
		t.Fatal(err)
	}
	if err := h.request(3, "GET", "/bad", true, "connection", "keep-alive"); err != nil {
		t.Fatal(err)
	}
	answers := map[uint32]*h2Answer{}
	if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool {
		return answers[1] != nil && answers[1].done && answers[3] != nil && answers[3].done
	}); err != nil {
		t.Fatal(err)
	}
	if a := answers[1]; a.status != "200" || a.header["x-got-cookie"] != "a=1; b=2" || a.header["x-upstream-host"] != "h2.test" {
		t.Fatalf("stream 1: %q %v", a.status, a.header)
	}
	if a := answers[3]; !a.wasReset || a.reset != http2.ErrCodeProtocol {
		t.Fatalf("stream 3 with a connection-specific field: %+v; want RST_STREAM PROTOCOL_ERROR", a)
	}
}

// TestH2DuplexStreamLivesWhileTheAnswerFlows: a stream whose client sends
// part of its body and then nothing, while the server streams its answer
// (a gRPC watch, a duplex stream), is not idle: the body's idle timeout
// counts the answer's activity too, and the stream ends when the server
// ends it. It was reset at the body idle timeout (60 s), the answer still
// flowing. A stream quiet both ways still ends at the timeout.
func TestH2DuplexStreamLivesWhileTheAnswerFlows(t *testing.T) {
	old := bodyIdleTimeout.Swap(int64(300 * time.Millisecond))
	t.Cleanup(func() { bodyIdleTimeout.Store(old) })
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return
		}
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		if r.URL.Path == "/quiet" {
			<-r.Context().Done()
			return
		}
		// About 1.5 s of answer, five times the body idle timeout.
		for range 30 {
			io.WriteString(w, "tick\n")
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	tg := startGateway(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: "+up+"\n        policies: { http: { version: HTTP2 } }\n", nil)
	for _, path := range []string{"/ticks", "/quiet"} {
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() })
		go func() { _, _ = io.WriteString(pw, "hello") }() // then nothing, the body left open
		req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+path, pr)
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch path {
		case "/ticks":
			if err != nil || strings.Count(string(body), "tick\n") != 30 {
				t.Errorf("%s: %d ticks, %v; want all 30 and the stream's end", path, strings.Count(string(body), "tick\n"), err)
			}
		case "/quiet":
			if err == nil {
				t.Errorf("%s: a stream quiet both ways ended cleanly (%q); want it reset at the idle timeout", path, body)
			}
		}
	}
}

// TestH2UpstreamLostWhileTheClientIsQuiet: an HTTP/2 upstream's
// connection is lost while the client's request body is open and quiet
// (a gRPC stream whose server dies), before its answer's head or in the
// middle of its body: the client learns of it at once, not when its body's
// idle timeout passes, over HTTP/2 and over HTTP/1.1 with a chunked body.
func TestH2UpstreamLostWhileTheClientIsQuiet(t *testing.T) {
	old := bodyIdleTimeout.Swap(int64(20 * time.Second))
	t.Cleanup(func() { bodyIdleTimeout.Store(old) })
	for _, tc := range []struct {
		name       string
		answerHead bool // the upstream answers its head and some body first
		h1         bool // the client speaks HTTP/1.1
	}{
		{"h2 client, lost mid-answer", true, false},
		{"h2 client, lost before the answer", false, false},
		{"HTTP/1.1 client, lost mid-answer", true, true},
		{"HTTP/1.1 client, lost before the answer", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Mid-answer, the upstream goes once the client has the answer's
			// first part.
			gotPart := make(chan struct{})
			upstream := startDyingH2Upstream(t, tc.answerHead, gotPart)
			tg := startGateway(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: "+upstream+"\n        policies: { http: { version: HTTP2 } }\n", nil)
			start := time.Now()
			var status int
			var err error
			if tc.h1 {
				status, err = quietChunkedPost(t, tg.addr(3000), gotPart)
			} else {
				status, err = quietH2Post(t, tg.url(3000), gotPart)
			}
			t.Logf("status %d, %v", status, err)
			// The failure is the upstream's, not the client's.
			lines := tg.accessLogs().FilterMessage("request").All()
			if len(lines) != 1 || lines[0].ContextMap()["upstream_error"] == nil {
				t.Errorf("access lines %v; want one naming the upstream's error", lines)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the client learned of the lost upstream after %v (status %d, %v); want at once", d, status, err)
			}
			switch {
			case tc.answerHead && err == nil:
				t.Fatalf("the answer ended cleanly (status %d); want it cut", status)
			case !tc.answerHead && err != nil:
				t.Fatalf("no answer: %v; want the gateway's error status", err)
			case !tc.answerHead && status < 500:
				t.Fatalf("status %d; want the gateway's 5xx", status)
			}
		})
	}
}

// startDyingH2Upstream is an h2c server that reads the request body's
// first 5 bytes and then closes all its connections: at once, or after it
// answered its head and a part of its body and gotPart was closed.
func startDyingH2Upstream(t *testing.T, answerHead bool, gotPart chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, ConnState: func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return
		}
		if answerHead {
			io.WriteString(w, "part\n")
			w.(http.Flusher).Flush()
			select {
			case <-gotPart:
			case <-time.After(10 * time.Second):
			}
		}
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// quietH2Post sends a POST over h2c whose body sends 5 bytes and then
// nothing, open, and reads the answer: its status and what cut it. It
// closes gotPart once it has the answer's first 5 bytes.
func quietH2Post(t *testing.T, url string, gotPart chan struct{}) (int, error) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { _, _ = io.WriteString(pw, "hello") }()
	req, _ := http.NewRequest(http.MethodPost, url+"/", pr)
	resp, err := h2cClient().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAfterPart(resp.Body, gotPart)
}

// readAfterPart reads body to its end, closing gotPart once it has read
// the first 5 bytes.
func readAfterPart(body io.Reader, gotPart chan struct{}) error {
	part := make([]byte, 5)
	if _, err := io.ReadFull(body, part); err != nil {
		return err
	}
	close(gotPart)
	_, err := io.ReadAll(body)
	return err
}

// quietChunkedPost sends a chunked POST over HTTP/1.1 whose body sends one
// 5-byte chunk and then nothing, open, and reads the answer: its status and
// what cut it. It closes gotPart once it has the answer's first 5 bytes.
func quietChunkedPost(t *testing.T, addr string, gotPart chan struct{}) (int, error) {
	status, _, err := quietChunkedPostClose(t, addr, gotPart)
	return status, err
}

// quietChunkedPostClose is quietChunkedPost that also reports whether the
// answer said the connection closes after it.
func quietChunkedPostClose(t *testing.T, addr string, gotPart chan struct{}) (int, bool, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Close, readAfterPart(resp.Body, gotPart)
}
