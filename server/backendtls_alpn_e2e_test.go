package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/tlstest"
)

// TestBackendTLSALPNChoosesTheVersion: backendTLS's alpn list with h2
// makes a host backend's requests HTTP/2. With h2 and http/1.1 the backend
// picks: one that picks http/1.1 is served in HTTP/1.1 from the first
// request on (the first handshake offered both, later ones http/1.1
// alone); h2 alone to a backend without it is a 503 naming the reason.
func TestBackendTLSALPNChoosesTheVersion(t *testing.T) {
	pki := newBackendTLSPKI(t)
	both := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf, ALPN: []string{"h2", "http/1.1"}})
	h1 := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf})
	vars := pki.with("BOTH", both.Addr)
	vars["H1"] = h1.Addr
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /auto-h2/}}]
      policies: {backendTLS: {root: '${ROOT}', alpn: [h2, http/1.1]}}
      backends: [{host: '${BOTH}'}]
    - matches: [{path: {pathPrefix: /auto-h1/}}]
      policies: {backendTLS: {root: '${ROOT}', alpn: [h2, http/1.1]}}
      backends: [{host: '${H1}'}]
    - matches: [{path: {pathPrefix: /only-h2/}}]
      policies: {backendTLS: {root: '${ROOT}', alpn: [h2]}}
      backends: [{host: '${BOTH}'}]
    - matches: [{path: {pathPrefix: /only-h2-refused/}}]
      policies: {backendTLS: {root: '${ROOT}', alpn: [h2]}}
      backends: [{host: '${H1}'}]
    - matches: [{path: {pathPrefix: /http1/}}]
      policies: {backendTLS: {root: '${ROOT}', alpn: [h2, http/1.1]}}
      backends:
      - host: '${BOTH}'
        policies: {http: {version: HTTP1}}
`, vars)
	served := func(up *tlstest.Server, path, proto string) {
		t.Helper()
		resp, body := get(t, tg.url(3000)+path)
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%s: status %d %q", path, resp.StatusCode, body)
		}
		seen := requestsTo(up, path)
		if len(seen) != 1 || seen[0].Protocol != proto {
			t.Fatalf("%s: the upstream saw %+v, want one request over %s", path, seen, proto)
		}
	}
	served(both, "/auto-h2/a", "h2")
	served(both, "/auto-h2/b", "h2")
	served(both, "/only-h2/a", "h2")
	served(both, "/http1/a", "http/1.1")

	served(h1, "/auto-h1/a", "http/1.1")
	served(h1, "/auto-h1/b", "http/1.1")
	offered := map[string]int{}
	for _, h := range h1.Hellos() {
		offered[strings.Join(h.ALPN, " ")]++
	}
	if offered["h2 http/1.1"] != 1 {
		t.Fatalf("handshakes with the HTTP/1.1 backend offered %v: want h2 and http/1.1 once, then http/1.1", offered)
	}

	before := len(h1.Requests())
	resp, body := get(t, tg.url(3000)+"/only-h2-refused/a")
	if resp.StatusCode != 503 || len(h1.Requests()) != before {
		t.Fatalf("h2 alone to a backend without it: status %d %q, upstream requests %d → %d", resp.StatusCode, body, before, len(h1.Requests()))
	}
	logged := false
	for _, e := range tg.accessLogs().FilterMessage("upstream TLS handshake failed").All() {
		// Go's TLS server refuses a handshake that shares no protocol
		// (RFC 7301's alert); a server that ignores ALPN picks none.
		reason := fmt.Sprint(e.ContextMap()["reason"])
		logged = logged || strings.Contains(reason, "no application protocol") || strings.Contains(reason, "did not negotiate HTTP/2")
	}
	if !logged {
		t.Fatalf("no log line says the backend refused h2")
	}
}

// TestBackendTLSALPNByKind: an alpn list a backend could not heed is a
// config error naming the field, not a list narrowed in silence; a TCP
// route, which carries bytes, offers any list.
func TestBackendTLSALPNByKind(t *testing.T) {
	tests := []struct{ desc, backend, want string }{
		{"mcp with h2", `{mcp: {targets: [{name: a, mcp: {host: 'https://127.0.0.1:1/mcp'}}]}, policies: {backendTLS: {alpn: [h2, http/1.1]}}}`,
			"backends[0].policies.backendTLS.alpn[0]: this backend kind speaks HTTP/1.1 to its targets: offer http/1.1"},
		{"ai provider with h2 alone", `{ai: {name: p, provider: {openAI: {}}, policies: {backendTLS: {alpn: [h2]}}}}`,
			"backendTLS.alpn[0]: this backend kind speaks HTTP/1.1 to its targets"},
		{"host with neither", `{host: '127.0.0.1:1', policies: {backendTLS: {alpn: [x-a]}}}`,
			"backends[0].policies.backendTLS.alpn: must include http/1.1 or h2, the protocols the gateway speaks to HTTP backends"},
		{"HTTP1 without http/1.1", `{host: '127.0.0.1:1', policies: {http: {version: HTTP1}, backendTLS: {alpn: [h2]}}}`,
			"backends[0].policies.backendTLS.alpn: must include http/1.1: http.version is HTTP1"},
		{"HTTP2 without h2", `{host: '127.0.0.1:1', policies: {http: {version: HTTP2}, backendTLS: {alpn: [http/1.1]}}}`,
			"backends[0].policies.backendTLS.alpn: must include h2: http.version is HTTP2"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
			t.Cleanup(func() { gw.Shutdown(expiredContext()) })
			err := gw.Apply(parseConfig(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - "+tc.backend+"\n", nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	t.Cleanup(func() { gw.Shutdown(expiredContext()) })
	if err := gw.Apply(parseConfig(t, `
binds:
- port: 3001
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{host: '127.0.0.1:1'}]
      policies: {backendTLS: {alpn: [h2, x-a]}}
`, nil)); err != nil {
		t.Fatalf("a TCP route's alpn: %v", err)
	}
}
