package guard

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStreamMasker(t *testing.T) {
	cases := []struct {
		desc   string
		spec   Spec
		chunks []string
		want   string
	}{
		{"ssn split across deltas", Spec{Builtins: allBuiltins},
			[]string{"My SSN is 123-4", "5-6789, thanks"}, "My SSN is <SSN>, thanks"},
		{"email split three ways", Spec{Builtins: allBuiltins},
			[]string{"write to jo", "hn@exa", "mple.com today"}, "write to <EMAIL_ADDRESS> today"},
		{"card one byte at a time", Spec{Builtins: allBuiltins},
			strings.Split("card 4111 1111 1111 1111 ok", ""), "card <CREDIT_CARD> ok"},
		{"phone split at the parenthesis", Spec{Builtins: []string{"phoneNumber"}},
			[]string{"call (", "555) 123-", "4567"}, "call <PHONE_NUMBER>"},
		{"a candidate that fails its check", Spec{Builtins: allBuiltins},
			[]string{"4111 1111 ", "1111 1112 then 4111 1111 1111 ", "1111"}, "4111 1111 1111 1112 then <CREDIT_CARD>"},
		{"user pattern split", Spec{Patterns: []string{`secret-[a-f]+`}},
			[]string{"the code is secr", "et-abc", "def!"}, "the code is <masked>!"},
		{"bounded user pattern split", Spec{Patterns: []string{`\bID-\d{4}\b`}},
			[]string{"see ID-12", "34 and ID-5678x"}, "see <masked> and ID-5678x"},
		{"user pattern with a lookbehind-like boundary at a cut", Spec{Patterns: []string{`\bkey\b`}},
			[]string{strings.Repeat("a", 300) + "monkey", " key"}, strings.Repeat("a", 300) + "monkey <masked>"},
		{"rune split across deltas", Spec{Builtins: allBuiltins},
			[]string{"caf\xc3", "\xa9 123-45-6789"}, "café <SSN>"},
		{"nothing to mask", Spec{Builtins: allBuiltins},
			[]string{"Hello, ", "world! ", "In 2023 we sold 12 units."}, "Hello, world! In 2023 we sold 12 units."},
		{"empty deltas", Spec{Builtins: allBuiltins},
			[]string{"", "a@b.co", "", ""}, "<EMAIL_ADDRESS>"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			g := mustNew(t, tc.spec)
			m := AcquireStreamMasker(g)
			defer ReleaseStreamMasker(m)
			var out []byte
			for _, c := range tc.chunks {
				n := len(out)
				out = m.Write(out, []byte(c))
				if !utf8.Valid(out[n:]) {
					t.Errorf("write of %q released %q: not whole runes", c, out[n:])
				}
			}
			out = m.Flush(out)
			if string(out) != tc.want {
				t.Errorf("got  %q\nwant %q", out, tc.want)
			}
			if whole := maskString(g, strings.Join(tc.chunks, "")); whole != tc.want {
				t.Errorf("Mask of the whole: %q", whole)
			}
		})
	}
}

// TestStreamHoldBack pins what a first write releases: the builtins keep back
// the run the text ends in, user patterns their longest match plus a rune.
func TestStreamHoldBack(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 40) // 480 bytes
	cases := []struct {
		desc string
		spec Spec
		in   string
		want string
	}{
		{"all builtins hold the last word", Spec{Builtins: allBuiltins},
			"Hello world, how are", "Hello world, how "},
		{"all builtins hold a trailing space (a number may follow)", Spec{Builtins: allBuiltins},
			"Hello world, ", "Hello world,"},
		{"all builtins release after punctuation", Spec{Builtins: allBuiltins},
			"Hello world!", "Hello world!"},
		{"numeric builtins hold a number", Spec{Builtins: []string{"ssn", "phoneNumber"}},
			"call 555", "call"},
		{"numeric builtins release words", Spec{Builtins: []string{"ssn"}},
			"Hello world", "Hello world"},
		{"email holds the last word", Spec{Builtins: []string{"email"}},
			"Hello world, how are", "Hello world, how "},
		{"bounded pattern holds its longest match plus a rune", Spec{Patterns: []string{`secret-[a-f]{6}`}},
			long, long[:len(long)-17]},
		{"unbounded pattern holds StreamWindow plus a rune", Spec{Patterns: []string{`secret-[a-f]+`}},
			long, long[:len(long)-StreamWindow-4]},
		{"a found match is not cut", Spec{Patterns: []string{`foo bar`}},
			long + "foo barxxxxxx", long}, // the hold-back (7+4) ends inside the match
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			m := mustNew(t, tc.spec).NewStreamMasker()
			got := m.Write(nil, []byte(tc.in))
			if string(got) != tc.want {
				t.Errorf("released %q\n     want %q", got, tc.want)
			}
			if rest := m.Flush(nil); string(got)+string(rest) != maskString(m.g, tc.in) {
				t.Errorf("flush gave %q", rest)
			}
		})
	}
}

func TestStreamForcedCut(t *testing.T) {
	g := mustNew(t, Spec{Builtins: allBuiltins})
	m := g.NewStreamMasker()
	// One address run of 5000 bytes: no clean place to cut.
	run := strings.Repeat("x", 5000)
	out := m.Write(nil, []byte(run))
	if m.forced == 0 || len(out) != 5000-StreamWindow {
		t.Fatalf("forced %d, released %d bytes", m.forced, len(out))
	}
	out = m.Flush(out)
	if string(out) != run {
		t.Fatal("a forced cut changed the text")
	}
	// An "address" whose local part passes 4 KiB before its '@' arrives is
	// masked only from the cut on.
	m.Reset()
	addr := strings.Repeat("a", 5000) + "@example.com"
	out = m.Write(nil, []byte(addr[:4500]))
	out = m.Write(out, []byte(addr[4500:]+" ok"))
	out = m.Flush(out)
	if want := strings.Repeat("a", 4500-StreamWindow) + "<EMAIL_ADDRESS> ok"; string(out) != want {
		t.Fatalf("got %q", out)
	}
}

func TestStreamAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	g := mustNew(t, Spec{Builtins: allBuiltins})
	m := g.NewStreamMasker()
	delta := cleanPrompt[:50]
	var out []byte
	for range 10 { // grow the buffers
		out = m.Write(out[:0], delta)
	}
	if n := testing.AllocsPerRun(100, func() { out = m.Write(out[:0], delta) }); n != 0 {
		t.Errorf("Write of a clean delta: %v allocations, want 0", n)
	}
}
