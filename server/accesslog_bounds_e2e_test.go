package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/relaygate/gateway/codec/logline"
)

// TestAccessLogBoundsClientValues: a model name or an MCP tool name is the
// client's to choose, up to maxBufferSize; the access line keeps at most
// logline.MaxClientValue bytes of it. A 100 KB model name used to appear
// twice, whole, in each line (request and response model).
func TestAccessLogBoundsClientValues(t *testing.T) {
	huge := strings.Repeat("m", 100_000)
	mcp, _ := mcpTarget(t, "t", "echo")
	tg := startGateway(t, `
binds:
- port: 8080
  listeners:
  - routes:
    - backends:
      - ai: {name: p, hostOverride: '${DEAD}', provider: {openAI: {}}, policies: {backendAuth: {key: k}}}
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: '${MCP}' } }
`, map[string]string{"DEAD": closedAddr(t), "MCP": mcp})
	resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+huge+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	session := initRaw(t, tg.url(3000)+"/mcp")
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+huge+`","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	checked := 0
	for _, e := range tg.accessLogs().FilterMessage("request").All() {
		for k, v := range e.ContextMap() {
			s, ok := v.(string)
			if !ok || !strings.HasPrefix(s, "mmm") {
				continue
			}
			checked++
			if len(s) > logline.MaxClientValue+3 || !strings.HasSuffix(s, "...") {
				t.Errorf("%s: %d bytes, want at most %d and the cut marked", k, len(s), logline.MaxClientValue+3)
			}
		}
	}
	if checked != 3 { // llm.request_model, llm.model, mcp.tool
		t.Errorf("%d fields carried the long name, want 3", checked)
	}
}
