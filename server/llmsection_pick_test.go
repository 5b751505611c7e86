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

// TestLLMSectionPickWeightedAuthorization: a weighted virtual model draws only
// among the targets whose authorization allows the caller, by their
// weights, so that one caller is not served or refused at random; 403
// only when none allows it.
func TestLLMSectionPickWeightedAuthorization(t *testing.T) {
	m := sectionModels(t, `llm:
  models:
  - {name: team-only, visibility: internal, provider: openAI, params: {apiKey: k, hostOverride: "127.0.0.1:1"}, authorization: {rules: ['request.headers["x-team"] == "a"']}}
  - {name: small, visibility: internal, provider: openAI, params: {apiKey: k, hostOverride: "127.0.0.1:1"}}
  - {name: large, visibility: internal, provider: openAI, params: {apiKey: k, hostOverride: "127.0.0.1:1"}}
  virtualModels:
  - {name: w, routing: {weighted: {targets: [{model: team-only, weight: 3}, {model: small, weight: 1}, {model: large, weight: 2}]}}}
  - {name: closed, routing: {weighted: {targets: [{model: team-only}]}}}
`)
	const n = 3000
	for _, tc := range []struct {
		desc    string
		headers []string
		model   string
		want    map[string]float64 // share of each model picked
	}{
		{"caller refused by one target", nil, "w", map[string]float64{"small": 1.0 / 3, "large": 2.0 / 3}},
		{"caller allowed by all", []string{"X-Team", "a"}, "w", map[string]float64{"team-only": 0.5, "small": 1.0 / 6, "large": 2.0 / 6}},
		{"caller refused by all", nil, "closed", nil},
		{"caller allowed by all of closed", []string{"X-Team", "a"}, "closed", map[string]float64{"team-only": 1}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pc := pickContext(tc.headers)
			got := map[string]int{}
			for range n {
				sel := m.pick(tc.model, pc, nil)
				switch {
				case tc.want == nil && sel.failure != pickedDenied:
					t.Fatalf("picked %+v, want 403 (pickedDenied)", sel)
				case tc.want == nil:
					continue
				case sel.failure != pickedOK:
					t.Fatalf("failure %v for a caller some target allows", sel.failure)
				}
				got[sel.model.pattern]++
			}
			for name, share := range tc.want {
				// (3000 draws: 0.05 is over five standard deviations)
				if f := float64(got[name]) / n; f < share-0.05 || f > share+0.05 {
					t.Errorf("%s picked %.3f of the time, want %.3f (%v)", name, f, share, got)
				}
			}
			if len(got) > len(tc.want) {
				t.Errorf("picked %v, want only %v", got, tc.want)
			}
		})
	}
}
