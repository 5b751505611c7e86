package server

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm/tokens"
)

// benchChatBody is a chat request of about 4 KB: a system prompt and a
// few turns of plain text, no match for the guards.
func benchChatBody() []byte {
	turn := strings.Repeat("Tell me about the history of the city and its main sights, in a few sentences. ", 6)
	var b strings.Builder
	b.WriteString(`{"model":"fast","messages":[{"role":"system","content":"You are a concise travel guide."}`)
	for i := 0; i < 4; i++ {
		b.WriteString(`,{"role":"user","content":"` + turn + `"},{"role":"assistant","content":"` + turn + `"}`)
	}
	b.WriteString(`],"stream":false}`)
	return []byte(b.String())
}

// benchPolicy is the request path: an alias, a default and the
// five regex builtins (masking).
func benchPolicy(b *testing.B) *aipolicy.Policy {
	f := parseConfigTB(b, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        ai:
          modelAliases: {fast: gpt-4o-mini}
          defaults: {temperature: 0.2}
          promptGuard:
            request:
            - regex: {action: mask, rules: [{builtin: ssn}, {builtin: creditCard}, {builtin: phoneNumber}, {builtin: email}, {builtin: caSin}]}
      backends:
      - ai: {name: p, provider: {openAI: {}}}
`)
	p, err := aipolicy.New(f.Binds[0].Listeners[0].Routes[0].Policies.AI)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkLLMRequestPath is the per-request work of an LLM request before
// it is sent: the ai policy (alias, default, five regex guards), the
// prompt's token estimate (as with tokenize: true), and the translation to
// each provider format. The estimate counts each message through the count
// cache: the plain cases send the same conversation each time, as a chat
// resends its history, and find every message counted; the "new text"
// cases change every message's text each time, so that every count is
// done afresh.
func BenchmarkLLMRequestPath(b *testing.B) {
	pol := benchPolicy(b)
	for _, c := range []struct {
		pf    convert.Format
		fresh bool
	}{{convert.Chat, false}, {convert.Messages, false}, {convert.Bedrock, false}, {convert.Chat, true}, {convert.Bedrock, true}} {
		name := c.pf.String()
		if c.fresh {
			name += "_new_text"
		}
		b.Run(name, func(b *testing.B) {
			body, stamps := benchChatBody(), []int(nil)
			if c.fresh {
				body, stamps = stampedChatBody()
			}
			var edited, scratch, sent []byte
			var members []aipolicy.Member
			var head convert.Head // the server keeps it in its pooled exchange
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				for k, at := range stamps { // a new text in every message
					strconv.AppendInt(body[:at], int64(10_000_000+(i*len(stamps)+k)%90_000_000), 10)
				}
				out, rej, err := pol.RequestMembers(edited[:0], body, convert.Chat, nil, nil, &members)
				if err != nil || rej != nil {
					b.Fatal(err, rej)
				}
				if len(out) > 0 && &out[0] != &body[0] {
					edited = out
				}
				head, err = headOfMembers(out, members) // as the server reads it
				if err != nil {
					b.Fatal(err)
				}
				model, _ := pol.Alias(head.Model())
				var n int
				if n, scratch = aipolicy.PromptTokens(scratch, out, convert.Chat, tokens.EncodingFor(model)); n < 500 {
					b.Fatal("tokens:", n)
				}
				sent, _, err = convert.Request(sent[:0], convert.Chat, c.pf, out, &convert.Options{Model: model, StreamUsage: true, Head: &head})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// stampedChatBody is benchChatBody with an eight-digit number opening
// every message's text, and where each number is: a benchmark writes a new
// one there before each request.
func stampedChatBody() ([]byte, []int) {
	body := []byte(strings.ReplaceAll(string(benchChatBody()), `"content":"`, `"content":"00000000 `))
	var stamps []int
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`"content":"`))
		if j < 0 {
			return body, stamps
		}
		i += j + len(`"content":"`)
		stamps = append(stamps, i)
	}
}

// llmBenchUpstream answers every chat completion at once.
func llmBenchUpstream(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":2,"total_tokens":902}}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(answer)
	}}
	go srv.Serve(ln) //nolint:errcheck
	tb.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// BenchmarkLLMProxy is one chat completion through the gateway's LLM route
// (alias, default, five regex guards, token metrics) against an upstream
// that answers at once; BenchmarkLLMDirect is the same without the gateway.
func BenchmarkLLMProxy(b *testing.B) {
	up := llmBenchUpstream(b)
	gw := startGatewayBench(b, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        ai:
          modelAliases: {fast: gpt-4o-mini}
          defaults: {temperature: 0.2}
          promptGuard:
            request:
            - regex: {action: mask, rules: [{builtin: ssn}, {builtin: creditCard}, {builtin: phoneNumber}, {builtin: email}, {builtin: caSin}]}
      backends:
      - ai: {name: p, hostOverride: "`+up+`", provider: {openAI: {}}, policies: {backendAuth: {key: bench-key}}}
`, TransportStd)
	benchPOST(b, gw, benchChatBody())
}

func BenchmarkLLMDirect(b *testing.B) { benchPOST(b, llmBenchUpstream(b), benchChatBody()) }

func benchPOST(b *testing.B, addr string, body []byte) {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + addr + "/v1/chat/completions")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.SetBody(body)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
		}
	}
}

// BenchmarkLLMProxyPlain is BenchmarkLLMProxy's request through a plain
// route (no ai backend): the difference is what the LLM work costs.
func BenchmarkLLMProxyPlain(b *testing.B) {
	up := llmBenchUpstream(b)
	gw := startGatewayBench(b, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: "`+up+`"}]
`, TransportStd)
	benchPOST(b, gw, benchChatBody())
}
