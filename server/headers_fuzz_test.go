package server

import (
	"bufio"
	"bytes"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
)

// FuzzRequestHead feeds raw request heads through fasthttp's parser and the
// gateway's own header handling (path, host, Connection tokens, X-Forwarded-*)
// and checks their invariants; nothing may panic.
func FuzzRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET http://Example.COM:8080/a/b?c=d HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /up HTTP/1.1\r\nHost: [::1]:80\r\nConnection: keep-alive, X-Foo, ,close\r\nX-Foo: 1\r\nContent-Length: 3\r\n\r\nabc",
		"GET /?q HTTP/1.1\r\nHost: A:\r\nX-Forwarded-For: 1.2.3.4\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
		"GET * HTTP/1.1\r\nHost: \r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTE: trailers\r\nKeep-Alive: 1\r\nProxy-Connection: x\r\nProxy-Authorization: y\r\n" +
			"Proxy-Authenticate: z\r\nExpect: 100-continue\r\nTrailer: X-Sum\r\nX-Forwarded-Proto: http\r\nCookie: a=b;c=d\r\nContent-Length: 0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	addr := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
			return
		}
		var fctx fasthttp.RequestCtx
		fctx.Init(&req, addr, nil)
		path := requestPath(&fctx)
		if len(path) == 0 || (path[0] != '/' && path[0] != '*' && bytes.Contains(fctx.Request.Header.RequestURI(), []byte("://"))) {
			t.Fatalf("bad path %q from %q", path, fctx.Request.Header.RequestURI())
		}
		if bytes.IndexByte(path, '?') >= 0 {
			t.Fatalf("path %q keeps the query", path)
		}
		host, ok := appendHost(nil, fctx.Request.Header.Host())
		if !ok && len(host) > 0 {
			t.Fatalf("an invalid host appended %q", host)
		}
		if bytes.ContainsAny(host, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Fatalf("host %q not lower-cased", host)
		}
		if len(host) > 0 && host[0] != '[' && bytes.IndexByte(host, ':') >= 0 {
			t.Fatalf("host %q keeps a port", host)
		}
		var removed [][]byte
		removeConnectionTokens(fctx.Request.Header.Peek("Connection"), func(b []byte) { removed = append(removed, b) })
		for _, r := range removed {
			if len(r) == 0 || bytes.EqualFold(r, tokenClose) || bytes.EqualFold(r, tokenKeepAliv) {
				t.Fatalf("removed %q", r)
			}
		}
		// handle counts the headers first (which collects the cookies);
		// requestFields relies on it.
		fctx.Request.Header.Len()
		// Every field looked up by name, as a reference for the fields
		// requestFields reports: the results must be the same.
		var ref fasthttp.RequestCtx
		ref.Init(&fasthttp.Request{}, addr, nil)
		fctx.Request.CopyTo(&ref.Request)
		prepare := func(fctx *fasthttp.RequestCtx, fields uint16) {
			rs := &requestState{}
			rs.pc.Fast = fctx
			rs.pc.Scheme = schemeHTTP
			up := &fakeUpstreamForFuzz
			upgrade := fields&(fieldConnection|fieldUpgrade) == fieldConnection|fieldUpgrade && isUpgrade(&fctx.Request.Header)
			_ = (&bind{}).prepareRequest(rs, &routeBackend{}, up, upgrade, fields, false)
		}
		prepare(&fctx, requestFields(&fctx.Request.Header))
		prepare(&ref, allFields)
		if got, want := fctx.Request.Header.String(), ref.Request.Header.String(); got != want {
			t.Fatalf("with requestFields the head is\n%q\nlooking every field up it is\n%q", got, want)
		}
		xff := fctx.Request.Header.Peek("X-Forwarded-For")
		if !bytes.HasSuffix(xff, []byte("10.1.2.3")) {
			t.Fatalf("X-Forwarded-For %q does not end with the client IP", xff)
		}
		for _, h := range []string{"Keep-Alive", "Proxy-Connection", "Te", "Expect"} {
			if len(fctx.Request.Header.Peek(h)) > 0 {
				t.Fatalf("%s survived", h)
			}
		}
	})
}

var fakeUpstreamForFuzz = backend.Upstream{Addr: "127.0.0.1:1"}
