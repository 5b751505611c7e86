package tokens

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// The library is the reference: Count must return what its Count returns,
// on every input.

var references = sync.OnceValue(func() map[Encoding]tokenizer.Codec {
	refs := make(map[Encoding]tokenizer.Codec)
	for _, e := range []Encoding{O200kBase, Cl100kBase} {
		c, err := tokenizer.Get(tokenizer.Encoding(e))
		if err != nil {
			panic(err)
		}
		refs[e] = c
	}
	return refs
})

// referenceCount is the library's count of text.
func referenceCount(t testing.TB, e Encoding, text []byte) int {
	t.Helper()
	n, err := references()[e].Count(string(text))
	if err != nil {
		t.Fatalf("%s: library: %v", e, err)
	}
	return n
}

func checkAgainstReference(t testing.TB, text []byte) {
	t.Helper()
	for _, e := range []Encoding{O200kBase, Cl100kBase} {
		if got, want := CountEncoding(e, text), referenceCount(t, e, text); got != want {
			t.Errorf("%s: Count(%q) = %d, library %d", e, text, got, want)
		}
	}
}

// tricky are inputs aimed at each alternative of the split patterns, the
// behaviours of the library's generated matcher, and the merge paths.
var tricky = []struct {
	desc  string
	texts []string
}{
	{"contractions, in and out of words, any case, and the long s", []string{
		"don't I'm you're we've they'll she'd it's", "DON'T I'M YOU'RE WE'VE THEY'LL", "'s 't 're 've 'm 'll 'd",
		"'S'T'RE'VE'M'LL'D", "'l 'lx 'r 'v 'ſ x'ſ X'ſ", "'ſa x'ſa ab'ſcd 'ſſ 'ſab", "rock'n'roll o'clock", "''s '''", "'Re", "abc'",
	}},
	{"letters: case runs, titlecase, modifier letters, marks, other scripts", []string{
		"HTTPServer getHTTPResponseCode iPhone McDonald ǅungla ǈ ʰʱʲ", "ÀÉÎõü ÆØÅ ß ΣΑΣ σας", "Привет, Мир! ПРИВЕТмир",
		"नमस्ते दुनिया", "ภาษาไทย", "مرحبا بالعالم", "שלום עולם", "안녕하세요 세계", "日本語のテキストとカタカナ", "e\u0301 a\u0300b \u0301x \u0301\u0302",
		"x\u0301\u0301Y\u0301", "\u0301", " \u0301A", "A\u02b0B", "ᾈᾉ", "\U0001d400\U0001d41a", // math bold letters (supplementary)
	}},
	{"numbers of every kind", []string{
		"1234567890 12 1 123456", "٣٤٥ ۱۲۳ १२३ ４５６ ²³¹ ½ ⅷ Ⅻ ①②", "3.14159 1,000,000 v1.2.3 0x1F 1e-9",
		"a1b2c3 x123y", "\U0001d7ce\U0001d7cf\U0001d7d0\U0001d7d1",
	}},
	{"punctuation, with its optional space and trailing line breaks or slashes", []string{
		"!!! ... --- *** ??? ", " !!\n\n!! // /** */", "a //b/c/ d/", "<|endoftext|> <|fim_prefix|>", "$129.99 (section 4.2)",
		"\"Hello\" «bonjour» “quotes” ‘single’", "😀😀 👍🏽 👨‍👩‍👧 🇫🇷", " 😀x", "x=1;y+=2&&z", "\t!\n",
	}},
	{"white space: runs, line breaks, the space before a word, Unicode spaces", []string{
		"a  b   c    d", "a\n\nb\n \n c", "\n \n", "  \n  \n  x", " \r\n\r\n  \t", "x \n", "x  ", "   ", "\n", "\t\tx",
		"a\u00a0b\u00a0\u00a0c", "a\u3000b\u3000\u3000c", "\u0085x\u0085\u0085", "\u2028\u2029 x", "\u200b\u200bx", "\v\fx\f",
		"\x1c\x1d\x1e\x1fx", " \x1c", "a \u00a0b", "a\u00a0 b",
	}},
	{"DEL, which the library's matcher skips, and other controls", []string{
		"\x7f", "a\x7fb", "!\x7f!", " \x7fx", "\x7f\x7f\x7f", "x\x00y\x01z", "\x1b[31mred\x1b[0m",
	}},
	{"invalid UTF-8: lone bytes, truncated and overlong sequences, surrogates", []string{
		"\xff\xfe invalid \xc3", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xc0\xaf", "\xed\xa0\x80", "\x80\x80abc", "ab\xffcd", "\xff'\xffs",
		"'\xc5", "'\xc5\xbf", "x\xf4\x90\x80\x80", "hello\xffworld \xff\xff\xff!!", "\xef\xbf\xbd\xff",
	}},
	{"long pieces: past the scan merge into the heap merge", []string{
		strings.Repeat(" ", 200), strings.Repeat("a", 300), strings.Repeat("!", 150), strings.Repeat("ab", 100),
		strings.Repeat("\n", 100), strings.Repeat("\t ", 80) + "x", strings.Repeat("é", 100), strings.Repeat("\xff", 70),
		"Pneumonoultramicroscopicsilicovolcanoconiosis", "aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=",
		strings.Repeat("你好世界", 40), strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("😀", 30),
	}},
}

func TestCountMatchesLibrary(t *testing.T) {
	for _, tc := range tricky {
		t.Run(tc.desc, func(t *testing.T) {
			for _, text := range tc.texts {
				checkAgainstReference(t, []byte(text))
			}
		})
	}
	t.Run("prompt4KB", func(t *testing.T) { checkAgainstReference(t, prompt4KB()) })
	for _, name := range corpora {
		t.Run(name, func(t *testing.T) { checkAgainstReference(t, corpus(t, name)) })
	}
}

// alphabet draws runes from every class the patterns tell apart, weighted
// towards the ones they treat specially.
var alphabet = []rune("aZkKsStTrReEvVmMlLdD'''   \t\n\n\r/!.,-_?\"(){}<>|0123456789" +
	"ſéÉßǅʰ\u0301\u0302ΣσПр日本語カ한\u0e2d٣４²½\u00a0\u3000\u0085\u2028\u200b\x7f\x00\x1c😀\ufffd")

func randomText(rng *rand.Rand, maxRunes int) []byte {
	var b []byte
	for range rng.IntN(maxRunes + 1) {
		switch rng.IntN(20) {
		case 0:
			b = append(b, byte(rng.IntN(256))) // often invalid
		case 1:
			b = utf8.AppendRune(b, rng.Int32N(0x30000))
		default:
			b = utf8.AppendRune(b, alphabet[rng.IntN(len(alphabet))])
		}
	}
	return b
}

func TestCountMatchesLibraryOnRandomText(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := 20000
	if testing.Short() {
		cases = 2000
	}
	for range cases {
		checkAgainstReference(t, randomText(rng, 40))
		if t.Failed() {
			return
		}
	}
}

// TestCountMatchesLibraryOnLongPieces merges pieces past the stack's arrays
// (maxStackPiece) and through the pool: runs of letters, white space,
// punctuation and CJK text, random enough to join in varied orders.
func TestCountMatchesLibraryOnLongPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	runs := []string{"abcdefghijklmnopqrstuvwxyzTHE", " \t", "-=*#!.", "日本語中文字天气很好", "\n\r "}
	for range 200 {
		set := []rune(runs[rng.IntN(len(runs))])
		var b []byte
		for range 10 + rng.IntN(1500) {
			b = utf8.AppendRune(b, set[rng.IntN(len(set))])
		}
		checkAgainstReference(t, b)
		if t.Failed() {
			return
		}
	}
}

func FuzzCount(f *testing.F) {
	for _, tc := range tricky {
		for _, s := range tc.texts {
			f.Add([]byte(s))
		}
	}
	for _, name := range corpora {
		f.Add(corpus(f, name)[:700])
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		checkAgainstReference(t, text)
	})
}

// TestClassTable checks the table against the predicates the library's
// matchers evaluate, for every code point.
func TestClassTable(t *testing.T) {
	tbl := runeClasses()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		letter, number, space := unicode.In(r, unicode.L), unicode.In(r, unicode.N), unicode.IsSpace(r)
		var want uint8
		set := func(bit uint8, on bool) {
			if on {
				want |= bit
			}
		}
		set(classLetter, letter)
		set(classNumber, number)
		set(classSpace, space)
		set(classUpper, unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M))
		set(classLower, unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M))
		set(classPrefix, r != '\r' && r != '\n' && r != del && !letter && !number)
		set(classPunct, r != del && !space && !letter && !number)
		if got := tbl.of(r); got != want {
			t.Fatalf("classes of %U: %07b, want %07b", r, got, want)
		}
	}
}

// TestVocabularies checks that the vocabularies hold every token of the
// library's, at its rank: each id below the size decodes to bytes that
// look up to that id, and the size itself decodes to nothing.
func TestVocabularies(t *testing.T) {
	for _, tc := range []struct {
		e    Encoding
		size int
	}{{O200kBase, o200kSize}, {Cl100kBase, cl100kSize}} {
		c := references()[tc.e]
		v := encoderFor(tc.e).vocab
		if v.tokens != tc.size {
			t.Errorf("%s: %d tokens loaded, want %d", tc.e, v.tokens, tc.size)
		}
		if _, err := c.Decode([]uint{uint(tc.size)}); err == nil {
			t.Errorf("%s: id %d decodes: the vocabulary is larger", tc.e, tc.size)
		}
		for id := range tc.size {
			token, err := c.Decode([]uint{uint(id)})
			if err != nil {
				t.Fatalf("%s: id %d: %v", tc.e, id, err)
			}
			var rank uint32
			switch b := []byte(token); len(b) {
			case 1:
				continue
			case 2:
				rank = v.pairRank[int(b[0])<<8|int(b[1])]
			default:
				rank = v.longer.rank(b)
			}
			if rank != uint32(id) {
				t.Fatalf("%s: %q has rank %d, want %d", tc.e, token, rank, id)
			}
		}
		for _, notToken := range []string{strings.Repeat("x", 200), "\x00\x01\x02\x03", strings.Repeat("日本", 30)} {
			if r := v.longer.rank([]byte(notToken)); r != noRank {
				t.Errorf("%s: %q has rank %d, want none", tc.e, notToken, r)
			}
		}
	}
}

func TestCountAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cases := []struct {
		desc string
		text []byte
	}{{"prompt", prompt4KB()}, {"long pieces", []byte(strings.Repeat(" ", 5000) + "x")}}
	for _, name := range corpora {
		cases = append(cases, struct {
			desc string
			text []byte
		}{name, corpus(t, name)})
	}
	for _, tc := range cases {
		for _, e := range []Encoding{O200kBase, Cl100kBase} {
			CountEncoding(e, tc.text)
			if n := testing.AllocsPerRun(100, func() { CountEncoding(e, tc.text) }); n != 0 {
				t.Errorf("%s, %s: %v allocations", tc.desc, e, n)
			}
		}
	}
}
