package tokens

import (
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The counts are the tokenizer's own, pinned; the ids behind the first ones
// are the ones OpenAI's tiktoken documents ("hello world" is 15339 1917 in
// cl100k_base and 24912 2375 in o200k_base).
func TestCount(t *testing.T) {
	cases := []struct {
		desc          string
		text          string
		o200k, cl100k int
	}{
		{"empty", "", 0, 0},
		{"two words", "hello world", 2, 2},
		{"sentence", "Hello, world! How are you doing today?", 10, 10},
		{"pangram", "The quick brown fox jumps over the lazy dog.", 10, 10},
		{"chinese: o200k has more cjk merges", "你好，世界！今天天气很好。", 9, 16},
		{"code", "func main() {\n\tfmt.Println(\"hi\")\n}\n", 10, 10},
		{"accents and typographic quotes", "ünïcödé façade — “quotes”", 9, 12},
		{"a special token counts as its text", "<|endoftext|>", 7, 7},
		{"numbers split in threes", "1234567890 3.14159", 9, 9},
		{"repeated letter", strings.Repeat("a", 100), 13, 13},
		{"invalid utf-8 is tokenized as it is", "\xff\xfe invalid \xc3", 3, 3},
		{"4 KiB prompt", string(prompt4KB()), 1016, 1017},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := CountEncoding(O200kBase, []byte(tc.text)); got != tc.o200k {
				t.Errorf("o200k_base: %d, want %d", got, tc.o200k)
			}
			if got := CountEncoding(Cl100kBase, []byte(tc.text)); got != tc.cl100k {
				t.Errorf("cl100k_base: %d, want %d", got, tc.cl100k)
			}
			if got := Count("gpt-4o-mini", []byte(tc.text)); got != tc.o200k {
				t.Errorf("Count for gpt-4o-mini: %d, want %d", got, tc.o200k)
			}
			if got := Count("claude-sonnet-4-5", []byte(tc.text)); got != tc.cl100k {
				t.Errorf("Count for claude-sonnet-4-5: %d, want %d", got, tc.cl100k)
			}
		})
	}
}

func TestEncodingFor(t *testing.T) {
	cases := []struct {
		desc  string
		model string
		want  Encoding
	}{
		{"gpt-4o", "gpt-4o", O200kBase},
		{"gpt-4o dated", "gpt-4o-2024-08-06", O200kBase},
		{"gpt-4o-mini", "gpt-4o-mini", O200kBase},
		{"chatgpt-4o", "chatgpt-4o-latest", O200kBase},
		{"gpt-4.1", "gpt-4.1-nano", O200kBase},
		{"gpt-4.5", "gpt-4.5-preview", O200kBase},
		{"gpt-5", "gpt-5", O200kBase},
		{"gpt-5 point release", "gpt-5.1-codex", O200kBase},
		{"gpt-oss (o200k_harmony's text tokens)", "gpt-oss-120b", O200kBase},
		{"o1", "o1", O200kBase},
		{"o1-mini", "o1-mini", O200kBase},
		{"o3", "o3", O200kBase},
		{"o4-mini", "o4-mini-2025-04-16", O200kBase},
		{"provider prefix", "openai/gpt-4o", O200kBase},
		{"fine-tune", "ft:gpt-4o-mini:acme::abc123", O200kBase},
		{"case", "GPT-4O", O200kBase},
		{"gpt-4", "gpt-4", Cl100kBase},
		{"gpt-4-turbo", "gpt-4-turbo-2024-04-09", Cl100kBase},
		{"gpt-3.5-turbo", "gpt-3.5-turbo", Cl100kBase},
		{"azure's gpt-35-turbo", "gpt-35-turbo", Cl100kBase},
		{"fine-tuned gpt-3.5", "ft:gpt-3.5-turbo:acme::x", Cl100kBase},
		{"embeddings", "text-embedding-3-small", Cl100kBase},
		{"retired gpt-3 (r50k) counts with cl100k", "davinci", Cl100kBase},
		{"claude", "claude-sonnet-4-5", Cl100kBase},
		{"gemini", "gemini-2.5-pro", Cl100kBase},
		{"bedrock model id", "anthropic.claude-3-5-sonnet-20240620-v1:0", Cl100kBase},
		{"llama", "meta-llama/Llama-3.1-8B-Instruct", Cl100kBase},
		{"not an o-series name", "o1x-custom", Cl100kBase},
		{"empty", "", Cl100kBase},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := EncodingFor(tc.model); got != tc.want {
				t.Errorf("EncodingFor(%q) = %s, want %s", tc.model, got, tc.want)
			}
		})
	}
}

func TestEstimateWords(t *testing.T) {
	cases := []struct {
		desc string
		text string
		want int
	}{
		{"empty", "", 0},
		{"only spaces", " \t\n ", 0},
		{"one word", "hello", 1},                 // 1.3 rounds down
		{"ten words", "a b c d e f g h i j", 13}, // 10 x 1.3
		{"surrounding and repeated spaces", "  one   two\tthree\n\nfour  ", 5},
		{"punctuation stays in its word", "Hello, world! (really)", 3},
		{"no-break space and ideographic space separate words", "a\u00a0b\u3000c", 3},
		{"chinese without spaces is one word", "你好，世界！今天天气很好。", 1},
		{"invalid utf-8 is a word", "\xff \xfe", 2},
		{"4 KiB prompt", string(prompt4KB()), 928},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := EstimateWords([]byte(tc.text)); got != tc.want {
				t.Errorf("EstimateWords(%q) = %d, want %d", tc.text, got, tc.want)
			}
		})
	}
}

func TestEstimateWordsAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := prompt4KB()
	if n := testing.AllocsPerRun(100, func() { EstimateWords(p) }); n != 0 {
		t.Errorf("EstimateWords allocated %v times", n)
	}
}

// TestCountConcurrent loads and uses both encodings from many goroutines at
// once (run with -race).
func TestCountConcurrent(t *testing.T) {
	p := prompt4KB()[:512]
	want := map[Encoding]int{O200kBase: CountEncoding(O200kBase, p), Cl100kBase: CountEncoding(Cl100kBase, p)}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				model := "gpt-4o"
				if i%2 == 1 {
					model = "gpt-4"
				}
				if got := Count(model, p); got != want[EncodingFor(model)] {
					t.Errorf("%s: %d, want %d", model, got, want[EncodingFor(model)])
				}
			}
		})
	}
	wg.Wait()
}

// TestCountCached: the cache returns what CountEncoding returns, for each
// encoding apart, for short texts it does not keep, and under concurrent
// use (run with -race).
func TestCountCached(t *testing.T) {
	base := strings.Repeat("Cached counts must equal fresh ones, 你好，世界！今天天气很好。 ", 8)
	texts := [][]byte{[]byte("short"), []byte(base)}
	for i := range 50 { // same length, different content
		texts = append(texts, []byte(base+strconv.Itoa(1000+i)))
	}
	// The second encoding finds the first one's counts wrong: a cache
	// shared between them would fail below.
	if CountEncoding(O200kBase, texts[1]) == CountEncoding(Cl100kBase, texts[1]) {
		t.Fatal("the text does not tell the encodings apart")
	}
	for _, e := range []Encoding{O200kBase, Cl100kBase} {
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 3 {
					for _, text := range texts {
						if got, want := CountCached(e, text), CountEncoding(e, text); got != want {
							t.Errorf("%v round %d %q...: %d, want %d", e, round, text[:20], got, want)
						}
					}
				}
			}()
		}
		wg.Wait()
	}
}
