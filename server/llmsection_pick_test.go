package server

import (
	"testing"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// referenceResolve is resolve without the index of plain names: the first
// model of the sorted list that fits and allows.
func referenceResolve(m *llmModels, name string, internal bool, pc *policy.Ctx) (*llmModelEntry, llmPickFailure) {
	var in lazyInput
	fitted := false
	for _, e := range m.models {
		if !internal && !e.public || !config.MatchModelName(e.pattern, name) || !e.headersMatch(pc) {
			continue
		}
		fitted = true
		if e.authz == nil || e.authz.Allowed(in.get(pc)) {
			return e, pickedOK
		}
	}
	if fitted {
		return nil, pickedDenied
	}
	return nil, pickedNotFound
}

// FuzzLLMSectionResolve holds the indexed lookup to the plain scan of the
// models, most specific first.
func FuzzLLMSectionResolve(f *testing.F) {
	m := sectionModels(f, pickConfig(`  - {name: smart, visibility: internal, provider: openAI, params: {apiKey: k, hostOverride: "127.0.0.1:1"}}
  - {name: "smart*", provider: openAI, params: {apiKey: k, hostOverride: "127.0.0.1:1"}, authorization: {rules: ['request.headers["x-team"] == "a"']}}
  - {name: "*-05", provider: openAI, params: {apiKey: k, hostOverride: "127.0.0.1:1"}}
`))
	for _, s := range []struct{ name, tier, team string }{
		{"smart", "premium", ""}, {"smart", "", ""}, {"smartest", "", "a"}, {"model-05", "", ""},
		{"vendor-2/x", "basic", ""}, {"guarded", "", "b"}, {"", "", ""}, {"auto", "free", ""},
	} {
		f.Add(s.name, s.tier, s.team, false)
	}
	f.Fuzz(func(t *testing.T, name, tier, team string, internal bool) {
		pc := pickContext([]string{"X-Tier", tier, "X-Team", team})
		var in lazyInput
		got := m.resolve(name, internal, pc, &in)
		want, failure := referenceResolve(m, name, internal, pc)
		if got.failure != failure || got.model != want {
			t.Fatalf("resolve(%q, tier %q, team %q, internal %v) = %v %p, want %v %p", name, tier, team, internal, got.failure, got.model, failure, want)
		}
	})
}
