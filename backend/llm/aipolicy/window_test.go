package aipolicy

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
)

func TestStreamWindow(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		desc    string
		adds    [][]string // per window, the texts added before Next
		windows []string
	}{
		{desc: "first window is the pending text", adds: [][]string{{"hello ", "world"}}, windows: []string{"hello world"}},
		{desc: "a short window is the next one's overlap whole",
			adds: [][]string{{"one "}, {"two "}, {"three"}}, windows: []string{"one ", "one two ", "one two three"}},
		{desc: "the overlap is the last 256 bytes",
			adds: [][]string{{long + "END"}, {"next"}}, windows: []string{long + "END", long[:253] + "END" + "next"}},
		{desc: "the overlap starts on a rune",
			// 255 bytes of 'b' after a 3-byte rune: the 256-byte tail would
			// start on the rune's last byte.
			adds:    [][]string{{"x€" + strings.Repeat("b", 255)}, {"!"}},
			windows: []string{"x€" + strings.Repeat("b", 255), strings.Repeat("b", 255) + "!"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var w StreamWindow
			for i, adds := range tc.adds {
				n := 0
				for _, a := range adds {
					w.Add([]byte(a))
					n += len(a)
				}
				if w.Pending() != n {
					t.Fatalf("window %d: pending %d, added %d", i, w.Pending(), n)
				}
				got := w.Next()
				if string(got) != tc.windows[i] {
					t.Fatalf("window %d:\n%q\nwant\n%q", i, got, tc.windows[i])
				}
				if !utf8.Valid(got) || w.Pending() != 0 {
					t.Fatalf("window %d: valid %v, pending after %d", i, utf8.Valid(got), w.Pending())
				}
			}
			w.Reset()
			w.Add([]byte("z"))
			if got := w.Next(); string(got) != "z" {
				t.Errorf("after Reset: %q", got)
			}
		})
	}
}

// compileWith compiles an ai policy with guardrail options.
func compileWith(t *testing.T, yaml string, opts guardrail.Options) *Policy {
	t.Helper()
	var cfg config.AIPolicy
	if errs := decode.YAML([]byte(yaml), &cfg); errs != nil {
		t.Fatal(errs)
	}
	p, err := NewWithOptions(&cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestResponseWindow: the remote response guards judge a window in
// order: the first rejection ends the stream with its body; failures
// follow agentgateway's streaming path (a webhook's failureMode, the
// others pass); a mask passes.
func TestResponseWindow(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	wh.Configure(func() {
		wh.Judge = func(c guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			text := c.Messages[0].Content
			switch {
			case strings.Contains(text, "forbidden"):
				return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "webhook says no", Status: 451}}
			case strings.Contains(text, "secret"):
				return guardrailtest.WebhookAction{Mask: []guardrailtest.Message{{Role: "assistant", Content: "[MASKED]"}}}
			}
			return guardrailtest.WebhookAction{}
		}
	})
	cs := guardrailtest.NewContentSafety(t)
	cs.Configure(func() { cs.Harm = map[string]guardrailtest.Harm{"stab": {Category: "Violence", Severity: 4}} })
	down := guardrailtest.RefusedAddr(t)
	const csHost, csDown = "cs.cognitiveservices.azure.com", "down.cognitiveservices.azure.com"
	opts := guardrail.Options{HostOverride: map[string]string{csHost: cs.Addr(), csDown: down}, Timeout: 5 * time.Second}
	webhook := func(host, extra string) string { return "{webhook: {target: {host: " + host + "}" + extra + "}}" }
	azure := func(host string) string {
		return "{azureContentSafety: {endpoint: https://" + host + "/, analyzeText: {}, policies: {backendAuth: {key: " + cs.Key + "}}}}"
	}
	policy := func(guards ...string) *Policy {
		return compileWith(t, "promptGuard: {streaming: Enabled, response: ["+strings.Join(guards, ", ")+"]}", opts)
	}

	tests := []struct {
		desc       string
		p          *Policy
		window     string
		rejected   string // the rejection's body ("": passes)
		guard      string
		failedOpen int
		maskPassed string
		calls      int // webhook calls
	}{
		{desc: "pass", p: policy(webhook(wh.Addr(), ""), azure(csHost)), window: "all fine", calls: 1},
		{desc: "webhook rejects", p: policy(webhook(wh.Addr(), ""), azure(csHost)), window: "a forbidden word", rejected: "webhook says no", guard: "webhook", calls: 1},
		{desc: "cloud guard rejects with its rejection", p: policy(webhook(wh.Addr(), ""), azure(csHost)), window: "stab", rejected: config.DefaultResponseRejectionBody, guard: "azureContentSafety", calls: 1},
		{desc: "the first rejection stops", p: policy(azure(csHost), webhook(wh.Addr(), "")), window: "stab forbidden", rejected: config.DefaultResponseRejectionBody, guard: "azureContentSafety"},
		{desc: "a mask passes", p: policy(webhook(wh.Addr(), "")), window: "the secret", maskPassed: "webhook", calls: 1},
		{desc: "webhook failing open", p: policy(webhook(down, ", failureMode: failOpen")), window: "forbidden", failedOpen: 1},
		{desc: "webhook failing closed", p: policy("{webhook: {target: {host: " + down + "}, failureMode: failClosed}, rejection: {body: closed}}"), window: "fine", rejected: "closed", guard: "webhook"},
		{desc: "cloud guard failing passes", p: policy(azure(csDown), webhook(wh.Addr(), "")), window: "stab", failedOpen: 1, calls: 1},
		{desc: "empty window: no call", p: policy(webhook(wh.Addr(), "")), window: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := len(wh.Requests())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			v := tc.p.ResponseWindow([]byte(tc.window), &RemoteInput{Ctx: ctx})
			switch {
			case tc.rejected == "" && v.Rejection != nil:
				t.Errorf("rejected with %q", v.Rejection.Body())
			case tc.rejected != "" && (v.Rejection == nil || string(v.Rejection.Body()) != tc.rejected):
				t.Errorf("verdict %+v, want a rejection %q", v, tc.rejected)
			}
			if v.Guard != tc.guard || len(v.FailedOpen) != tc.failedOpen || v.MaskPassed != tc.maskPassed {
				t.Errorf("guard %q, failed open %v, mask passed %q", v.Guard, v.FailedOpen, v.MaskPassed)
			}
			calls := wh.Requests()[before:]
			if len(calls) != tc.calls {
				t.Fatalf("%d webhook calls, want %d", len(calls), tc.calls)
			}
			for _, c := range calls {
				m := c.JSON()
				choices, _ := m["body"].(map[string]any)["choices"].([]any)
				if len(choices) != 1 {
					t.Fatalf("webhook got %s", c.Body)
				}
				msg := choices[0].(map[string]any)["message"].(map[string]any)
				if msg["role"] != "assistant" || msg["content"] != tc.window {
					t.Errorf("webhook judged %v, want the window %q", msg, tc.window)
				}
			}
		})
	}
}
