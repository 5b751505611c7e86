package promptcache

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/llm/tokens"
)

// exactWords recovers the word count behind tokens.EstimateWords: ten
// copies of s, space separated, hold ten times its words, and 13 x 10 / 10
// leaves nothing to round.
func exactWords(s string) int {
	return tokens.EstimateWords([]byte(strings.Repeat(s+" ", 10))) / 13
}

// escapeAll writes s as a JSON string token whose every character is a
// \u escape (surrogate pairs beyond the BMP).
func escapeAll(s string) []byte {
	const hex = "0123456789abcdef"
	out := []byte{'"'}
	for _, r := range s {
		for _, u := range utf16.Encode([]rune{r}) {
			out = append(out, '\\', 'u', hex[u>>12], hex[u>>8&0xf], hex[u>>4&0xf], hex[u&0xf])
		}
	}
	return append(out, '"')
}

// TestCountWords: countWords on a string token counts the words
// tokens.EstimateWords counts in its text, however the text is escaped.
func TestCountWords(t *testing.T) {
	tests := []struct {
		desc string
		text string
		want int
	}{
		{"empty", "", 0},
		{"spaces", "   ", 0},
		{"plain", "one two  three", 3},
		{"line breaks and tabs", "one\ntwo\tthree\r\nfour", 4},
		{"vertical tab and form feed", "a\vb\fc", 3},
		{"no-break and em spaces", "a\u00a0b\u2003c", 3},
		{"line and paragraph separators", "a\u2028b\u2029c", 3},
		{"quotes and backslashes", `say "hi" \ now`, 4},
		{"control characters are not spaces", "a\x01b", 1},
		{"beyond the BMP", "emoji 😀 here", 3},
		{"invalid UTF-8", "a\xffb c", 2},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := exactWords(tt.text); got != tt.want {
				t.Fatalf("tokens.EstimateWords counts %d words, the test wants %d", got, tt.want)
			}
			for name, tok := range map[string][]byte{"AppendString": llm.AppendString(nil, tt.text), "all escaped": escapeAll(tt.text)} {
				if got := countWords(tok[1 : len(tok)-1]); got != tt.want {
					t.Errorf("%s %s: %d words, want %d", name, tok, got, tt.want)
				}
				if got := hasWord(tok[1 : len(tok)-1]); got != (tt.want > 0) {
					t.Errorf("%s %s: hasWord %v", name, tok, got)
				}
			}
		})
	}
}

// TestCountWordsBadEscapes: a token cut inside an escape counts what is
// there and stays in bounds.
func TestCountWordsBadEscapes(t *testing.T) {
	for _, in := range []string{`\`, `a\u12`, `\ud83d`, `\ud83d\u0041 b`, `\ud83d\`} {
		if n := countWords([]byte(in)); n < 1 || n > 2 {
			t.Errorf("countWords(%q) = %d", in, n)
		}
	}
}

func TestTally(t *testing.T) {
	tests := []struct {
		desc         string
		v            string
		words, marks int
		long         string // the last long-TTL point's value ("" none)
	}{
		{"names are not words", `{"first word":"a b","x":["c",{"y":"d"}]}`, 4, 0, ""},
		{"marks", `[{"cache_control":{"type":"ephemeral"}},{"cache_control":null},{"cache\u005fcontrol":{}}]`, 0, 2, ""},
		{"a mark's value is not words", `{"text":"a","cache_control":{"type":"ephemeral","ttl":"1h"}}`, 1, 1, `{"type":"ephemeral","ttl":"1h"}`},
		{"the last long TTL", `[{"cache_control":{"ttl":"1h"}},{"cache_control":{"ttl":"5m"}},{"cache_control":{"ttl":"1h"}},{"cache_control":{}}]`, 0, 4, `{"ttl":"1h"}`},
		{"a lone string", `"one two"`, 2, 0, ""},
		{"absent", ``, 0, 0, ""},
	}
	if c := tally([]byte(`["a b c","d e", {"cache_control":{}}]`), "cache_control", 4); c.words != 4 || c.marks != 1 {
		t.Errorf("with 4 words wanted: %+v, want 4 words 1 mark", c)
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := tally([]byte(tt.v), "cache_control", 1<<30)
			longAt := -1
			if tt.long != "" {
				longAt = strings.LastIndex(tt.v, tt.long)
			}
			if c.words != tt.words || c.marks != tt.marks || c.longAt != longAt {
				t.Errorf("tally = %+v, want %d words %d marks long at %d", c, tt.words, tt.marks, longAt)
			}
		})
	}
}

func TestOffsetIn(t *testing.T) {
	body := []byte(`{"a":[1,2,{"b":3}]}`)
	var e elements
	v, _, _ := member(body, "a")
	e.reset(v)
	var got []int
	for e.next() {
		got = append(got, offsetIn(body, e.value))
	}
	if !e.ok() || len(got) != 3 || got[0] != 6 || got[1] != 8 || got[2] != 10 || offsetIn(body, v) != 5 {
		t.Errorf("offsets %v (array at %d)", got, offsetIn(body, v))
	}
}

func FuzzCountWords(f *testing.F) {
	for _, s := range []string{"", "a b", "x\u00a0y", "tab\there", "😀 \u2028", "\xff\xfe a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := exactWords(s)
		for _, tok := range [][]byte{llm.AppendString(nil, s), escapeAll(s)} {
			if got := countWords(tok[1 : len(tok)-1]); got != want {
				t.Fatalf("countWords(%s) = %d, tokens.EstimateWords counts %d", tok, got, want)
			}
			if hasWord(tok[1:len(tok)-1]) != (want > 0) {
				t.Fatalf("hasWord(%s) disagrees with %d words", tok, want)
			}
		}
	})
}
