package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// This file serves agentgateway's newer shapes: gateways with their
// listeners, and the top-level routes, tcpRoutes and llm section attached
// to them by name.

// pathUpstream answers every request with "up " and its path.
func pathUpstream(t *testing.T) string {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "up "+r.URL.Path)
	}))
}

// TestGatewaysRoutesOnListeners: a top-level route attached to one named
// listener serves its hostname only; one attached to the gateway serves
// every listener of it. The config dump writes the file's shape, and fed
// back it serves the same.
func TestGatewaysRoutesOnListeners(t *testing.T) {
	cfg := `
gateways:
  web:
    port: 1
    listeners:
    - name: a
      hostname: a.test
    - name: b
      hostname: b.test
routes:
- name: only-a
  gateways: web/a
  matches: [{path: {pathPrefix: /a}}]
  backends: [{host: '${UP}'}]
- name: everywhere
  gateways: web
  matches: [{path: {pathPrefix: /all}}]
  policies:
    directResponse: {status: 200, body: all}
`
	vars := map[string]string{"UP": pathUpstream(t)}
	tg := startGateway(t, cfg, vars)
	check := func(tg *testGateway) {
		t.Helper()
		for _, tc := range []struct {
			host, path string
			status     int
			body       string
		}{
			{"a.test", "/a/x", 200, "up /a/x"},
			{"b.test", "/a/x", 404, ""},
			{"a.test", "/all", 200, "all"},
			{"b.test", "/all", 200, "all"},
		} {
			resp, body := get(t, tg.url(1)+tc.path, "Host", tc.host)
			if resp.StatusCode != tc.status || tc.body != "" && body != tc.body {
				t.Errorf("%s%s: %d %q, want %d %q", tc.host, tc.path, resp.StatusCode, body, tc.status, tc.body)
			}
		}
	}
	check(tg)

	dump, err := tg.gw.ConfigDump()
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(dump, &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["binds"]; ok || top["gateways"] == nil || top["routes"] == nil {
		t.Fatalf("the dump is not in the file's shape:\n%s", dump)
	}
	check(startGateway(t, string(dump), nil))
}

// TestGatewaysFlatJWT: a gateway of one listener with jwtAuth beside its
// port authenticates every route attached to it (here by default, the
// gateway being named "default").
func TestGatewaysFlatJWT(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	tg := startGateway(t, `
gateways:
  default:
    port: 2
    jwtAuth: {issuer: '${ISS}', jwks: '${JWKS}'}
routes:
- backends: [{host: '${UP}'}]
`, map[string]string{"ISS": iss.Iss, "JWKS": string(iss.JWKS()), "UP": pathUpstream(t)})
	resp, _ := get(t, tg.url(2)+"/x")
	if resp.StatusCode != 401 {
		t.Errorf("without a token: %d, want 401", resp.StatusCode)
	}
	resp, body := get(t, tg.url(2)+"/x", "Authorization", "Bearer "+iss.Sign(iss.Claims("alice")))
	if resp.StatusCode != 200 || body != "up /x" {
		t.Errorf("with a token: %d %q", resp.StatusCode, body)
	}
}

// TestGatewaysTCPRouteBySNI: top-level tcpRoutes attached to a TLS
// passthrough listener (by name, and through their gateway) forward each
// connection by its server name.
func TestGatewaysTCPRouteBySNI(t *testing.T) {
	pki := newTestPKI(t, "gateways-sni")
	upA := tlsUpstream(t, pki.Server("a.test", "a.test").TLS, "from A")
	upB := tlsUpstream(t, pki.Server("b.test", "b.test", "x.wild.test").TLS, "from B")
	tg := startGateway(t, `
gateways:
  edge:
    port: 3
    listeners:
    - name: passthrough
      protocol: TLS
tcpRoutes:
- gateways: edge/passthrough
  hostnames: [a.test]
  backends: [{host: '${A}'}]
- gateways: [edge]
  hostnames: ["*.wild.test", b.test]
  backends: [{host: '${B}'}]
`, map[string]string{"A": upA, "B": upB})
	client := &tls.Config{RootCAs: pki.Pool}
	for _, tc := range []struct{ sni, cn, body string }{
		{"a.test", "a.test", "from A"},
		{"b.test", "b.test", "from B"},
		{"x.wild.test", "b.test", "from B"},
	} {
		cn, body, err := tlsGet(t, tg.addr(3), tc.sni, client)
		if err != nil {
			t.Fatalf("%s: %v", tc.sni, err)
		}
		if cn != tc.cn || body != tc.body {
			t.Errorf("%s: certificate %q, body %q; want %q, %q", tc.sni, cn, body, tc.cn, tc.body)
		}
	}
	cfg := client.Clone()
	cfg.InsecureSkipVerify = true
	if _, _, err := tlsGet(t, tg.addr(3), "c.test", cfg); err == nil {
		t.Error("c.test: connected; want the connection closed")
	}
}

// TestGatewaysLLMSection: llm.gateways attaches the llm section to an
// HTTPS listener of a gateway, as agentgateway's traffic-egress-proxy
// example does: its models are served there, with llm.policies, and not on
// the section's own port nor on the gateway's other listener.
func TestGatewaysLLMSection(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "from openai"})
	pki := newTestPKI(t, "gateways-llm")
	llmCert := pki.Server("llm.test", "llm.test")
	otherCert := pki.Server("other.test", "other.test")
	tg := startGateway(t, `
gateways:
  secure:
    port: 443
    listeners:
    - name: llm
      hostname: llm.test
      tls: {cert: '${LLM_CERT}', key: '${LLM_KEY}'}
    - name: other
      hostname: other.test
      tls: {cert: '${OTHER_CERT}', key: '${OTHER_KEY}'}
routes:
- gateways: secure/other
  policies:
    directResponse: {status: 200, body: other}
llm:
  gateways: secure/llm
  policies:
    authorization: {rules: ['request.headers["x-team"] == "blue"']}
  models:
  - name: smart
    provider: openAI
    params: {model: gpt-5.5, apiKey: `+o.APIKey+`, hostOverride: "`+o.Addr()+`"}
`, map[string]string{"LLM_CERT": llmCert.CertFile, "LLM_KEY": llmCert.KeyFile, "OTHER_CERT": otherCert.CertFile, "OTHER_KEY": otherCert.KeyFile})
	if _, ok := tg.gw.Addrs()[config.DefaultLLMPort]; ok {
		t.Errorf("the llm section has a port of its own besides the gateway's")
	}
	// Every name is the gateway's address, over TLS with the test CA.
	addr := tg.addr(443)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.Pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	c := openai.NewClient(option.WithBaseURL("https://llm.test/v1"), option.WithHTTPClient(hc), option.WithAPIKey("client"), option.WithMaxRetries(0),
		option.WithHeader("x-team", "blue"))
	resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("smart"))
	if err != nil || resp.Choices[0].Message.Content != "from openai" {
		t.Fatalf("smart: %v", err)
	}
	if m := o.Last().Model; m != "gpt-5.5" {
		t.Errorf("smart reached the provider as %q", m)
	}
	// llm.policies apply.
	nobody := openai.NewClient(option.WithBaseURL("https://llm.test/v1"), option.WithHTTPClient(hc), option.WithAPIKey("client"), option.WithMaxRetries(0))
	_, err = nobody.Chat.Completions.New(llmCtx(t), chatRequest("smart"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 {
		t.Errorf("without x-team: %v, want 403", err)
	}
	// The gateway's other listener serves its own route only.
	for _, tc := range []struct{ host, body string }{{"other.test", "other"}} {
		r, err := hc.Get("https://" + tc.host + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if string(b) != tc.body {
			t.Errorf("%s/v1/models: %d %q, want %q", tc.host, r.StatusCode, b, tc.body)
		}
	}
}

// TestGatewaysErrorPaths: what compiling finds in a listener or route
// Parse made of the newer shapes is reported at the path the user wrote,
// with its line.
func TestGatewaysErrorPaths(t *testing.T) {
	f := parseConfig(t, `
gateways:
  web:
    port: 80
    listeners:
    - {name: a, hostname: a.test}
    - {name: b, hostname: b.test}
  secure:
    port: 443
    tls: {cert: /nonexistent/cert.pem, key: /nonexistent/key.pem}
routes:
- gateways: [web, secure]
  policies:
    mcpAuthentication: {issuer: 'https://i', audiences: [], resourceMetadata: {}, jwks: '{"keys":[]}'}
    jwtAuth: {issuer: i, jwks: '{"keys":[]}'}
  backends: [{host: '127.0.0.1:1'}]
`, nil)
	err := Validate(f)
	if err == nil {
		t.Fatal("accepted")
	}
	got := err.Error()
	for _, want := range []string{
		"routes[0].policies.jwtAuth.jwks: invalid key set: no usable signing key (RSA, EC P-256/P-384/P-521 or Ed25519 with a kid) (line 15:32)",
		"routes[0].policies.mcpAuthentication: cannot be combined with jwtAuth on one route (jwtAuth validates and removes the token first) (line 14:24)",
		"gateways.secure.tls.cert: cannot read the certificate: open /nonexistent/cert.pem: no such file or directory (line 10:17)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors:\n%s\nwant among them:\n%s", got, want)
		}
	}
	// Once each, though the route is on three listeners.
	if n := strings.Count(got, "\n") + 1; n != 3 {
		t.Errorf("%d errors, want 3:\n%s", n, got)
	}
}
