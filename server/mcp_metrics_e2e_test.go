package server

import (
	"strings"
	"testing"
	"time"
)

// TestMCPToolLabelsAreBounded: the tool label of the MCP metrics holds
// only what the gateway can vouch for. A tool name longer than a label
// may be (LLM labels' 256 bytes) is counted as tool="other": 100 KB names
// made a series each and /metrics grew by megabytes. A call an
// authorization rule refused is counted as tool="unknown", the answer its
// client gets: its name is only what the client sent, and such names would
// fill the route's series cap and fold the real tools into "other". The
// access log still names what the client asked for.
func TestMCPToolLabelsAreBounded(t *testing.T) {
	target, calls := mcpTarget(t, "b", "sum")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - name: open
      matches: [{ path: { exact: /open/mcp } }]
      backends:
      - mcp:
          targets:
          - { name: b, mcp: { host: '${B}' } }
    - name: guarded
      matches: [{ path: { exact: /guarded/mcp } }]
      policies:
        mcpAuthorization:
          rules: ['mcp.tool.name == "sum"']
      backends:
      - mcp:
          targets:
          - { name: b, mcp: { host: '${B}' } }
`, map[string]string{"B": target})
	long := strings.Repeat("x", 100_000)
	call := func(route, tool string) {
		t.Helper()
		endpoint := tg.url(3000) + "/" + route + "/mcp"
		session, status := rawInitialize(t, endpoint, "")
		if status != 200 {
			t.Fatalf("initialize on %s: %d", route, status)
		}
		if status, body := rawCall(t, endpoint, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`"}}`); status != 200 {
			t.Fatalf("tools/call %.20s on %s: %d %.200s", tool, route, status, body)
		}
	}
	call("open", "sum")
	call("open", long)
	call("guarded", "sum")
	call("guarded", "not-allowed-1")
	call("guarded", "not-allowed-2")
	if calls.Load() != 2 {
		t.Fatalf("the target ran %d calls, want 2 (sum on each route)", calls.Load())
	}
	fams := scrapeGateway(t, tg.gw)
	for _, fam := range []string{"agentgateway_mcp_requests_total", "agentgateway_mcp_request_errors_total", "agentgateway_mcp_request_duration_seconds_total"} {
		for _, m := range fams[fam].GetMetric() {
			for _, lp := range m.GetLabel() {
				if len(lp.GetValue()) > 256 {
					t.Errorf("%s: label %s of %d bytes", fam, lp.GetName(), len(lp.GetValue()))
				}
				if strings.HasPrefix(lp.GetValue(), "not-allowed") {
					t.Errorf("%s: label %s=%q of a refused call", fam, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
	for _, want := range []struct {
		route, tool string
		n           float64
	}{{"open", "sum", 1}, {"open", "other", 1}, {"guarded", "sum", 1}, {"guarded", "unknown", 2}} {
		labels := map[string]string{"route": want.route, "method": "tools/call", "target": "b", "tool": want.tool}
		if n := scrapeValue(t, tg.gw, "agentgateway_mcp_requests_total", labels); n != want.n {
			t.Errorf("calls %v = %v, want %v", labels, n, want.n)
		}
	}
	if n := scrapeValue(t, tg.gw, "agentgateway_mcp_request_errors_total", map[string]string{"route": "guarded", "method": "tools/call", "tool": "unknown"}); n != 2 {
		t.Errorf("refused calls counted as %v errors, want 2", n)
	}
	eventually(t, 5*time.Second, "the refused call's access line", func() bool {
		for _, e := range tg.accessLogs().FilterMessage("request").All() {
			if f := e.ContextMap(); f["mcp.tool"] == "not-allowed-1" && f["mcp.denied"] == true {
				return true
			}
		}
		return false
	})
}

// TestMCPErrorsCountedWhenClientTakesSSE: a call from a client that
// accepts SSE (as every SDK client does) counts as an error when its
// answer is one, and is timed to its answer: such calls were counted as
// successes, at the moment the call began, whether the answer came back
// as plain JSON or on a stream.
func TestMCPErrorsCountedWhenClientTakesSSE(t *testing.T) {
	target, _ := mcpTarget(t, "b", "sum")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - name: guarded
      policies:
        mcpAuthorization:
          rules: ['mcp.tool.name == "sum"']
      backends:
      - mcp:
          targets:
          - { name: b, mcp: { host: '${B}' } }
`, map[string]string{"B": target})
	endpoint := tg.url(3000) + "/mcp"
	session, status := rawInitialize(t, endpoint, "")
	if status != 200 {
		t.Fatalf("initialize: %d", status)
	}
	for _, tool := range []string{"sum", "refused-1", "sum", "refused-2"} {
		if status, body := rawCall(t, endpoint, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`"}}`,
			"Accept", "application/json, text/event-stream"); status != 200 {
			t.Fatalf("tools/call %s: %d %.200s", tool, status, body)
		}
	}
	for _, want := range []struct {
		tool         string
		calls, fails float64
	}{{"sum", 2, 0}, {"unknown", 2, 2}} {
		labels := map[string]string{"route": "guarded", "method": "tools/call", "tool": want.tool}
		calls := scrapeValue(t, tg.gw, "agentgateway_mcp_requests_total", labels)
		fails := scrapeValue(t, tg.gw, "agentgateway_mcp_request_errors_total", labels)
		if calls != want.calls || fails != want.fails {
			t.Errorf("tool %s: %v calls, %v errors, want %v and %v", want.tool, calls, fails, want.calls, want.fails)
		}
	}
}
