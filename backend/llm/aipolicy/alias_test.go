package aipolicy

import "testing"

// TestAlias: exact keys first, then the most specific wildcard, ties by
// key order.
func TestAlias(t *testing.T) {
	p := mustPolicy(t, `modelAliases:
  gpt-4o: exact-target
  "gpt-*": gpt-star
  "gpt-4*": gpt-4-star
  "*-mini": any-mini
  "gpt-4*-mini": gpt-4-mini
  "*": everything
  "claude-*-sonnet-*": sonnet
  "a*": a-star
  "*b": star-b
`)
	tests := []struct {
		model, want string
		ok          bool
	}{
		{"gpt-4o", "exact-target", true},    // exact beats every wildcard
		{"gpt-4o-mini", "gpt-4-mini", true}, // 9 literal characters
		{"gpt-4.1", "gpt-4-star", true},     // 5 beats gpt-* (4)
		{"gpt-3.5", "gpt-star", true},       //
		{"o3-mini", "any-mini", true},       //
		{"gpt-4-mini", "gpt-4-mini", true},  // the star matches nothing
		{"claude-3-5-sonnet-2024", "sonnet", true},
		{"claude-sonnet", "everything", true}, // pieces must not overlap
		{"ab", "star-b", true},                // a* and *b tie: "*b" sorts first
		{"", "everything", true},
		{"GPT-4O", "everything", true}, // case matters
	}
	for _, tc := range tests {
		got, ok := p.Alias(tc.model)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Alias(%q) = %q, %v; want %q, %v", tc.model, got, ok, tc.want, tc.ok)
		}
	}
	none := mustPolicy(t, "modelAliases: {a: b, 'x*y': z}")
	for _, m := range []string{"", "ab", "x", "yx", "xz"} {
		if got, ok := none.Alias(m); ok {
			t.Errorf("Alias(%q) = %q, want no match", m, got)
		}
	}
	if got, ok := none.Alias("xy"); !ok || got != "z" {
		t.Errorf("Alias(xy) = %q, %v", got, ok)
	}
}

func TestAliasAllocations(t *testing.T) {
	p := mustPolicy(t, "modelAliases: {gpt-4o: a, 'claude-*': b}")
	if n := testing.AllocsPerRun(100, func() {
		p.Alias("gpt-4o")
		p.Alias("claude-3")
		p.Alias("none")
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
