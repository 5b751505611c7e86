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
	o200k  = sync.OnceValue(func() tokenizer.Codec { return mustGet(tokenizer.O200kBase) })
	cl100k = sync.OnceValue(func() tokenizer.Codec { return mustGet(tokenizer.Cl100kBase) })
)

func mustGet(e tokenizer.Encoding) tokenizer.Codec {
	c, err := tokenizer.Get(e)
	if err != nil {
		panic("tokens: " + string(e) + ": " + err.Error()) // compiled in: cannot happen
	}
	return c
}

func codec(e Encoding) tokenizer.Codec {
	if e == O200kBase {
		return o200k()
	}
	return cl100k()
}

// Preload loads both encodings now (about 25 ms and 6 MB of heap for
// o200k_base, 9 ms and 3 MB for cl100k_base) rather than in the first
// request that needs one.
func Preload() {
	o200k()
	cl100k()
}

// Count returns the number of tokens text encodes to in model's encoding.
// Special tokens ("<|endoftext|>") count as the text they are written with.
// Invalid UTF-8 is tokenized as it is. It is not cheap: about 0.15 µs and 1.5
// allocations a byte (0.63 ms for a 4 KiB prompt), three quarters of it in
// the library's pre-split regexp (regexp2, a match object per piece); the
// vocabularies are unexported, so that cannot be bypassed without a fork.
func Count(model string, text []byte) int {
	return CountEncoding(EncodingFor(model), text)
}

// CountEncoding is Count with the encoding named.
func CountEncoding(e Encoding, text []byte) int {
	if len(text) == 0 {
		return 0
	}
	n, err := codec(e).Count(string(text))
	if err != nil {
		// The tokenizer only fails in its strict UTF-8 mode or on a regexp
		// timeout, neither of which is set; an estimate beats none.
		return EstimateWords(text)
	}
	return n
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
