package aipolicy

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/llm/tokens"
	"github.com/relaygate/gateway/config"
)

// benchPolicy is the request path: an alias, defaults and
// overrides, and all five regex builtins masking the default scope.
const benchPolicy = `modelAliases: {gpt-4o: gpt-4o-2024-08-06, "claude-*": claude-sonnet-4}
defaults: {temperature: 0.7, max_tokens: 1024}
overrides: {user: gateway}
promptGuard:
  request:
  - regex: {rules: [{builtin: ssn}, {builtin: creditCard}, {builtin: phoneNumber}, {builtin: email}, {builtin: caSin}]}
`

// proseLine is plain prompt text with numbers that no builtin matches.
const proseLine = "Customer question: my order #48213 arrived on March 14 with 2 of the 5 items missing; the invoice says $129.99 was charged. What are my options? "

// chatBody4KB is a 4 KiB Chat request: a system prompt and turns of prose,
// with pii spliced into the last turn when withPII is set.
func chatBody4KB(withPII bool) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"gpt-4o","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant for an online store. Answer in a friendly, concise tone."}`)
	roles := []string{"user", "assistant"}
	for i := 0; b.Len() < 3900; i++ {
		b.WriteString(`,{"role":"` + roles[i%2] + `","content":"` + proseLine + `"}`)
	}
	last := proseLine
	if withPII {
		last = "Reach me at jane.doe@example.com or (555) 123-4567; card 4111 1111 1111 1111. "
	}
	b.WriteString(`,{"role":"user","content":"` + last + `"}]}`)
	return b.Bytes()
}

func messagesBody4KB() []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-3-5","max_tokens":512,"system":[{"type":"text","text":"You are a helpful assistant."}],"messages":[`)
	roles := []string{"user", "assistant"}
	for i := 0; b.Len() < 3900; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"` + roles[i%2] + `","content":[{"type":"text","text":"` + proseLine + `"}]}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func responsesBody4KB() []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"gpt-4o","instructions":"You are a helpful assistant.","input":[`)
	for i := 0; b.Len() < 3900; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"message","role":"user","content":[{"type":"input_text","text":"` + proseLine + `"}]}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// namedBench is one benchmark case; TestBenchmarkCPU runs them one by one.
type namedBench struct {
	name string
	f    func(*testing.B)
}

// requestBenches: alias, defaults, overrides and the five builtins over a
// 4 KiB body of each format, with and without matches.
func requestBenches() []namedBench {
	p := benchPolicyOf(benchPolicy)
	run := func(body []byte, format convert.Format) func(*testing.B) {
		return func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				out, rej, err := p.Request(dst[:0], body, format, nil)
				if err != nil || rej != nil {
					b.Fatal(err, rej)
				}
				if _, ok := p.Alias(Model(out)); !ok {
					b.Fatal("no alias")
				}
				dst = out
			}
		}
	}
	return []namedBench{
		{"Request/chat4KB/clean", run(chatBody4KB(false), convert.Chat)},
		{"Request/chat4KB/pii", run(chatBody4KB(true), convert.Chat)},
		{"Request/messages4KB/clean", run(messagesBody4KB(), convert.Messages)},
		{"Request/responses4KB/clean", run(responsesBody4KB(), convert.Responses)},
	}
}

// pathBenches are the whole request path for a 4 KiB Chat request:
// Request, the alias of its model, the prompt's text and its token count
// (none, the words x 1.3 estimate, or the tokenizer), and the translation
// to the provider (Messages).
func pathBenches() []namedBench {
	p := benchPolicyOf(benchPolicy)
	body := chatBody4KB(false)
	// count estimates the tokens of the policy's output: from its prompt
	// text (text is promptText's, for the variants that read it), or, for
	// the server's own estimate, from the body.
	type counter func(model string, body []byte, text *[]byte) int
	fromText := func(f func(model string, text []byte) int) counter {
		return func(model string, body []byte, text *[]byte) int {
			*text = promptText((*text)[:0], body, convert.Chat)
			return f(model, *text)
		}
	}
	run := func(count counter) func(*testing.B) {
		return func(b *testing.B) {
			tokens.Preload()
			var dst, text, provider []byte
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				out, _, err := p.Request(dst[:0], body, convert.Chat, nil)
				if err != nil {
					b.Fatal(err)
				}
				model, _ := p.Alias(Model(out))
				if count != nil && count(model, out, &text) == 0 {
					b.Fatal("no tokens")
				}
				provider, _, err = convert.Request(provider[:0], convert.Chat, convert.Messages, out, &convert.Options{Model: model})
				if err != nil {
					b.Fatal(err)
				}
				dst = out
			}
		}
	}
	return []namedBench{
		{"RequestPath/noCount", run(nil)},
		{"RequestPath/promptText", run(fromText(func(_ string, text []byte) int { return len(text) }))},
		{"RequestPath/wordEstimate", run(fromText(func(_ string, text []byte) int { return tokens.EstimateWords(text) }))},
		{"RequestPath/tokenCount", run(fromText(tokens.Count))},
		// The server's estimate: per message, through the count cache
		// (warm here: the same body each time).
		{"RequestPath/promptTokens", run(func(model string, body []byte, scratch *[]byte) int {
			var n int
			n, *scratch = PromptTokens(*scratch, body, convert.Chat, tokens.EncodingFor(model))
			return n
		})},
	}
}

// promptTextBenches: the prompt's text alone, and with its tokens counted.
func promptTextBenches() []namedBench {
	body := chatBody4KB(false)
	run := func(count bool) func(*testing.B) {
		return func(b *testing.B) {
			tokens.Preload()
			var text []byte
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				text = promptText(text[:0], body, convert.Chat)
				if count {
					tokens.Count("gpt-4o", text)
				}
			}
		}
	}
	return []namedBench{{"PromptText/text", run(false)}, {"PromptText/text+Count", run(true)}}
}

// transformationBenches: the CEL path, which decodes the body once.
func transformationBenches() []namedBench {
	p := benchPolicyOf(`transformations: {max_tokens: 'llmRequest.messages.size() * 100', user: 'request.headers["x-user"]'}`)
	body := chatBody4KB(false)
	in := requestInput("/v1/chat/completions", "X-User", "alice")
	return []namedBench{{"Transformations/chat4KB", func(b *testing.B) {
		var dst []byte
		b.ReportAllocs()
		for b.Loop() {
			out, _, err := p.Request(dst[:0], body, convert.Chat, in)
			if err != nil {
				b.Fatal(err)
			}
			dst = out
		}
	}}}
}

// baselineBenches are the floor Request stands on, measured beside it: the
// validation every body gets, the five builtins over the prompt's text
// alone, and the translation after.
func baselineBenches() []namedBench {
	body := chatBody4KB(false)
	text := promptText(nil, body, convert.Chat)
	g, err := guard.New(guard.Spec{Builtins: config.RegexBuiltins})
	if err != nil {
		panic(err)
	}
	return []namedBench{
		{"Baseline/ValidObject4KB", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !llm.ValidObject(body) {
					b.Fatal("invalid")
				}
			}
		}},
		{"Baseline/guardCheckText", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v, _ := g.Check(text); v != guard.Clean {
					b.Fatal(v)
				}
			}
		}},
		{"Baseline/convertChatToMessages", func(b *testing.B) {
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				out, _, err = convert.Request(out[:0], convert.Chat, convert.Messages, body, nil)
				if err != nil {
					b.Fatal(err)
				}
			}
		}},
	}
}

func allBenches() []namedBench {
	return slices.Concat(baselineBenches(), requestBenches(), pathBenches(), promptTextBenches(), transformationBenches())
}

func runBenches(b *testing.B, benches []namedBench) {
	for _, bm := range benches {
		b.Run(bm.name[strings.IndexByte(bm.name, '/')+1:], bm.f)
	}
}

func BenchmarkBaseline(b *testing.B)        { runBenches(b, baselineBenches()) }
func BenchmarkRequest(b *testing.B)         { runBenches(b, requestBenches()) }
func BenchmarkRequestPath(b *testing.B)     { runBenches(b, pathBenches()) }
func BenchmarkPromptText(b *testing.B)      { runBenches(b, promptTextBenches()) }
func BenchmarkTransformations(b *testing.B) { runBenches(b, transformationBenches()) }

// TestRequestAllocations: the regex-and-fields path allocates nothing once
// warm, whether or not it masks nothing; the 4 KiB bodies are what the
// benchmarks run.
func TestRequestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := mustPolicy(t, benchPolicy+"prompts: {prepend: [{role: system, content: s}]}\n")
	for _, f := range []convert.Format{convert.Chat, convert.Messages, convert.Responses} {
		body := map[convert.Format][]byte{convert.Chat: chatBody4KB(false), convert.Messages: messagesBody4KB(), convert.Responses: responsesBody4KB()}[f]
		dst := make([]byte, 0, 8192)
		text := make([]byte, 0, 8192)
		n := testing.AllocsPerRun(100, func() {
			out, _, _ := p.Request(dst[:0], body, f, nil)
			p.Alias(Model(out))
			promptText(text[:0], out, f)
		})
		if n != 0 {
			t.Errorf("%v: %v allocations", f, n)
		}
	}
}
