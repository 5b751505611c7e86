package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMClientQueryOnProviderPaths: the client's query goes to the
// provider with its path (agentgateway's rule), but not what the gateway
// sets itself: Gemini's own alt, Azure's configured api-version, and a
// Google API key in the query when the gateway puts its own key on. A
// client's ?key= used to reach Gemini beside the gateway's
// x-goog-api-key, and a client's api-version went to Azure after the
// configured one.
func TestLLMClientQueryOnProviderPaths(t *testing.T) {
	g := llmtest.NewGemini(t)
	gemini := startGateway(t, llmConfig(`gemini: {}`, g.Addr(), `backendAuth: {key: `+g.APIKey+`}`, ""), nil)
	a := llmtest.NewAzure(t)
	azure := startGateway(t, llmConfig(`azure: {resourceName: emulated, resourceType: openAI, apiVersion: "2024-10-21"}`, a.Addr(), `backendAuth: {key: `+a.APIKey+`}`, ""), nil)

	for _, tc := range []struct {
		desc   string
		tg     *testGateway
		emu    interface{ Last() llmtest.Request }
		target string
		stream bool
		want   url.Values
	}{
		{"gemini stream", gemini, g, "/v1/chat/completions?key=CLIENTKEY&trace=1&alt=json", true, url.Values{"alt": {"sse"}, "trace": {"1"}}},
		{"gemini", gemini, g, "/v1/chat/completions?key=CLIENTKEY", false, url.Values{}},
		{"azure dated", azure, a, "/v1/chat/completions?api-version=2023-05-15&trace=1", false, url.Values{"api-version": {"2024-10-21"}, "trace": {"1"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			body := `{"model":"gpt-4o","stream":` + map[bool]string{false: "false", true: "true"}[tc.stream] + `,"messages":[{"role":"user","content":"hi"}]}`
			req, _ := http.NewRequest("POST", tc.tg.url(8080)+tc.target, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, got := do(t, req)
			if resp.StatusCode != 200 {
				t.Fatalf("%d\n%s", resp.StatusCode, got)
			}
			r := tc.emu.Last()
			if r.AuthError != "" || r.Query.Encode() != tc.want.Encode() {
				t.Errorf("the provider got %s?%s (auth %q), want the query %s", r.Path, r.Query.Encode(), r.AuthError, tc.want.Encode())
			}
		})
	}
}
