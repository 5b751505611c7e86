package server

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMResponseModelIsTheOneThatAnswered: the response model
// (gen_ai_response_model, llm.model) is the model the provider says
// answered, whole and streamed, in every provider's format (OpenAI's and
// Anthropic's model, Gemini's modelVersion): OpenAI answers
// gpt-4o-2024-08-06 for gpt-4o, an Azure deployment its model, Anthropic
// an alias's full name, Vertex another Gemini version. Bedrock's answers
// name none: the model asked of it stays. It used to be the model the
// gateway asked for, always.
func TestLLMResponseModelIsTheOneThatAnswered(t *testing.T) {
	for _, pr := range translateProviders {
		paths := []struct{ path, body string }{
			{"/v1/chat/completions", `{"model":"` + pr.model + `","stream":STREAM,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		}
		switch pr.name {
		case "openai":
			// Passed through, and a Responses provider.
			paths = append(paths, struct{ path, body string }{"/v1/responses", `{"model":"` + pr.model + `","stream":STREAM,"input":"hi"}`})
		case "anthropic":
			paths = append(paths, struct{ path, body string }{"/v1/messages", `{"model":"` + pr.model + `","stream":STREAM,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`})
		}
		for _, p := range paths {
			for _, stream := range []bool{false, true} {
				name := pr.name + p.path + map[bool]string{false: "/whole", true: "/stream"}[stream]
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					emu, provider, auth := pr.start(t)
					answered := "answered-" + pr.name + "-2025-01-01"
					want := answered
					if pr.name == "bedrock" {
						want = pr.model
					}
					emu.Enqueue(llmtest.Reply{Text: "ok", Model: answered})
					tg := startGateway(t, llmConfig(provider, emu.Addr(), auth, ""), nil)
					body := strings.Replace(p.body, "STREAM", map[bool]string{false: "false", true: "true"}[stream], 1)
					req, _ := http.NewRequest("POST", tg.url(8080)+p.path, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					resp, got := do(t, req)
					if resp.StatusCode != 200 || !strings.Contains(got, "ok") {
						t.Fatalf("%d\n%s", resp.StatusCode, got)
					}
					eventually(t, 5*time.Second, "the access line", func() bool {
						return tg.accessLogs().FilterMessage("request").Len() == 1
					})
					f := tg.accessLogs().FilterMessage("request").All()[0].ContextMap()
					if f["llm.model"] != want || f["llm.request_model"] != pr.model {
						t.Errorf("llm.model %v, llm.request_model %v; want %s, %s", f["llm.model"], f["llm.request_model"], want, pr.model)
					}
					fams := scrapeGateway(t, tg.gw)
					s := seriesOf(fams, "agentgateway_gen_ai_server_request_duration_seconds", map[string]string{"gen_ai_request_model": pr.model, "gen_ai_response_model": want})
					if s == nil || s.GetHistogram().GetSampleCount() != 1 {
						var m bytes.Buffer
						tg.gw.Metrics().WritePrometheus(&m)
						t.Errorf("no request duration for response model %s:\n%s", want, grepLines(m.String(), "request_duration_seconds_count"))
					}
				})
			}
		}
	}
}

// TestLLMCostOfTheModelThatAnswered: an answer is priced as the model
// that answered when the catalog lists it, else as the model asked for
// (agentgateway's rule): OpenAI answers gpt-4o with gpt-4o-2024-08-06,
// which a catalog that prices gpt-4o alone still prices.
func TestLLMCostOfTheModelThatAnswered(t *testing.T) {
	for _, tc := range []struct {
		desc, catalog string
		want          float64
	}{
		// 1000 x 2.5/1M + 500 x 10/1M
		{"the alias only", `gpt-4o: {rates: {input: "2.5", output: "10"}}`, 0.0075},
		// 1000 x 1/1M + 500 x 2/1M
		{"the dated version too", `gpt-4o: {rates: {input: "2.5", output: "10"}}` + "\n            gpt-4o-2024-08-06: {rates: {input: \"1\", output: \"2\"}}", 0.002},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := llmtest.NewOpenAI(t)
			o.SetDefault(llmtest.Reply{Text: "ok", Model: "gpt-4o-2024-08-06", Usage: llmtest.Usage{InputTokens: 1000, OutputTokens: 500}})
			cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "") + `
config:
  modelCatalog:
  - inline:
      providers:
        openai:
          models:
            ` + tc.catalog + `
`
			tg := startGateway(t, cfg, nil)
			for _, stream := range []string{"false", "true"} {
				req, _ := http.NewRequest("POST", tg.url(8080)+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`))
				req.Header.Set("Content-Type", "application/json")
				if resp, got := do(t, req); resp.StatusCode != 200 {
					t.Fatalf("%d\n%s", resp.StatusCode, got)
				}
			}
			eventually(t, 5*time.Second, "the access lines", func() bool {
				return tg.accessLogs().FilterMessage("request").Len() == 2
			})
			for _, e := range tg.accessLogs().FilterMessage("request").All() {
				f := e.ContextMap()
				if v, _ := f["llm.cost"].(float64); v < tc.want-1e-12 || v > tc.want+1e-12 || f["llm.model"] != "gpt-4o-2024-08-06" {
					t.Errorf("llm.cost %v, llm.model %v; want %v, gpt-4o-2024-08-06", f["llm.cost"], f["llm.model"], tc.want)
				}
			}
		})
	}
}

// grepLines are the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
