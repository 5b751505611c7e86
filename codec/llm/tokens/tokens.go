// Package tokens estimates how many tokens a prompt takes before it is sent:
// rate limits that count tokens reserve them up front (`tokenize: true`), and
// prompt caching checks `minTokens`. It counts with OpenAI's BPE encodings
// compiled into the binary (github.com/tiktoken-go/tokenizer: o200k_base and
// cl100k_base; nothing is downloaded at run time), each loaded on first use,
// and it is safe for concurrent use.
//
// The encoding follows the model name as agentgateway's does (tiktoken's
// table through tiktoken-rs, crates/llm/src/tokenizer.rs): o200k_base for the
// gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and o-series families, cl100k_base for
// everything else. That includes the models of other providers (Claude,
// Gemini, Llama, Mistral...), whose tokenizers are not public: agentgateway
// counts them with cl100k_base too (get_tokenizer(model).unwrap_or(Cl100k)),
// which tracks them within a few tens of percent on prose and, unlike
// counting words, also on code and on scripts written without spaces
// ("你好，世界！今天天气很好。" is 16 cl100k tokens and one word). The words x 1.3 rule
// is agentgateway's estimate for Bedrock prompt caching's minTokens only; it
// is EstimateWords here. Two departures: agentgateway fails the request for
// models tiktoken maps to other encodings, gpt-oss (o200k_harmony, whose text
// tokens are o200k_base's) is counted with o200k_base, and the retired GPT-3
// models (r50k/p50k) with cl100k_base.
//
// # A counter of its own, exact to the library
//
// Count returns exactly what the library's Count returns, for every input,
// but does not call it. The library takes 0.5 to 0.8 ms and 5,000 to 6,200
// allocations for a 4 KB prompt, three quarters of it in its regexp2
// pre-split (a match object a piece) and most of the rest in map lookups,
// when the whole LLM request path aims at 20 µs; this package takes 20 to
// 35 µs for prose and code, and allocates nothing. The library stays, as
// the source of the vocabularies and, in the tests, as the reference that
// every count is checked against.
//
//   - Vocabularies (vocab.go): the library keeps its ranks unexported, so
//     they are read out through its Decode, one id at a time, on first use,
//     into a 64K-entry table of two-byte tokens and an open-addressing table
//     of the longer ones.
//   - Pre-tokenizing (pretokenize.go, classes.go): a hand-written matcher per
//     split pattern that cuts where the library's generated regexp matcher
//     cuts, including the two places where that matcher differs from the
//     patterns as written; character classes come from one table built from
//     Go's Unicode tables, as the matcher's are.
//   - Merging (merge.go, memo.go): tiktoken's byte-pair merge, in arrays on
//     the stack, with a heap for pieces past 16 bytes; a piece that has to
//     be merged is remembered for the rest of the count.
//
// The tests check the counts against the library on chosen inputs, 20,000
// random strings, long pieces, every token of both vocabularies and the
// fuzz target FuzzCount; the pre-tokenizer was also compared piece by piece
// with the library's matcher, on 400,000 random strings, while it was
// written.
//
// BenchmarkCount4KB on the project's machine (2 vCPUs, AMD EPYC, Go 1.26.8,
// GOMAXPROCS=1, best of 25 runs), µs per count of about 4 KB, this package
// against the library, which also allocates 1,000 to 6,200 times:
//
//	                            o200k_base     cl100k_base
//	prompt4KB (repeats itself)    22 /   830     23 /   550
//	testdata/prose.txt            26 /   700     25 /   520
//	testdata/code.txt             32 /   760     34 /   740
//	testdata/cjk.txt             250 / 1,030    185 /   870
//
// CJK stays slower: its pieces are long runs of letters that merge byte by
// byte, with two table lookups a join. On that machine runs switch, from
// one second to the next, between these times and about 1.7 times them,
// library included, apparently with the load of the host.
package tokens

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// Encoding names a BPE encoding.
type Encoding string

const (
	O200kBase  Encoding = "o200k_base"
	Cl100kBase Encoding = "cl100k_base"
)

// Per-message framing that chat APIs add around the contents, as
// agentgateway counts it (num_tokens_from_messages, after OpenAI's
// cookbook): each message adds PerMessage tokens to its content, and the
// request PerRequest (the reply's priming).
const (
	PerMessage = 4
	PerRequest = 3
)

// o200kPrefixes are the model families that use o200k_base. The o-series
// names need a '-' or the end after them (o1, o3-mini), so that no other
// model's name that happens to start with "o1" matches.
var o200kPrefixes = []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss"}

var oSeries = []string{"o1", "o3", "o4"}

// EncodingFor returns the encoding Count uses for model. A provider prefix
// ("openai/gpt-4o") and a fine-tune prefix ("ft:gpt-4o-mini:org::id") are
// ignored; case is too.
func EncodingFor(model string) Encoding {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	if len(model) >= 3 && strings.EqualFold(model[:3], "ft:") {
		model = model[3:]
	}
	for _, p := range o200kPrefixes {
		if hasPrefixFold(model, p) {
			return O200kBase
		}
	}
	for _, p := range oSeries {
		if hasPrefixFold(model, p) && (len(model) == len(p) || model[len(p)] == '-') {
			return O200kBase
		}
	}
	return Cl100kBase
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

var (
	o200k  = sync.OnceValue(func() *encoder { return newEncoder(tokenizer.O200kBase, o200kSize) })
	cl100k = sync.OnceValue(func() *encoder { return newEncoder(tokenizer.Cl100kBase, cl100kSize) })

	runeClasses = sync.OnceValue(newClassTable)
)

func encoderFor(e Encoding) *encoder {
	if e == O200kBase {
		return o200k()
	}
	return cl100k()
}

// Preload loads both encodings now (about 150 ms and 16 MB of heap for
// o200k_base, 55 ms and 8 MB for cl100k_base, of which the library's own
// tables are 6 and 3 MB) rather than in the first request that needs one.
func Preload() {
	o200k()
	cl100k()
}

// Count returns the number of tokens text encodes to in model's encoding,
// as the library does. Special tokens ("<|endoftext|>") count as the text
// they are written with. Invalid UTF-8 counts as the library counts it,
// each invalid byte as U+FFFD. A text of 2 GiB or more is estimated with
// EstimateWords. Count allocates nothing for valid UTF-8; invalid UTF-8
// takes a pooled copy of the text from the first invalid byte on.
func Count(model string, text []byte) int {
	return CountEncoding(EncodingFor(model), text)
}

// CountEncoding is Count with the encoding named.
func CountEncoding(e Encoding, text []byte) int {
	if len(text) == 0 {
		return 0
	}
	return encoderFor(e).count(text)
}

// EstimateWords estimates tokens as words x 1.3, rounded down:
// agentgateway's estimate for prompt caching's minTokens (bedrock.rs,
// estimate_system_tokens). A word is a run of characters that are not
// Unicode white space, as Rust's split_whitespace counts them. It allocates
// nothing.
func EstimateWords(text []byte) int {
	words, inWord := 0, false
	for i := 0; i < len(text); {
		c := text[i]
		var space bool
		if c < utf8.RuneSelf {
			space = asciiSpace[c]
			i++
		} else {
			r, w := utf8.DecodeRune(text[i:])
			space = unicode.IsSpace(r)
			i += w
		}
		if !space && !inWord {
			words++
		}
		inWord = !space
	}
	return words * 13 / 10
}

var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}
