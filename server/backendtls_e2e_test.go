package server

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/backend/tlstest"
)

// backendTLSPKI is the test's certificates: a CA and the server leaf it
// signed for api.internal.test, 127.0.0.1 and a SPIFFE id, another CA, and
// a client certificate, with their PEM files in vars (ROOT, OTHER, CERT,
// KEY, STRANGER_CERT, STRANGER_KEY).
type backendTLSPKI struct {
	ca, clientCA *tlstest.CA
	leaf         *tlstest.Leaf
	vars         map[string]string
}

const backendTLSSpiffe = "spiffe://cluster.local/ns/a/sa/api"

func newBackendTLSPKI(t *testing.T) *backendTLSPKI {
	t.Helper()
	p := &backendTLSPKI{ca: tlstest.NewCA(t, "test CA"), clientCA: tlstest.NewCA(t, "client CA")}
	p.leaf = p.ca.Server(t, tlstest.Names{DNS: []string{"api.internal.test"}, IPs: []string{"127.0.0.1"}, URIs: []string{backendTLSSpiffe}})
	client := p.clientCA.Client(t, "gateway")
	stranger := tlstest.NewCA(t, "stranger").Client(t, "stranger")
	p.vars = map[string]string{
		"ROOT":          tlstest.WriteFile(t, "ca.pem", p.ca.PEM),
		"OTHER":         tlstest.WriteFile(t, "other.pem", tlstest.NewCA(t, "other CA").PEM),
		"CERT":          tlstest.WriteFile(t, "client.pem", client.CertPEM),
		"KEY":           tlstest.WriteFile(t, "client.key", client.KeyPEM),
		"STRANGER_CERT": tlstest.WriteFile(t, "stranger.pem", stranger.CertPEM),
		"STRANGER_KEY":  tlstest.WriteFile(t, "stranger.key", stranger.KeyPEM),
	}
	return p
}

// with returns the vars with more name, value pairs.
func (p *backendTLSPKI) with(kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range p.vars {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// requestsTo returns what the upstream saw of requests to path.
func requestsTo(up *tlstest.Server, path string) []tlstest.Request {
	var out []tlstest.Request
	for _, r := range up.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// TestBackendTLSVerificationModes: one route per way of verifying the
// backend, all to one upstream whose certificate the test's CA signed. A
// backend that does not verify is a 503 with a log line naming the backend
// and the reason, and gets no request; one that does serves it over TLS
// with the SNI and ALPN configured.
func TestBackendTLSVerificationModes(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf})
	tests := []struct {
		desc    string
		tls     string
		status  int
		sni     string // SNI the upstream saw
		wantLog string // in the reason of the log line of a 503
	}{
		{"system roots", `{}`, 503, "", "unknown authority"},
		{"root", `{root: '${ROOT}'}`, 200, "", ""},
		{"wrong hostname", `{root: '${ROOT}', hostname: wrong.test}`, 503, "", "not wrong.test"},
		{"hostname", `{root: '${ROOT}', hostname: api.internal.test}`, 200, "api.internal.test", ""},
		{"insecureHost, wrong hostname", `{root: '${ROOT}', hostname: wrong.test, insecureHost: true}`, 200, "wrong.test", ""},
		{"insecureHost, untrusted CA", `{root: '${OTHER}', insecureHost: true}`, 503, "", "unknown authority"},
		{"insecure", `{root: '${OTHER}', hostname: wrong.test, insecure: true}`, 200, "wrong.test", ""},
		{"insecure, system roots", `{insecure: true}`, 200, "", ""},
		{"subjectAltNames match", `{root: '${ROOT}', hostname: wrong.test, subjectAltNames: [other.test, '` + backendTLSSpiffe + `']}`, 200, "wrong.test", ""},
		{"subjectAltNames mismatch", `{root: '${ROOT}', subjectAltNames: ['spiffe://cluster.local/ns/a/sa/other', wrong.test]}`, 503, "", "match none of subjectAltNames"},
		{"alpn", `{root: '${ROOT}', alpn: [http/1.1, x-test]}`, 200, "", ""},
	}
	var cfg strings.Builder
	cfg.WriteString("binds:\n- port: 3000\n  listeners:\n  - routes:\n")
	for i, tc := range tests {
		cfg.WriteString("    - name: c" + strconv.Itoa(i) + "\n")
		cfg.WriteString("      matches: [{path: {pathPrefix: /c" + strconv.Itoa(i) + "/}}]\n")
		cfg.WriteString("      policies: {backendTLS: " + tc.tls + "}\n")
		cfg.WriteString("      backends: [{host: '${UP}'}]\n")
	}
	tg := startGateway(t, cfg.String(), pki.with("UP", up.Addr))
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			path := "/c" + strconv.Itoa(i) + "/x"
			resp, body := get(t, tg.url(3000)+path)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, body, tc.status)
			}
			seen := requestsTo(up, path)
			if tc.status != 200 {
				if len(seen) != 0 {
					t.Fatalf("the upstream served %d requests", len(seen))
				}
				logged := false
				for _, e := range tg.accessLogs().FilterMessage("upstream TLS handshake failed").All() {
					f := e.ContextMap()
					logged = logged || f["backend"] == up.Addr && strings.Contains(f["reason"].(string), tc.wantLog)
				}
				if !logged {
					t.Fatalf("no log line names backend %s and %q", up.Addr, tc.wantLog)
				}
				return
			}
			if body != "ok" || len(seen) != 1 || seen[0].ServerName != tc.sni || seen[0].Protocol != "http/1.1" {
				t.Fatalf("body %q; upstream saw %+v, want one request with SNI %q over http/1.1", body, seen, tc.sni)
			}
		})
	}
	offered := false
	for _, h := range up.Hellos() {
		offered = offered || slices.Equal(h.ALPN, []string{"http/1.1", "x-test"})
	}
	if !offered {
		t.Fatalf("no handshake offered [http/1.1 x-test]: %+v", up.Hellos())
	}
}

// TestBackendTLSHandshakeLogThrottled: a backend whose certificate does
// not verify fails every request, and the log says so once per
// tlsLogEvery, the line counting those held back since the last (none
// before the first).
func TestBackendTLSHandshakeLogThrottled(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {backendTLS: {root: '${OTHER}'}}
      backends: [{host: '${UP}'}]
`, pki.with("UP", up.Addr))
	const requests = 20
	for range requests {
		if resp, body := get(t, tg.url(3000)+"/x"); resp.StatusCode != 503 {
			t.Fatalf("status %d %q, want 503", resp.StatusCode, body)
		}
	}
	lines := tg.accessLogs().FilterMessage("upstream TLS handshake failed").All()
	if len(lines) != 1 {
		t.Fatalf("%d lines for %d failed handshakes within %v, want 1", len(lines), requests, tlsLogEvery)
	}
	if f := lines[0].ContextMap(); f["backend"] != up.Addr || f["similar_errors_not_logged"] != int64(0) {
		t.Fatalf("logged %v, want the backend and similar_errors_not_logged 0", f)
	}
}

// TestBackendTLSClientCert: an upstream that requires a client
// certificate serves the routes whose merged backendTLS has the test's
// (route level, backend level over the route's, a named backend's, a
// top-level policy's targeting a route or a backend) and no other. The backend level replaces the route's whole: a backend setting
// without cert drops the route's.
func TestBackendTLSClientCert(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf, ClientCAs: pki.clientCA})
	tg := startGateway(t, `
backends:
- name: mtls
  host: '${UP}'
  policies:
    backendTLS: {root: '${ROOT}', cert: '${CERT}', key: '${KEY}'}
- name: targeted
  host: '${UP}'
policies:
- name: {name: route-tls, namespace: default}
  target: {route: {name: by-route-target, namespace: default}}
  policy: {backendTLS: {root: '${ROOT}', cert: '${CERT}', key: '${KEY}'}}
- name: {name: backend-tls, namespace: default}
  target: {backend: {backend: {name: targeted, namespace: default}}}
  policy: {backendTLS: {root: '${ROOT}', cert: '${CERT}', key: '${KEY}'}}
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /named}}]
      backends: [{backend: mtls}]
    - matches: [{path: {pathPrefix: /route}}]
      policies: {backendTLS: {root: '${ROOT}', cert: '${CERT}', key: '${KEY}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /backend}}]
      policies: {backendTLS: {root: '${ROOT}'}}
      backends: [{host: '${UP}', policies: {backendTLS: {root: '${ROOT}', cert: '${CERT}', key: '${KEY}'}}}]
    - matches: [{path: {pathPrefix: /none}}]
      policies: {backendTLS: {root: '${ROOT}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /replaced}}]
      policies: {backendTLS: {root: '${ROOT}', cert: '${CERT}', key: '${KEY}'}}
      backends: [{host: '${UP}', policies: {backendTLS: {root: '${ROOT}'}}}]
    - name: by-route-target
      matches: [{path: {pathPrefix: /target-route}}]
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /target-backend}}]
      backends: [{backend: targeted}]
    - matches: [{path: {pathPrefix: /stranger}}]
      policies: {backendTLS: {root: '${ROOT}', cert: '${STRANGER_CERT}', key: '${STRANGER_KEY}'}}
      backends: [{host: '${UP}'}]
`, pki.with("UP", up.Addr))
	for _, path := range []string{"/named", "/route", "/backend", "/target-route", "/target-backend"} {
		resp, body := get(t, tg.url(3000)+path)
		if seen := requestsTo(up, path); resp.StatusCode != 200 || len(seen) != 1 || seen[0].ClientCN != "gateway" {
			t.Fatalf("%s: %d %q, upstream saw %+v", path, resp.StatusCode, body, seen)
		}
	}
	// Over TLS 1.3 the upstream refuses the certificate after the
	// client's side of the handshake is done, with the request written:
	// the connection's end is a 502, as for any upstream that hangs up.
	// Over TLS 1.2 it would be a failed handshake, a 503.
	for _, path := range []string{"/none", "/replaced", "/stranger"} {
		resp, body := get(t, tg.url(3000)+path)
		if seen := requestsTo(up, path); resp.StatusCode != 502 || len(seen) != 0 {
			t.Fatalf("%s: %d %q, upstream saw %+v; want 502 and nothing served", path, resp.StatusCode, body, seen)
		}
	}
}

// TestBackendTLSPoolsNeverShared: routes to one upstream address with
// different backendTLS settings never share a connection (each request
// arrives with its own route's SNI, and each setting opened its own
// connection); routes with equal settings share one.
func TestBackendTLSPoolsNeverShared(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /a}}]
      policies: {backendTLS: {root: '${ROOT}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /b}}]
      policies: {backendTLS: {root: '${ROOT}', hostname: api.internal.test}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /c}}]
      backends: [{host: '${UP}', policies: {backendTLS: {root: '${ROOT}'}}}]
`, pki.with("UP", up.Addr))
	sni := map[string]string{"/a": "", "/b": "api.internal.test", "/c": ""}
	for range 3 {
		for _, path := range []string{"/a", "/b", "/c"} {
			if resp, body := get(t, tg.url(3000)+path); resp.StatusCode != 200 {
				t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
			}
		}
	}
	for path, want := range sni {
		for _, r := range requestsTo(up, path) {
			if r.ServerName != want {
				t.Fatalf("a request to %s came with SNI %q, want %q: a connection of another setting", path, r.ServerName, want)
			}
		}
	}
	if n, h := up.Conns(), len(up.Hellos()); n != 2 || h != 2 {
		t.Fatalf("%d connections, %d handshakes for two settings, want 2 each", n, h)
	}
}

// TestBackendTLSReloadKeepsPool: a reload that keeps the settings keeps the
// pool and its warm connection; one whose root file changed (same path,
// same YAML) makes a new pool.
func TestBackendTLSReloadKeepsPool(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf})
	cfg := `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {backendTLS: {root: '${ROOT}', hostname: api.internal.test}}
      backends: [{host: '${UP}'}]
`
	vars := pki.with("UP", up.Addr)
	tg := startGateway(t, cfg, vars)
	hit := func() {
		t.Helper()
		if resp, body := get(t, tg.url(3000)+"/"); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	}
	hit()
	tg.apply(cfg, vars)
	hit()
	if n := up.Conns(); n != 1 {
		t.Fatalf("%d connections across a reload that kept the settings, want 1", n)
	}
	// The same CA and one more: trusted as before, but other contents.
	if err := os.WriteFile(vars["ROOT"], append(append([]byte{}, pki.ca.PEM...), tlstest.NewCA(t, "second").PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	tg.apply(cfg, vars)
	hit()
	if n := up.Conns(); n != 2 {
		t.Fatalf("%d connections after the root file changed, want 2 (a new pool)", n)
	}
}

// TestBackendTLSDynamic: agentgateway's egress form, a dynamic backend with
// backendTLS, reaches the request's destination over TLS.
func TestBackendTLSDynamic(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{dynamic: {}, policies: {backendTLS: {root: '${ROOT}'}}}]
`, pki.vars)
	resp, body := get(t, tg.url(3000)+"/dyn", "Host", up.Addr)
	if seen := requestsTo(up, "/dyn"); resp.StatusCode != 200 || body != "ok" || len(seen) != 1 || seen[0].Protocol != "http/1.1" {
		t.Fatalf("%d %q, upstream saw %+v", resp.StatusCode, body, seen)
	}
}

// TestBackendTLSAI: an ai backend's backendTLS reaches its provider's pool
// (a hostOverride, plain HTTP without it), the provider's own replacing
// the backend's.
func TestBackendTLSAI(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Paris"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`))
	})})
	cfg := `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /backend}}]
      backends:
      - ai: {name: p, hostOverride: '${UP}', provider: {openAI: {model: m}}}
        policies: {backendTLS: {root: '${ROOT}', hostname: api.internal.test}}
    - matches: [{path: {pathPrefix: /provider}}]
      policies: {backendTLS: {root: '${OTHER}'}}
      backends:
      - ai: {name: p, hostOverride: '${UP}', provider: {openAI: {model: m}}, policies: {backendTLS: {root: '${ROOT}'}}}
    - matches: [{path: {pathPrefix: /plain}}]
      backends:
      - ai: {name: p, hostOverride: '${UP}', provider: {openAI: {model: m}}}
`
	vars := pki.with("UP", up.Addr)
	tg := startGateway(t, cfg, vars)
	chat := `{"model":"m","messages":[{"role":"user","content":"Capital of France?"}]}`
	for path, sni := range map[string]string{"/backend": "api.internal.test", "/provider": ""} {
		resp, body := postJSON(t, tg.url(3000)+path, chat)
		if resp.StatusCode != 200 || !strings.Contains(body, "Paris") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		hs := up.Requests()
		if last := hs[len(hs)-1]; last.ServerName != sni || last.Protocol != "http/1.1" {
			t.Fatalf("%s: upstream saw %+v, want SNI %q", path, last, sni)
		}
	}
	// Without backendTLS a hostOverride is plain HTTP, which Go's TLS
	// server refuses with a 400 of its own.
	n := len(up.Requests())
	if resp, body := postJSON(t, tg.url(3000)+"/plain", chat); resp.StatusCode != 400 || !strings.Contains(body, "HTTP request to an HTTPS server") || len(up.Requests()) != n {
		t.Fatalf("/plain: %d %s", resp.StatusCode, body)
	}

	// A reload keeps the provider's pool, unless the files of its own
	// backendTLS changed: a root that no longer trusts the upstream is
	// then what its requests meet.
	conns := up.Conns()
	tg.apply(cfg, vars)
	if resp, body := postJSON(t, tg.url(3000)+"/provider", chat); resp.StatusCode != 200 || up.Conns() != conns {
		t.Fatalf("after a reload that changed nothing: %d %s, %d new connections", resp.StatusCode, body, up.Conns()-conns)
	}
	if err := os.WriteFile(vars["ROOT"], tlstest.NewCA(t, "second").PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tg.apply(cfg, vars)
	n = len(up.Requests())
	if resp, body := postJSON(t, tg.url(3000)+"/provider", chat); resp.StatusCode != 503 || len(up.Requests()) != n {
		t.Fatalf("after the provider's root file changed to another CA: %d %s, want 503", resp.StatusCode, body)
	}
}

// TestBackendTLSMCP: an MCP backend's backendTLS reaches its HTTP targets
// with TLS on their address (an http:// target URL included).
func TestBackendTLSMCP(t *testing.T) {
	pki := newBackendTLSPKI(t)
	srv := sdk.NewServer(&sdk.Implementation{Name: "secure", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "secure"}}}, nil
	})
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf, Handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /mcp}}]
      backends:
      - mcp:
          targets:
          - {name: secure, mcp: {host: '127.0.0.1', port: ${PORT}}}
        policies: {backendTLS: {root: '${ROOT}'}}
    - matches: [{path: {exact: /plain}}]
      backends:
      - mcp:
          targets:
          - {name: secure, mcp: {host: '127.0.0.1', port: ${PORT}}}
`, pki.with("PORT", strings.TrimPrefix(up.Addr, "127.0.0.1:")))
	if _, err := mcpConnect(t, tg.url(3000)+"/plain", ""); err == nil {
		t.Fatal("a target served over TLS answered plain HTTP")
	}
	cs, err := mcpConnect(t, tg.url(3000)+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("tools %v", got)
	}
	seen := requestsTo(up, "/mcp")
	if len(seen) == 0 || seen[0].Protocol != "http/1.1" {
		t.Fatalf("upstream saw %+v", seen)
	}
}

// TestBackendTLSLoadErrors: a file backendTLS names that cannot be used,
// or a backendTLS where it cannot apply, is a load error naming the field
// of the level that set it.
func TestBackendTLSLoadErrors(t *testing.T) {
	pki := newBackendTLSPKI(t)
	vars := pki.with("MISSING", "/nonexistent/ca.pem", "TEXT", tlstest.WriteFile(t, "text.pem", []byte("text")))
	route := "binds[0].listeners[0].routes[0]."
	tests := []struct {
		desc, yaml, want string
	}{
		{"missing root at the route", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {backendTLS: {root: '${MISSING}'}}
      backends: [{host: 127.0.0.1:1}]
`, route + `policies.backendTLS.root: "/nonexistent/ca.pem": cannot read: no such file or directory`},
		{"key of another certificate at the backend", `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: 127.0.0.1:1, policies: {backendTLS: {cert: '${CERT}', key: '${STRANGER_KEY}'}}}]
`, route + `backends[0].policies.backendTLS.key: "` + vars["STRANGER_KEY"] + `": does not match the certificate of cert (` + vars["CERT"] + `)`},
		{"cert without PEM at a named backend", `
backends:
- {name: b, host: 127.0.0.1:1, policies: {backendTLS: {cert: '${TEXT}', key: '${KEY}'}}}
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{backend: b}]
`, `backends[0].policies.backendTLS.cert: "` + vars["TEXT"] + `": no PEM certificate`},
		{"root at an ai provider", `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - ai: {name: p, hostOverride: 127.0.0.1:1, provider: {openAI: {}}, policies: {backendTLS: {root: '${TEXT}'}}}
`, route + `backends[0].ai.policies.backendTLS.root: "` + vars["TEXT"] + `": no PEM certificate`},
		{"MCP backend of stdio targets", `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp: {targets: [{name: s, stdio: {cmd: /bin/true}}]}
        policies: {backendTLS: {}}
`, route + `backends[0].policies.backendTLS: applies to the HTTP targets of an MCP backend, and this one has none`},
		{"a service backend with backendTLS", `
backends:
- {name: authz, host: 127.0.0.1:1, policies: {backendTLS: {}}}
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {extAuthz: {backend: authz}}
      backends: [{host: 127.0.0.1:2}]
`, route + `policies.extAuthz.backend: backend "authz" has backendTLS, which this policy's connection does not apply yet`},
		{"a mirror's named backend", `
backends:
- {name: m, host: 127.0.0.1:1, policies: {backendTLS: {root: '${MISSING}'}}}
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {requestMirror: {backend: {backend: m}, percentage: 1}}
      backends: [{host: 127.0.0.1:2}]
`, `backends[0].policies.backendTLS.root: "/nonexistent/ca.pem": cannot read`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := Validate(parseConfig(t, tc.yaml, vars))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}
