package guard

import (
	"bytes"
	"slices"
	"testing"
	"unicode/utf8"
)

// referenceSpans is the definition the one-pass scan must meet: every rule's
// search (find) run over the whole text, merged. For a rule without a check
// that search is FindAllIndex without the empty matches, which the fuzz
// target checks too.
func referenceSpans(g *Guard, text []byte) []span {
	var spans []span
	for i := range g.rules {
		spans = g.rules[i].find(text, 0, len(text), true, spans, i, false)
	}
	return merge(spans)
}

// findAllNonEmpty is regexp's FindAllIndex without empty matches.
func findAllNonEmpty(r *rule, text []byte, idx int) []span {
	var spans []span
	for _, loc := range r.re.FindAllIndex(text, -1) {
		if loc[1] > loc[0] {
			spans = append(spans, span{start: loc[0], end: loc[1], rule: idx})
		}
	}
	return spans
}

func referenceMask(g *Guard, text []byte) []byte {
	spans := referenceSpans(g, text)
	if len(spans) == 0 {
		return nil
	}
	return g.appendMasked(nil, text, 0, len(text), spans)
}

// Guards for the fuzz targets. Masking is idempotent for the builtins on
// their own, whose matches begin and end where a label changes no word
// boundary, and for user patterns without assertions that cannot match a
// label. Mixed, a label can make a boundary that was not there
// ("0000KEY=0": once KEY=0 is masked, the digits before it end a word), so
// fuzzMixed is held to the reference and the stream only.
var (
	fuzzBuiltins = mustSpec(Spec{Builtins: allBuiltins})
	fuzzPatterns = mustSpec(Spec{Patterns: []string{`secret-[0-9a-f]{6,}`, `(?i)key=\S{1,12}`}})
	fuzzMixed    = mustSpec(Spec{Builtins: allBuiltins, Patterns: []string{`\bID-\d{4}\b`, `(?m)^pw:.*$`, `secret-[0-9a-f]+`, `(?i)key=\S{1,12}`}})
	fuzzReject   = mustSpec(Spec{Builtins: allBuiltins, Action: ActionReject})
)

func mustSpec(spec Spec) *Guard {
	g, err := New(spec)
	if err != nil {
		panic(err)
	}
	return g
}

var fuzzSeeds = []string{
	"",
	"SSN: 123-45-6789 or 987-65-4321",
	"Card number: 4111-1111-1111-1111 or 5555 5555 5555 4444 or 4111 1111 1111 1112",
	"Contact us at support@example.com, call (123) 456-7890, or +1-800-555-1234 and 555.123.4567.",
	"SINs: 046-454-286, 046 454 286, and 046454286",
	"+44 20 7946 0958, +49 (0)30 1234567, 020 7946 0958, (11) 91234-5678, 2125551234",
	"id 123-45-6789@example.com; a@b.co,c@d.co; x@y..z",
	"secret-abcdef0 and ID-1234 and KEY=hunter2!",
	"Mon numéro: 555-123-4567 — 📞555-123-4567 é123-45-6789 ５５５-１２３-４５６７",
	"\xff123-45-6789\xfe\xc3",
	string(cleanPrompt[:600]),
}

func FuzzMask(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		text := []byte(s)
		for _, g := range []*Guard{fuzzBuiltins, fuzzPatterns, fuzzMixed} {
			// The one pass finds what every rule's search finds on its own.
			fast := merge(g.matches(text, 0, nil, false))
			if ref := referenceSpans(g, text); !slices.Equal(fast, ref) {
				t.Fatalf("on %q:\nfast      %v\nreference %v", s, fast, ref)
			}
			// Without a check, the search is FindAll's.
			for i := range g.rules {
				r := &g.rules[i]
				if r.check != nil {
					continue
				}
				found := r.find(text, 0, len(text), true, nil, i, false)
				if all := findAllNonEmpty(r, text, i); !slices.Equal(found, all) {
					t.Fatalf("rule %d on %q:\nfind    %v\nFindAll %v", i, s, found, all)
				}
			}
			masked := g.Mask(text)
			if (masked != nil) != (len(fast) > 0) {
				t.Fatalf("Mask returned %q with spans %v", masked, fast)
			}
			if masked == nil || g == fuzzMixed {
				continue
			}
			// What masking leaves contains no match, so masking again
			// changes nothing.
			if again := g.matches(masked, 0, nil, false); len(again) > 0 {
				t.Fatalf("masked %q to %q, which still matches at %v", s, masked, again)
			}
			if utf8.ValidString(s) && !utf8.Valid(masked) {
				t.Fatalf("masking %q made invalid UTF-8 %q", s, masked)
			}
		}
		v, _ := fuzzReject.Check(text)
		if (v == Rejected) != (len(referenceSpans(fuzzReject, text)) > 0) {
			t.Fatalf("reject verdict %v on %q", v, s)
		}
	})
}

func FuzzStreamMasker(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, []byte{byte(i), 3, 1, 7, 0, 250})
	}
	f.Add("pw: 123-45-6789\nsecret-"+string(bytes.Repeat([]byte("a"), 300))+" end", []byte{40, 200, 1})
	f.Fuzz(func(t *testing.T, s string, cuts []byte) {
		if len(s) > streamMaxPending {
			s = s[:streamMaxPending]
		}
		// Chunk lengths from cuts (0 is an empty delta), the last one taking
		// what is left.
		var chunks []string
		rest := s
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(int(cuts[i]), n)
			}
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		for _, g := range []*Guard{fuzzBuiltins, fuzzPatterns, fuzzMixed} {
			m := AcquireStreamMasker(g)
			var out []byte
			for _, c := range chunks {
				n := len(out)
				out = m.Write(out, []byte(c))
				if utf8.ValidString(s) && !utf8.Valid(out[n:]) {
					t.Fatalf("a write released %q: not whole runes", out[n:])
				}
			}
			out = m.Flush(out)
			forced := m.forced
			ReleaseStreamMasker(m)
			if forced > 0 {
				t.Fatalf("a forced cut in %d bytes", len(s))
			}
			want := referenceMask(g, []byte(s))
			if want == nil {
				want = []byte(s)
			}
			if bytes.Equal(out, want) {
				continue
			}
			// The one exception within 4 KiB: a user pattern's match longer
			// than StreamWindow.
			long := false
			for i := g.patterns; i < len(g.rules); i++ {
				for _, loc := range g.rules[i].re.FindAllIndex([]byte(s), -1) {
					long = long || loc[1]-loc[0] > StreamWindow
				}
			}
			if !long {
				t.Fatalf("chunks %q:\nstream %q\nwhole  %q", chunks, out, want)
			}
		}
	})
}

// FuzzMaskParts: masking a text cut into parts never fails; what it
// finds covers every match of the whole text and of each part alone; one
// part is AppendMask; and a rejecting guard's CheckParts agrees with it.
func FuzzMaskParts(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, []byte{byte(i), 5, 2})
	}
	f.Add("card 4111 1111 1111 1111 thanks", []byte{10, 5})
	f.Fuzz(func(t *testing.T, s string, cuts []byte) {
		text := []byte(s)
		var ends []int
		at := 0
		for _, c := range cuts {
			if at += int(c); at >= len(text) {
				break
			}
			ends = append(ends, at)
		}
		ends = append(ends, len(text))
		for _, g := range []*Guard{fuzzBuiltins, fuzzPatterns, fuzzMixed} {
			out := make([]int, len(ends))
			got, ok := g.AppendMaskParts(nil, text, ends, out)
			spans := g.partMatches(text, ends, nil, false)
			if ok != (len(spans) > 0) {
				t.Fatalf("on %q %v: ok %v with %d matches", s, ends, ok, len(spans))
			}
			if !ok {
				continue
			}
			prev := 0
			for i, c := range out {
				if c < prev || c > len(got) {
					t.Fatalf("on %q %v: cut %d at %d of %d", s, ends, i, c, len(got))
				}
				prev = c
			}
			if len(ends) == 1 {
				whole, _ := g.AppendMask(nil, text)
				if !bytes.Equal(got, whole) {
					t.Fatalf("one part %q: %q, AppendMask %q", s, got, whole)
				}
			}
		}
		rejects, err := New(Spec{Action: ActionReject, Builtins: []string{"ssn", "creditCard", "email"}})
		if err != nil {
			t.Fatal(err)
		}
		want := len(rejects.partMatches(text, ends, nil, false)) > 0
		if got := rejects.CheckParts(text, ends) == Rejected; got != want {
			t.Fatalf("on %q %v: CheckParts %v, matches %v", s, ends, got, want)
		}
	})
}
