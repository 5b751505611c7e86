package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/policy"
)

// sectionModels compiles an llm section (on port 4000) and returns its
// target.
func sectionModels(tb testing.TB, yaml string) *llmModels {
	tb.Helper()
	gw := New(Options{})
	s, err := compile(gw, parseConfigTB(tb, yaml))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.lease.Release)
	v, ok := s.binds[4000].listeners[0].table.Match(nil, nil, []byte("/"))
	if !ok {
		tb.Fatal("no llm route")
	}
	return v.(*route).backends[0].target.(*llmModels)
}

// pickConfig is a section of 40 models: 30 plain names, two entries of one
// name told apart by header matches, wildcards, an authorized model and a
// weighted virtual model; extra are more models (YAML list items).
func pickConfig(extra string) string {
	var b strings.Builder
	b.WriteString("llm:\n  models:\n")
	model := func(name, more string) {
		fmt.Fprintf(&b, "  - {name: %q, provider: openAI, params: {apiKey: k, hostOverride: \"127.0.0.1:1\"}%s}\n", name, more)
	}
	for i := range 30 {
		model(fmt.Sprintf("model-%02d", i), "")
	}
	model("smart", ", matches: [{headers: [{name: x-tier, value: {exact: premium}}]}]")
	model("smart", ", matches: [{headers: [{name: x-tier, value: {regex: 'free|basic'}}]}, {headers: [{name: x-trial, value: {exact: 'yes'}}]}]")
	for i := range 6 {
		model(fmt.Sprintf("vendor-%d/*", i), "")
	}
	model("guarded", `, authorization: {rules: ['request.headers["x-team"] == "research"']}`)
	model("*", "")
	b.WriteString(extra)
	b.WriteString("  virtualModels:\n  - {name: auto, routing: {weighted: {targets: [{model: model-29}, {model: smart}]}}}\n")
	return b.String()
}

var pickCases = []struct {
	desc, model string
	headers     []string
	want        string // the pattern of the model picked
	allocs      bool   // authorization builds the rules' input
}{
	{"exact name", "model-17", nil, "model-17", false},
	{"second entry by header regex", "smart", []string{"X-Tier", "basic"}, "smart", false},
	{"second match of the second entry", "smart", []string{"X-Trial", "yes"}, "smart", false},
	{"wildcard", "vendor-5/large", nil, "vendor-5/*", false},
	{"catch-all", "unknown-model", nil, "*", false},
	{"authorization", "guarded", []string{"X-Team", "research"}, "guarded", true},
}

func pickContext(headers []string) *policy.Ctx {
	fctx := &fasthttp.RequestCtx{}
	fctx.Request.Header.SetMethod("POST")
	for i := 0; i+1 < len(headers); i += 2 {
		fctx.Request.Header.Set(headers[i], headers[i+1])
	}
	return &policy.Ctx{Fast: fctx}
}

// TestLLMSectionPickAllocs holds model picking to no allocation, header
// matches included; only a model with authorization builds its rules'
// input.
func TestLLMSectionPickAllocs(t *testing.T) {
	m := sectionModels(t, pickConfig(""))
	for _, tc := range pickCases {
		pc := pickContext(tc.headers)
		sel := m.pick(tc.model, pc, nil)
		if sel.failure != pickedOK || sel.model.pattern != tc.want {
			t.Fatalf("%s: picked %+v, want %s", tc.desc, sel, tc.want)
		}
		n := testing.AllocsPerRun(200, func() { _ = m.pick(tc.model, pc, nil) })
		if (n > 0) != tc.allocs {
			t.Errorf("%s: %.0f allocations per pick", tc.desc, n)
		}
	}
}

func BenchmarkLLMSectionPick(b *testing.B) {
	m := sectionModels(b, pickConfig(""))
	for _, tc := range pickCases {
		b.Run(strings.ReplaceAll(tc.desc, " ", "_"), func(b *testing.B) {
			pc := pickContext(tc.headers)
			b.ReportAllocs()
			for b.Loop() {
				if sel := m.pick(tc.model, pc, nil); sel.failure != pickedOK {
					b.Fatal(sel.failure)
				}
			}
		})
	}
}
