package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/config"
)

// TestConnectIntoPortZeroWildcardBind: `port: 0` on an internal bind is the
// bind of every port, as a bind without a port is (and as agentgateway
// reads it): a tunnel to any port reaches its routes.
func TestConnectIntoPortZeroWildcardBind(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain "+r.Host)
	}))
	tg := startGateway(t, `
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- port: 0
  mode: internal
  listeners:
  - routes:
    - policies: {responseHeaderModifier: {set: {x-via: wildcard}}}
      backends: [{dynamic: {}}]
`, nil)
	c, br, status := connectRaw(t, tg.addr(1), up)
	if status != 200 {
		t.Fatalf("CONNECT %s: %d", up, status)
	}
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: "+up+"\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "plain "+up || resp.Header.Get("x-via") != "wildcard" {
		t.Fatalf("%d %q %q", resp.StatusCode, body, resp.Header.Get("x-via"))
	}
}

// TestLLMBaseURLWithExplicitHostOrPrefix: a model's params.hostOverride or
// pathPrefix given with baseUrl wins over baseUrl's host or path, as in
// agentgateway (test_llm_base_url_does_not_override_explicit_path_prefix,
// ..._host_override); the rest of baseUrl still applies.
func TestLLMBaseURLWithExplicitHostOrPrefix(t *testing.T) {
	var (
		mu    sync.Mutex
		paths []string
	)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	tg := startGateway(t, `
llm:
  port: 4000
  models:
  - name: prefixed
    provider: openAI
    params: {apiKey: k, baseUrl: "http://`+up+`/openai/v1", pathPrefix: /gateway/openai}
  - name: hosted
    provider: openAI
    params: {apiKey: k, baseUrl: "http://127.0.0.1:1/inference/v1", hostOverride: "`+up+`"}
`, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))
	for _, tc := range []struct{ model, path string }{
		{"prefixed", "/gateway/openai/chat/completions"},
		{"hosted", "/inference/v1/chat/completions"},
	} {
		resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest(tc.model))
		if err != nil || resp.Choices[0].Message.Content != "hi" {
			t.Fatalf("%s: %v", tc.model, err)
		}
		mu.Lock()
		last := paths[len(paths)-1]
		mu.Unlock()
		if last != tc.path {
			t.Errorf("%s reached the provider at %s, want %s", tc.model, last, tc.path)
		}
	}
}

// TestTracingEndpointWithoutSchemeIsHTTPS: config.tracing.otlpEndpoint
// given as host:port is https://host:port, as agentgateway's validate_uri
// makes it: the exporter opens TLS to it (the collector reads a TLS
// ClientHello, record type 22, first).
func TestTracingEndpointWithoutSchemeIsHTTPS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	first := make(chan byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err == nil {
			first <- b[0]
		}
	}()
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: `+ln.Addr().String()+`
    otlpProtocol: http
    randomSampling: true
binds:
- port: 1
  listeners:
  - routes:
    - policies: {directResponse: {status: 200, body: ok}}
`, nil)
	if resp, _ := get(t, tg.url(1)+"/"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	select {
	case b := <-first:
		if b != 22 {
			t.Fatalf("the exporter's first byte is %#x, not a TLS handshake record", b)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the exporter never connected")
	}
}

// TestBackendTargetedPolicyNotSupportedYet: a top-level policy targeting a
// backend with a kind agentgateway applies there and the gateway does not
// yet (transformations,
// test_top_level_backend_targeted_transformations_are_backend_policies) is
// refused as not supported yet, as the same kind under
// backends[].policies is, not as misplaced ("remove it").
func TestBackendTargetedPolicyNotSupportedYet(t *testing.T) {
	const targeted = `
backends:
- name: upstream-1
  host: 127.0.0.1:8000
policies:
- name: {name: p, namespace: ""}
  target: {backend: {backend: {name: upstream-1, namespace: ""}}}
  policy:
    %s
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - backend: upstream-1
`
	for _, tc := range []struct{ policy, want string }{
		{`transformations: {request: {set: {x-test: "'backend'"}}}`, "policies[0].policy.transformations: not supported yet on a backend: target the routes that use it instead"},
		{`extAuthz: {host: 127.0.0.1:9000}`, "policies[0].policy.extAuthz: not supported yet on a backend"},
		{`authorization: {rules: ["true"]}`, "policies[0].policy.authorization: not supported yet on a backend"},
	} {
		f, err := config.Parse([]byte(fmt.Sprintf(targeted, tc.policy)), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", tc.policy, err)
		}
		if err := Validate(f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.policy, err, tc.want)
		}
	}
}
