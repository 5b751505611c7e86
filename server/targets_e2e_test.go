package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
)

// TestBackendPoliciesEveryKind: the backend policies a kind applies take
// effect for it, and one it cannot apply is a config error, never
// accepted and ignored (an MCP backend's responseHeaderModifier was).
func TestBackendPoliciesEveryKind(t *testing.T) {
	p := newProbe(t, "up")
	mcpSrv := mcptest.StartHTTP(t, "m", mcptest.HTTPOptions{})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /static}}]
      backends:
      - host: '${UP}'
        policies:
          requestHeaderModifier: {set: {x-backend-req: static}}
          responseHeaderModifier: {set: {x-backend-resp: static}}
    - matches: [{path: {pathPrefix: /dynamic}}]
      backends:
      - dynamic: {}
        policies:
          requestHeaderModifier: {set: {x-backend-req: dynamic}}
          responseHeaderModifier: {set: {x-backend-resp: dynamic}}
    - matches: [{path: {pathPrefix: /mcp}}]
      backends:
      - mcp:
          targets: [{name: m, mcp: {host: '${MCP}'}}]
        policies:
          responseHeaderModifier: {set: {x-backend-resp: mcp}}
          http: {requestTimeout: 300ms}
`, map[string]string{"UP": p.addr, "MCP": mcpSrv.URL})

	for _, kind := range []string{"static", "dynamic"} {
		t.Run(kind, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+"/"+kind, nil)
			req.Host = p.addr // the dynamic backend's destination
			resp, body := do(t, req)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "up ") {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			if got := resp.Header.Get("X-Backend-Resp"); got != kind {
				t.Errorf("response header %q, want %q", got, kind)
			}
			if got := p.last(t).header.Get("X-Backend-Req"); got != kind {
				t.Errorf("upstream saw X-Backend-Req %q, want %q", got, kind)
			}
		})
	}

	t.Run("mcp", func(t *testing.T) {
		endpoint := tg.url(3000) + "/mcp"
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend-Resp") != "mcp" {
			t.Fatalf("initialize: %d, X-Backend-Resp %q: %s", resp.StatusCode, resp.Header.Get("X-Backend-Resp"), body)
		}
		// requestTimeout bounds a call: a tool that takes 3 s fails.
		cs, err := mcpConnect(t, endpoint, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 1, "delayMs": 3000}})
		if err == nil && !res.IsError {
			t.Fatalf("a 3 s call passed the backend's 300ms requestTimeout: %+v", res)
		}
	})

	t.Run("refused where not applied", func(t *testing.T) {
		f := parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets: [{name: m, mcp: {host: 'http://127.0.0.1:1/mcp'}}]
        policies:
          requestHeaderModifier: {set: {x-a: b}}
`, nil)
		_, err := compile(tg.gw, f)
		want := "binds[0].listeners[0].routes[0].backends[0].policies.requestHeaderModifier: not applied to this kind of backend"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("compile: %v, want an error containing %q", err, want)
		}
	})
}

// TestNotServedYetRefusedWhenRun: a setting the file format validates but
// the data plane does not serve yet is refused by Apply with its path,
// never run without, and by Validate (--validate-only) alike.
func TestNotServedYetRefusedWhenRun(t *testing.T) {
	f := parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        ai: {routes: {/v1/rerank: rerank}}
      backends:
      - ai:
          name: openai
          provider: {openAI: {model: gpt-4o-mini}}
`, nil)
	verr := Validate(f)
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	defer gw.Shutdown(expiredContext())
	err := gw.Apply(f)
	want := `binds[0].listeners[0].routes[0].policies.ai.routes["/v1/rerank"]: route type "rerank" is not implemented yet`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Apply: %v, want %q", err, want)
	}
	if verr == nil || verr.Error() != err.Error() {
		t.Errorf("Validate: %v, want Apply's error: %v", verr, err)
	}
}
