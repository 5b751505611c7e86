package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/config"
)

// TestLLMProviderPresetsCompile: a model naming a provider preset and no
// address reaches the preset's base URL (agentgateway's
// ProviderPreset::base_url): its host and port, TLS for https, its path
// under the base path or the format's own path, and the preset's name for
// costs and telemetry.
func TestLLMProviderPresetsCompile(t *testing.T) {
	tests := []struct {
		preset, addr string
		tls          bool
		chat, msgs   string // "" where the preset lists no such format
	}{
		{"cohere", "api.cohere.ai:443", true, "/compatibility/v1/chat/completions", ""},
		{"ollama", "localhost:11434", false, "/v1/chat/completions", ""},
		{"baseten", "inference.baseten.co:443", true, "/v1/chat/completions", "/v1/messages"},
		{"cerebras", "api.cerebras.ai:443", true, "/v1/chat/completions", ""},
		{"deepinfra", "api.deepinfra.com:443", true, "/v1/openai/chat/completions", "/anthropic/v1/messages"},
		{"deepseek", "api.deepseek.com:443", true, "/v1/chat/completions", "/anthropic/v1/messages"},
		{"groq", "api.groq.com:443", true, "/openai/v1/chat/completions", ""},
		{"huggingface", "router.huggingface.co:443", true, "/v1/chat/completions", ""},
		{"mistral", "api.mistral.ai:443", true, "/v1/chat/completions", ""},
		{"openrouter", "openrouter.ai:443", true, "/api/v1/chat/completions", "/api/v1/messages"},
		{"togetherai", "api.together.xyz:443", true, "/v1/chat/completions", ""},
		{"xai", "api.x.ai:443", true, "/v1/chat/completions", ""},
		{"fireworks", "api.fireworks.ai:443", true, "/inference/v1/chat/completions", "/inference/v1/messages"},
	}
	if len(tests) != len(config.LLMProviderPresets) {
		t.Fatalf("%d cases for %d presets", len(tests), len(config.LLMProviderPresets))
	}
	var yaml strings.Builder
	yaml.WriteString("llm:\n  models:\n")
	for _, tc := range tests {
		fmt.Fprintf(&yaml, "  - {name: %s-model, provider: %s, params: {apiKey: k}}\n", tc.preset, tc.preset)
	}
	f := parseConfigTB(t, yaml.String())
	if err := Validate(f); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	s, err := compile(New(Options{}), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.lease.Release)
	targets := map[string]*llmProvider{}
	for _, lt := range s.llm {
		targets[lt.name] = onlyProvider(lt)
	}
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			p := targets["llm/"+tc.preset+"-model"]
			if p == nil {
				t.Fatal("not compiled")
			}
			if p.up.Addr != tc.addr || p.up.TLS != tc.tls {
				t.Errorf("upstream %s (TLS %v), want %s (TLS %v)", p.up.Addr, p.up.TLS, tc.addr, tc.tls)
			}
			if p.p.System() != tc.preset {
				t.Errorf("provider name %q, want %q", p.p.System(), tc.preset)
			}
			if got := string(p.p.AppendPath(nil, provider.Completions, "m", false, []byte("/v1/chat/completions"))); got != tc.chat {
				t.Errorf("completions path %s, want %s", got, tc.chat)
			}
			if tc.msgs != "" {
				if f, ok := p.p.Format(provider.Messages, "m"); !ok || f.String() != "messages" {
					t.Errorf("messages go out as %v (%v), want the preset's messages format", f, ok)
				}
				if got := string(p.p.AppendPath(nil, provider.Messages, "m", false, []byte("/v1/messages"))); got != tc.msgs {
					t.Errorf("messages path %s, want %s", got, tc.msgs)
				}
			}
		})
	}
}

// TestLLMProviderPresetsServe: presets with an address of the test's own
// (baseUrl keeps its path as the base path; hostOverride alone keeps the
// preset's paths) answer an unchanged OpenAI SDK, and a preset's own
// messages path takes Anthropic Messages requests.
func TestLLMProviderPresetsServe(t *testing.T) {
	var (
		mu    sync.Mutex
		paths []string
	)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			io.WriteString(w, `{"id":"m1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
			return
		}
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	tg := startGateway(t, `
llm:
  port: 4000
  models:
  - name: fast
    provider: groq
    params: {apiKey: groq-key, baseUrl: "http://`+up+`/openai/v1"}
  - name: reasoner
    provider: deepseek
    params: {apiKey: deepseek-key, hostOverride: "`+up+`"}
`, nil)
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(paths) == 0 {
			return ""
		}
		return paths[len(paths)-1]
	}
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))
	for _, tc := range []struct{ model, want string }{
		{"fast", "/openai/v1/chat/completions Bearer groq-key"},
		{"reasoner", "/v1/chat/completions Bearer deepseek-key"},
	} {
		resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest(tc.model))
		if err != nil || resp.Choices[0].Message.Content != "hi" {
			t.Fatalf("%s: %v", tc.model, err)
		}
		if got := last(); got != tc.want {
			t.Errorf("%s reached the provider as %q, want %q", tc.model, got, tc.want)
		}
	}
	resp, err := http.Post(tg.url(4000)+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"reasoner","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":"hi"`) {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	if got, want := last(), "/anthropic/v1/messages Bearer deepseek-key"; got != want {
		t.Errorf("messages reached the provider as %q, want %q", got, want)
	}
}
