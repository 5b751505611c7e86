package server

//lint:file-ignore SA1019 the tests speak HTTP/2 with x/net's client (h2cClient: prior knowledge in cleartext) and its Framer.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// upstreamH2C starts an upstream serving HTTP/1.1 and HTTP/2 in cleartext
// (prior knowledge), so that it answers whichever the gateway speaks.
func upstreamH2C(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, Protocols: &p}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// namedClient is a client and the protocol it speaks, for a subtest's name.
type namedClient struct {
	name   string
	client *http.Client
}

// bothClients are an HTTP/1.1 client and an h2c one, for tests that send
// the same request over each.
func bothClients() []namedClient {
	return []namedClient{{"HTTP/1.1", testClient}, {"h2c", h2cClient()}}
}

// h2cClient speaks HTTP/2 in cleartext with prior knowledge.
func h2cClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Transport: &http2.Transport{
		AllowHTTP:          true,
		DisableCompression: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// h2TLSClient speaks HTTP/2 over TLS (ALPN), trusting roots.
func h2TLSClient(pki *testPKI) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2:  true,
		DisableCompression: true,
		TLSClientConfig:    &tls.Config{RootCAs: pki.Pool},
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// doWith sends req with c and returns the response with its body read.
func doWith(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

// echoProtoUpstream answers with what it got: the protocol, method, path, Host
// and the headers it is asked for (X-Echo lists them), the body as read.
func echoProtoUpstream(t testing.TB) string {
	return upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream-Proto", r.Proto)
		w.Header().Set("X-Upstream-Host", r.Host)
		for _, name := range r.Header.Values("X-Echo") {
			w.Header().Set("X-Got-"+name, r.Header.Get(name))
		}
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
	}))
}

func TestH2OverTLS(t *testing.T) {
	pki := newTestPKI(t, "h2tls")
	srv := pki.Server("h2.test", "h2.test", "127.0.0.1")
	up := echoProtoUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - name: tls
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - policies: {responseHeaderModifier: {set: {x-listener: tls}}}
      backends: [{host: ${UP}}]
`, map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile})
	url := "https://" + tg.addr(1)
	c := h2TLSClient(pki)
	req, _ := http.NewRequest(http.MethodPost, url+"/a/b?q=1", strings.NewReader("payload"))
	req.Header.Set("X-Echo", "X-Forwarded-Proto")
	resp, body := doWith(t, c, req)
	if resp.Proto != "HTTP/2.0" {
		t.Fatalf("protocol %s; want HTTP/2.0", resp.Proto)
	}
	if resp.StatusCode != 200 || body != "POST /a/b?q=1 payload" || resp.Header.Get("x-listener") != "tls" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
	if got := resp.Header.Get("X-Got-X-Forwarded-Proto"); got != "https" {
		t.Errorf("X-Forwarded-Proto %q; want https", got)
	}
	// HTTPS goes upstream in HTTP/1.1 unless the backend says otherwise
	// (the spec's default for incoming HTTPS).
	if got := resp.Header.Get("X-Upstream-Proto"); got != "HTTP/1.1" {
		t.Errorf("upstream spoke %s; want HTTP/1.1", got)
	}
	// A client that offers only HTTP/1.1 still gets it.
	c1 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}}
	req, _ = http.NewRequest(http.MethodGet, url+"/", nil)
	if resp, _ := doWith(t, c1, req); resp.Proto != "HTTP/1.1" || resp.StatusCode != 200 {
		t.Fatalf("HTTP/1.1 client: %s %d", resp.Proto, resp.StatusCode)
	}
}

func TestH2CPriorKnowledge(t *testing.T) {
	up := echoProtoUpstream(t)
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c := h2cClient()
			for i := range 3 { // one connection, several streams
				req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+"/x?i="+itoa(i), nil)
				req.Header.Set("X-Echo", "X-Forwarded-For")
				resp, body := doWith(t, c, req)
				if resp.Proto != "HTTP/2.0" || resp.StatusCode != 200 || body != "GET /x?i="+itoa(i)+" " {
					t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, body)
				}
				if got := resp.Header.Get("X-Got-X-Forwarded-For"); got != "127.0.0.1" {
					t.Errorf("X-Forwarded-For %q", got)
				}
			}
			// HTTP/1.1 on the same port, POST starting with the preface's
			// first byte.
			resp, err := testClient.Post(tg.url(3000)+"/p", "text/plain", strings.NewReader("b"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.Proto != "HTTP/1.1" || string(b) != "POST /p b" {
				t.Fatalf("HTTP/1.1: %s %q", resp.Proto, b)
			}
		})
	}
}

// h2Raw is an HTTP/2 client connection driven frame by frame.
type h2Raw struct {
	t    testing.TB
	c    net.Conn
	fr   *http2.Framer
	mu   sync.Mutex // writes
	hbuf bytes.Buffer
	enc  *hpack.Encoder
	// settings are the server's, as its first SETTINGS frame gave them.
	settings map[http2.SettingID]uint32
}

// dialH2Raw opens a connection to addr and starts HTTP/2 with prior
// knowledge: the preface and an empty SETTINGS frame.
func dialH2Raw(t testing.TB, addr string) *h2Raw {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	return newH2Raw(t, c, c)
}

func newH2Raw(t testing.TB, c net.Conn, r io.Reader) *h2Raw {
	h := &h2Raw{t: t, c: c, settings: map[http2.SettingID]uint32{}}
	h.fr = http2.NewFramer(c, r)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = 1 << 20
	h.enc = hpack.NewEncoder(&h.hbuf)
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// block is a header block for a request: the pseudo-fields, then fields
// (name, value pairs).
func (h *h2Raw) block(method, path string, fields ...string) []byte {
	h.hbuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":authority", "h2.test"}, {":path", path}} {
		_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(h.hbuf.Bytes())
}

// request opens stream id with a request head; endStream says it has no body.
func (h *h2Raw) request(id uint32, method, path string, endStream bool, fields ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block(method, path, fields...), EndStream: endStream, EndHeaders: true})
}

func (h *h2Raw) write(f func(*http2.Framer) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return f(h.fr)
}

// answer reads h's frames until stream id's answer is whole, and returns it.
func (h *h2Raw) answer(t testing.TB, answers map[uint32]*h2Answer, id uint32) *h2Answer {
	t.Helper()
	if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[id] != nil && answers[id].done }); err != nil {
		t.Fatalf("stream %d: %v", id, err)
	}
	return answers[id]
}

// get sends GET path on stream id, without a body, and returns its whole
// answer.
func (h *h2Raw) get(t testing.TB, answers map[uint32]*h2Answer, id uint32, path string) *h2Answer {
	t.Helper()
	if err := h.request(id, "GET", path, true); err != nil {
		t.Fatal(err)
	}
	return h.answer(t, answers, id)
}

// h2Answer is what the server sent on one stream.
type h2Answer struct {
	status   string
	header   map[string]string
	body     []byte
	done     bool              // the stream ended
	reset    http2.ErrCode     // RST_STREAM's code, when it was reset
	wasReset bool              // RST_STREAM came
	trailer  map[string]string // fields after the body
}

// readUntil reads frames until stop holds for one of them (or the
// connection ends: the error), answering the server's SETTINGS and PINGs
// and collecting what each stream got into answers.
func (h *h2Raw) readUntil(bound time.Duration, answers map[uint32]*h2Answer, stop func(http2.Frame) bool) (http2.Frame, error) {
	_ = h.c.SetReadDeadline(time.Now().Add(bound))
	defer h.c.SetReadDeadline(time.Time{}) //nolint:errcheck
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		a := func(id uint32) *h2Answer {
			if answers == nil {
				return &h2Answer{}
			}
			if answers[id] == nil {
				answers[id] = &h2Answer{header: map[string]string{}, trailer: map[string]string{}}
			}
			return answers[id]
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = f.ForeachSetting(func(s http2.Setting) error { h.settings[s.ID] = s.Val; return nil })
				_ = h.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = h.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
			}
		case *http2.MetaHeadersFrame:
			ans := a(f.StreamID)
			for _, hf := range f.Fields {
				switch {
				case hf.Name == ":status":
					ans.status = hf.Value
				case ans.status != "" && ans.body != nil || ans.status != "" && f.StreamEnded() && len(ans.header) > 0:
					ans.trailer[hf.Name] = hf.Value
				default:
					ans.header[hf.Name] = hf.Value
				}
			}
			if f.StreamEnded() {
				ans.done = true
			}
		case *http2.DataFrame:
			ans := a(f.StreamID)
			ans.body = append(ans.body, f.Data()...)
			if ans.body == nil {
				ans.body = []byte{}
			}
			if n := len(f.Data()); n > 0 {
				_ = h.write(func(fr *http2.Framer) error {
					_ = fr.WriteWindowUpdate(0, uint32(n))
					return fr.WriteWindowUpdate(f.StreamID, uint32(n))
				})
			}
			if f.StreamEnded() {
				ans.done = true
			}
		case *http2.RSTStreamFrame:
			ans := a(f.StreamID)
			ans.wasReset, ans.reset, ans.done = true, f.ErrCode, true
		}
		if stop(f) {
			return f, nil
		}
	}
}

// goAway reads until the server's GOAWAY (returned) or the connection's
// end (nil), within bound.
func (h *h2Raw) goAway(bound time.Duration) (*http2.GoAwayFrame, error) {
	f, err := h.readUntil(bound, nil, func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, err
		}
		return nil, nil
	}
	return f.(*http2.GoAwayFrame), nil
}

// dialH2CUpgrade connects to addr, sends head (an HTTP/1.1 request asking
// to upgrade to h2c), reads the 101 answer's head and goes on in HTTP/2:
// the preface, then frames through the returned client.
func dialH2CUpgrade(t *testing.T, addr, head string) *h2Raw {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, _ = io.WriteString(c, head)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 101 ") {
		t.Fatalf("status line %q, %v", status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	return newH2Raw(t, c, br)
}

func TestH2CUpgrade(t *testing.T) {
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRoute(up), nil)
	// SETTINGS_MAX_CONCURRENT_STREAMS = 10, base64url without padding.
	settings := base64.RawURLEncoding.EncodeToString([]byte{0, 3, 0, 0, 0, 10})
	h := dialH2CUpgrade(t, tg.addr(3000), "GET /up?x=1 HTTP/1.1\r\nHost: h2.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: "+settings+"\r\nX-Echo: X-Up\r\nX-Up: yes\r\n\r\n")
	answers := map[uint32]*h2Answer{}
	// The upgrade request is answered on stream 1.
	if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[1] != nil && answers[1].done }); err != nil {
		t.Fatal(err)
	}
	a := answers[1]
	if a.status != "200" || string(a.body) != "GET /up?x=1 " || a.header["x-got-x-up"] != "yes" {
		t.Fatalf("stream 1: %s %q %v", a.status, a.body, a.header)
	}
	// Then the connection goes on in HTTP/2.
	if a := h.get(t, answers, 3, "/next"); a.status != "200" || string(a.body) != "GET /next " {
		t.Fatalf("stream 3: %s %q", a.status, a.body)
	}

	// An upgrade with a body is not taken: served in HTTP/1.1, and the
	// upgrade's fields do not go upstream.
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/b", strings.NewReader("body"))
	req.Header.Set("Connection", "Upgrade, HTTP2-Settings")
	req.Header.Set("Upgrade", "h2c")
	req.Header.Set("HTTP2-Settings", settings)
	req.Header.Set("X-Echo", "Upgrade")
	req.Header.Add("X-Echo", "Http2-Settings")
	resp, body := do(t, req)
	if resp.StatusCode != 200 || body != "POST /b body" || resp.Header.Get("X-Got-Upgrade") != "" || resp.Header.Get("X-Got-Http2-Settings") != "" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
}

// h2Routes are routes with the policies a table of requests checks over
// each protocol (TestH2SameBehaviour).
const h2Routes = `
    routes:
    - matches: [{path: {pathPrefix: /public}}]
      policies:
        requestHeaderModifier: {set: {x-added: "1"}}
        responseHeaderModifier: {set: {x-route: public}}
      backends: [{host: ${UP}}]
    - matches: [{path: {pathPrefix: /b}, headers: [{name: x-route, value: {exact: b}}]}]
      policies: {responseHeaderModifier: {set: {x-route: b}}}
      backends: [{host: ${UP}}]
    - matches: [{path: {pathPrefix: /guarded}}]
      policies:
        authorization: {rules: ['request.headers["x-key"] == "ok"']}
      backends: [{host: ${UP}}]
    - matches: [{path: {exact: /direct}}]
      policies: {directResponse: {status: 418, body: teapot}}
    - matches: [{path: {exact: /moved}}]
      policies: {requestRedirect: {path: {full: /public/new}, status: 301}}
    - matches: [{path: {pathPrefix: /down}}]
      backends: [{host: ${DOWN}}]
`

// TestH2SameBehaviour runs one table of requests over HTTP/1.1, HTTP/2 in
// cleartext and HTTP/2 over TLS: routes, policies and answers are the same.
func TestH2SameBehaviour(t *testing.T) {
	pki := newTestPKI(t, "h2same")
	srv := pki.Server("h2.test", "h2.test", "127.0.0.1")
	up := echoProtoUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - name: plain
    protocol: HTTP`+h2Routes+`
  - name: tls
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}`+h2Routes,
		map[string]string{"UP": up, "DOWN": closedAddr(t), "CERT": srv.CertFile, "KEY": srv.KeyFile})
	protocols := []struct {
		name, base, proto string
		c                 *http.Client
	}{
		{"HTTP/1.1", tg.url(1), "HTTP/1.1", testClient},
		{"h2c", tg.url(1), "HTTP/2.0", h2cClient()},
		{"h2", "https://" + tg.addr(1), "HTTP/2.0", h2TLSClient(pki)},
	}
	cases := []struct {
		desc, method, path string
		headers            []string
		status             int
		body               string // prefix
		want               map[string]string
	}{
		{desc: "route and header policies", method: "GET", path: "/public/x?y=1", headers: []string{"X-Echo", "X-Added"}, status: 200, body: "GET /public/x?y=1 ", want: map[string]string{"x-route": "public", "x-got-x-added": "1"}},
		{desc: "normalized path", method: "GET", path: "/public/./a//b", status: 200, body: "GET /public/a/b "},
		{desc: "header match", method: "GET", path: "/b", headers: []string{"X-Route", "b"}, status: 200, want: map[string]string{"x-route": "b"}},
		{desc: "no route", method: "GET", path: "/b", status: 404, body: "route not found"},
		{desc: "authorization refused", method: "GET", path: "/guarded", status: 403},
		{desc: "authorization passed", method: "POST", path: "/guarded", headers: []string{"X-Key", "ok"}, status: 200, body: "POST /guarded "},
		{desc: "direct response", method: "GET", path: "/direct", status: 418, body: "teapot"},
		{desc: "redirect", method: "GET", path: "/moved", status: 301, want: map[string]string{"location": "*://h2.test/public/new"}},
		{desc: "upstream down", method: "GET", path: "/down", status: 503, body: "upstream unavailable"},
		{desc: "HEAD", method: "HEAD", path: "/public/h", status: 200, body: ""},
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for _, tc := range cases {
				req, _ := http.NewRequest(tc.method, p.base+tc.path, nil)
				req.Host = "h2.test"
				for i := 0; i+1 < len(tc.headers); i += 2 {
					req.Header.Add(tc.headers[i], tc.headers[i+1])
				}
				resp, body := doWith(t, p.c, req)
				if resp.Proto != p.proto {
					t.Fatalf("%s: protocol %s", tc.desc, resp.Proto)
				}
				if resp.StatusCode != tc.status || !strings.HasPrefix(body, tc.body) {
					t.Errorf("%s: %d %q; want %d %q", tc.desc, resp.StatusCode, body, tc.status, tc.body)
				}
				for k, v := range tc.want {
					if got := resp.Header.Get(k); got != v && !(v[0] == '*' && strings.HasSuffix(got, v[1:])) {
						t.Errorf("%s: %s %q; want %q", tc.desc, k, got, v)
					}
				}
			}
		})
	}
}

// TestH2Streaming: an event stream reaches an HTTP/2 client event by event,
// and a request body reaches the upstream piece by piece, both ways at
// once.
func TestH2Streaming(t *testing.T) {
	next := make(chan struct{})
	got := make(chan string, 4)
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
		case "/upload":
			buf := make([]byte, 64)
			for {
				n, err := r.Body.Read(buf)
				if n > 0 {
					got <- string(buf[:n])
				}
				if err != nil {
					break
				}
			}
			io.WriteString(w, "done") //nolint:errcheck
		}
	}))
	tg := startGateway(t, oneRoute(up), nil)
	c := h2cClient()

	t.Run("event stream", func(t *testing.T) {
		resp, err := c.Get(tg.url(3000) + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.Proto != "HTTP/2.0" || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s %v", resp.Proto, resp.Header)
		}
		br := bufio.NewReader(resp.Body)
		for i := range 3 {
			// Each event arrives before the upstream sends the next one.
			line, err := br.ReadString('\n')
			if err != nil || line != fmt.Sprintf("data: %d\n", i) {
				t.Fatalf("event %d: %q %v", i, line, err)
			}
			_, _ = br.ReadString('\n')
			next <- struct{}{}
		}
		if rest, _ := io.ReadAll(br); len(rest) != 0 {
			t.Fatalf("after the events: %q", rest)
		}
	})
	t.Run("request body", func(t *testing.T) {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/upload", pr)
		done := make(chan error, 1)
		var body string
		go func() {
			resp, err := c.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
			}
			done <- err
		}()
		for _, piece := range []string{"first", "second"} {
			// The upstream has each piece before the client sends the next.
			_, _ = io.WriteString(pw, piece)
			select {
			case g := <-got:
				if g != piece {
					t.Fatalf("upstream got %q; want %q", g, piece)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the upstream never got %q", piece)
			}
		}
		pw.Close()
		if err := <-done; err != nil || body != "done" {
			t.Fatalf("%q %v", body, err)
		}
	})
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestH2CUpgradeThenHangUp: clients that ask for the h2c upgrade and hang
// up at once leave stream 1's worker running after the connection's
// serving ended, when fasthttp has let go of the hijacked connection: the
// worker's reads of the connection's addresses (X-Forwarded-For, the
// access log) once panicked on it and took the process down. Both a
// directResponse route and a proxied one, on both transports.
func TestH2CUpgradeThenHangUp(t *testing.T) {
	up := echoProtoUpstream(t)
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		tg := startGatewayWith(t, oneRoute(up)+`
- port: 3001
  listeners:
  - routes:
    - policies: {directResponse: {status: 200, body: hi}}
`, nil, tr)
		const upgrade = "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
		for _, port := range []int{3000, 3001} {
			for i := 0; i < 300; i++ {
				c, err := net.Dial("tcp", tg.addr(port))
				if err != nil {
					t.Fatalf("%v: dial %d: %v", tr, i, err)
				}
				_, _ = io.WriteString(c, upgrade)
				c.Close()
			}
			// Still serving.
			resp, body := do(t, mustRequest(t, http.MethodGet, tg.url(port)+"/"))
			if resp.StatusCode != 200 || body == "" {
				t.Fatalf("%v port %d after the hang-ups: %d %q", tr, port, resp.StatusCode, body)
			}
		}
	}
}

// TestHeadOfTheGatewaysOwnAnswer: a HEAD the gateway answers itself (a
// direct response, a refusal) says the Content-Length a GET would get, over
// HTTP/2 as over HTTP/1.1 (RFC 9110 8.6); over HTTP/2 it said 0.
func TestHeadOfTheGatewaysOwnAnswer(t *testing.T) {
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /direct}}]
      policies: {directResponse: {status: 418, body: teapot}}
    - matches: [{path: {exact: /guarded}}]
      policies: {authorization: {rules: ['request.headers["x-key"] == "ok"']}}
      backends: [{host: 127.0.0.1:1}]
`, nil)
	for _, c := range []*http.Client{http.DefaultClient, h2cClient()} {
		for _, path := range []string{"/direct", "/guarded"} {
			get, getBody := doWith(t, c, mustRequest(t, http.MethodGet, tg.url(3000)+path))
			head, _ := doWith(t, c, mustRequest(t, http.MethodHead, tg.url(3000)+path))
			if head.StatusCode != get.StatusCode || head.ContentLength != int64(len(getBody)) || len(getBody) == 0 {
				t.Errorf("%s %s: HEAD %d length %d, GET %d with %d bytes", head.Proto, path, head.StatusCode, head.ContentLength, get.StatusCode, len(getBody))
			}
		}
	}
}
