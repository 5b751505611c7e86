package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// echoUpstream records what it received and echoes a summary.
type seen struct {
	host   string
	uri    string
	header http.Header
	body   string
}

func recordingUpstream(t *testing.T, ch chan<- seen) string {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- seen{host: r.Host, uri: r.RequestURI, header: r.Header.Clone(), body: string(b)}
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("X-Up", "yes")
		io.WriteString(w, "ok")
	}))
}

func oneRoute(backend string) string {
	return "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: " + backend + "\n"
}

func TestSemHeaders(t *testing.T) {
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		t.Run(string(tr), func(t *testing.T) {
			ch := make(chan seen, 1)
			up := recordingUpstream(t, ch)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+"/a%2Cb/c?x=%20y", nil)
			req.Host = "client.example"
			req.Header.Set("Connection", "X-Foo")
			req.Header.Set("X-Foo", "drop me")
			req.Header.Set("Keep-Alive", "timeout=1")
			req.Header.Set("Proxy-Connection", "keep-alive")
			req.Header.Set("Te", "gzip")
			req.Header.Set("Proxy-Authorization", "Basic eA==")
			req.Header.Set("X-Forwarded-For", "1.2.3.4")
			req.Header.Set("X-Keep", "kept")
			resp, body := do(t, req)
			got := <-ch
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
			for _, h := range []string{"X-Foo", "Keep-Alive", "Proxy-Connection", "Te", "Proxy-Authorization", "Via"} {
				if v := got.header.Get(h); v != "" {
					t.Errorf("upstream saw %s: %q", h, v)
				}
			}
			checks := map[string]string{
				"X-Forwarded-For":   "1.2.3.4, 127.0.0.1",
				"X-Forwarded-Proto": "http",
				"X-Keep":            "kept",
			}
			for h, want := range checks {
				if v := got.header.Get(h); v != want {
					t.Errorf("upstream %s = %q, want %q", h, v, want)
				}
			}
			if got.host != "client.example" {
				t.Errorf("IP backend: upstream Host %q, want the client's", got.host)
			}
			if got.uri != "/a%2Cb/c?x=%20y" {
				t.Errorf("upstream URI %q", got.uri)
			}
			for _, h := range []string{"Keep-Alive", "X-Up-Hop", "Via"} {
				if v := resp.Header.Get(h); v != "" {
					t.Errorf("client saw %s: %q", h, v)
				}
			}
			if resp.Header.Get("X-Up") != "yes" {
				t.Errorf("end-to-end response header lost")
			}
		})
	}
}

func TestSemHostForNamedBackend(t *testing.T) {
	ch := make(chan seen, 1)
	up := recordingUpstream(t, ch)
	_, port, _ := net.SplitHostPort(up)
	tg := startGateway(t, oneRoute("localhost:"+port), nil)
	resp, _ := get(t, tg.url(3000)+"/", "Host", "client.example")
	got := <-ch
	if resp.StatusCode != 200 || got.host != "localhost:"+port {
		t.Fatalf("status %d, upstream Host %q, want localhost:%s", resp.StatusCode, got.host, port)
	}
}

func TestSemBodies(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("chunked") == "1" {
			w.(http.Flusher).Flush() // forces chunked encoding
		}
		w.Header().Set("X-Len", fmt.Sprint(len(b)))
		w.Write(b)
	}))
	tg := startGateway(t, oneRoute(up), nil)
	payload := strings.Repeat("0123456789", 5000)
	tests := []struct {
		desc    string
		body    io.Reader
		query   string
		chunked bool
	}{
		{desc: "content-length both ways", body: strings.NewReader(payload)},
		{desc: "chunked request", body: io.MultiReader(strings.NewReader(payload)), chunked: true},
		{desc: "chunked response", body: strings.NewReader(payload), query: "?chunked=1"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/echo"+tc.query, tc.body)
			if tc.chunked {
				req.ContentLength = -1
			}
			resp, body := do(t, req)
			if resp.StatusCode != 200 || body != payload {
				t.Fatalf("status %d, body of %d bytes, want %d", resp.StatusCode, len(body), len(payload))
			}
		})
	}
	t.Run("HEAD has no body", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodHead, tg.url(3000)+"/", nil)
		resp, body := do(t, req)
		if resp.StatusCode != 200 || body != "" {
			t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
		}
	})
}

// rawExchange writes raw bytes to the gateway and returns the connection's reader.
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestSemKeepAlivePipeliningContinue(t *testing.T) {
	ch := make(chan seen, 16)
	up := recordingUpstream(t, ch)
	tg := startGateway(t, oneRoute(up), nil)
	c, br := rawConn(t, tg.addr(3000))
	// Pipelining: two requests in one write, two answers in order.
	io.WriteString(c, "GET /one HTTP/1.1\r\nHost: a\r\n\r\nGET /two HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"/one", "/two"} {
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", want, resp.StatusCode, body)
		}
		if got := <-ch; got.uri != want {
			t.Fatalf("upstream saw %q, want %q", got.uri, want)
		}
	}
	// Keep-alive: more requests on the same connection.
	for i := 0; i < 20; i++ {
		fmt.Fprintf(c, "GET /k%d HTTP/1.1\r\nHost: a\r\n\r\n", i)
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
		<-ch
	}
	// 100-continue: the gateway answers 100, then forwards the body without Expect.
	io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	br.ReadString('\n') // blank line after the interim response
	io.WriteString(c, "hello")
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != 200 {
		t.Fatalf("after 100-continue: %d", resp.StatusCode)
	}
	got := <-ch
	if got.body != "hello" || got.header.Get("Expect") != "" {
		t.Fatalf("upstream got body %q, Expect %q", got.body, got.header.Get("Expect"))
	}
}

func TestSemStreamingUpload(t *testing.T) {
	firstMiB := make(chan struct{})
	total := make(chan int, 1)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 1<<20)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			t.Errorf("upstream read: %v", err)
			return
		}
		close(firstMiB)
		n, _ := io.Copy(io.Discard, r.Body)
		total <- int(n) + len(buf)
		io.WriteString(w, "stored")
	}))
	tg := startGateway(t, oneRoute(up), nil)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		half := bytes.Repeat([]byte("a"), 4<<20)
		pw.Write(half)
		// Only after the upstream has the first MiB does the client send the
		// rest: a gateway that buffered the whole body would never see it.
		select {
		case <-firstMiB:
		case <-ctx.Done():
			pw.CloseWithError(ctx.Err())
			return
		}
		pw.Write(half)
		pw.Close()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(3000)+"/upload", pr)
	req.ContentLength = 8 << 20
	resp, body := do(t, req)
	if resp.StatusCode != 200 || body != "stored" || <-total != 8<<20 {
		t.Fatalf("upload: %d %q", resp.StatusCode, body)
	}
}

func TestSemStreamingDownloadAndSSE(t *testing.T) {
	clientGotFirst := make(chan struct{})
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-clientGotFirst:
			case <-time.After(15 * time.Second):
				return
			}
			io.WriteString(w, "data: two\n\n")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(8<<20))
		w.Write(bytes.Repeat([]byte("b"), 4<<20))
		w.(http.Flusher).Flush()
		select {
		case <-clientGotFirst:
		case <-time.After(15 * time.Second):
			return
		}
		w.Write(bytes.Repeat([]byte("b"), 4<<20))
	}))
	tg := startGateway(t, oneRoute(up), nil)
	for _, path := range []string{"/download", "/events"} {
		t.Run(path, func(t *testing.T) {
			clientGotFirst = make(chan struct{})
			resp, err := testClient.Get(tg.url(3000) + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var first []byte
			if path == "/events" {
				first = make([]byte, len("data: one\n\n"))
			} else {
				first = make([]byte, 1<<20)
			}
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatalf("first part: %v", err)
			}
			close(clientGotFirst)
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if path == "/events" && string(first)+string(rest) != "data: one\n\ndata: two\n\n" {
				t.Fatalf("events %q", string(first)+string(rest))
			}
			if path == "/download" && len(first)+len(rest) != 8<<20 {
				t.Fatalf("downloaded %d bytes", len(first)+len(rest))
			}
		})
	}
}

func TestSemUpgrade(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "no upgrade", http.StatusBadRequest)
			return
		}
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(c, brw)
	}))
	tg := startGateway(t, oneRoute(up), nil)
	c, br := rawConn(t, tg.addr(3000))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "ping")
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo %q %v", got, err)
	}
	// A refused upgrade is an ordinary response.
	c2, br2 := rawConn(t, tg.addr(3000))
	io.WriteString(c2, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n")
	resp2, body := readResponse(t, br2, "GET")
	if resp2.StatusCode != 400 || !strings.Contains(body, "no upgrade") {
		t.Fatalf("refused upgrade: %d %q", resp2.StatusCode, body)
	}
}

// TestSemConnectionNamesOnlyTheClientsFields: the fields a client names in
// Connection are its hop's alone and go before any policy runs, so a field
// a route's policy sets under such a name reaches the upstream. A client
// naming x-gateway-verified in Connection once stripped what the route
// set. Connection: close still closes the client's connection.
func TestSemConnectionNamesOnlyTheClientsFields(t *testing.T) {
	ch := make(chan seen, 2)
	up := recordingUpstream(t, ch)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        requestHeaderModifier: {set: {x-gateway-verified: "true"}, add: {x-tier: free}}
      backends: [{host: `+up+`}]
`, nil)
	for _, closing := range []bool{false, true} {
		conn := "x-gateway-verified, X-Tier, x-client-hop"
		if closing {
			conn = "close, " + conn
		}
		req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+"/", nil)
		req.Header.Set("Connection", conn)
		req.Header.Set("X-Client-Hop", "1")
		req.Header.Set("X-Gateway-Verified", "forged")
		resp, body := do(t, req)
		got := <-ch
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("status %d body %q", resp.StatusCode, body)
		}
		if v := got.header.Values("X-Gateway-Verified"); len(v) != 1 || v[0] != "true" {
			t.Errorf("close=%v: upstream X-Gateway-Verified %q, want the route's", closing, v)
		}
		if v := got.header.Get("X-Tier"); v != "free" {
			t.Errorf("close=%v: upstream X-Tier %q, want the route's", closing, v)
		}
		if v := got.header.Get("X-Client-Hop"); v != "" {
			t.Errorf("close=%v: upstream saw the client's hop field: %q", closing, v)
		}
		if resp.Close != closing {
			t.Errorf("close=%v: the response says close %v", closing, resp.Close)
		}
	}
}

// TestSemH2CUpgradeNeverGoesUpstream: an upgrade to h2c is this hop's
// alone wherever it is offered: in a list ("foo, h2c"), on a second
// Upgrade line, or on an HTTP/1.0 request (whose Upgrade is ignored, RFC
// 9110 7.8). Such a request is served in HTTP/1.1 and its Upgrade does not
// go upstream, where an upstream's 101 would make the connection a tunnel
// past routes and policies.
func TestSemH2CUpgradeNeverGoesUpstream(t *testing.T) {
	heads := make(chan string, 8)
	up := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			var head strings.Builder
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				head.WriteString(line)
				if line == "\r\n" {
					break
				}
			}
			heads <- head.String()
			if strings.Contains(strings.ToLower(head.String()), "upgrade: ") {
				// Taken, the upgrade would make the connection a tunnel.
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tg := startGateway(t, oneRoute(up), nil)
	settings := "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
	for _, head := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: foo, h2c\r\n" + settings + "\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: foo\r\nUpgrade: h2c\r\n" + settings + "\r\n",
		"GET / HTTP/1.0\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" + settings + "\r\n",
	} {
		c, err := net.Dial("tcp", tg.addr(3000))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, head)
		status, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.Contains(status, " 200 ") {
			t.Errorf("%q: status %q %v, want 200", head, status, err)
		}
		select {
		case got := <-heads:
			if l := strings.ToLower(got); strings.Contains(l, "upgrade") || strings.Contains(l, "http2-settings") {
				t.Errorf("%q: the upstream got\n%s", head, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: nothing reached the upstream", head)
		}
	}
}
