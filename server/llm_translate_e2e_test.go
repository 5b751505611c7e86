package server

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMTranslationMatrix drives the real gateway with the official SDKs
// (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages) against
// every provider emulator, plain and streamed. Each case is written once in
// terms every format shares (a conversation of text, image, tool call and
// tool result parts); the clients build their SDK's request from it and read
// their SDK's answer back into it, and what the provider emulator recorded is
// read back from the provider's own wire format, so one comparison holds
// every client/provider pair. Subtests are named client/provider/case; each
// has its own emulator and gateway and runs in parallel. With -v the test
// logs the matrix of outcomes.
func TestLLMTranslationMatrix(t *testing.T) {
	var outcomes sync.Map // "client/provider/case" -> outcome
	for _, cl := range translateClients {
		for _, pr := range translateProviders {
			for _, tc := range translateCases {
				for _, stream := range tc.modes {
					t.Run(cl.name+"/"+pr.name+"/"+tc.column(stream), func(t *testing.T) {
						if tc.skip != nil {
							if why := tc.skip(cl.format); why != "" {
								outcomes.Store(t.Name(), "n/a")
								t.Skip(why)
							}
						}
						t.Parallel()
						x := startTranslation(t, cl, pr, stream)
						defer func() {
							o := cmp.Or(x.outcome, "pass")
							switch {
							case t.Failed():
								o = "FAIL"
							case t.Skipped():
								o = "server-skip"
							}
							outcomes.Store(t.Name(), o)
						}()
						tc.run(x)
					})
				}
			}
		}
	}
	t.Cleanup(func() { logMatrix(t, &outcomes) })
}

// testUsage is what every emulator reports, and every client must see.
var testUsage = llmtest.Usage{InputTokens: 31, OutputTokens: 7}

// redPixel is a 1x1 PNG.
const redPixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

type sdkClient struct {
	name   string
	format convert.Format
}

var translateClients = []sdkClient{{"chat", convert.Chat}, {"responses", convert.Responses}, {"messages", convert.Messages}}

// providerEmulator is what the cases need of an llmtest emulator.
type providerEmulator interface {
	Enqueue(...llmtest.Answer)
	Requests() []llmtest.Request
	Addr() string
}

type translateProvider struct {
	name, model string
	// wire is the format the gateway speaks to the provider for a client of
	// format c.
	wire func(c convert.Format) convert.Format
	// start starts the emulator; provider and auth are its YAML.
	start func(t *testing.T) (emu providerEmulator, provider, auth string)
}

// openAIWire: OpenAI and Azure take Chat, and Responses as it is.
func openAIWire(c convert.Format) convert.Format {
	if c == convert.Responses {
		return convert.Responses
	}
	return convert.Chat
}

func onlyWire(w convert.Format) func(convert.Format) convert.Format {
	return func(convert.Format) convert.Format { return w }
}

var translateProviders = []translateProvider{
	{"openai", "gpt-4o-mini", openAIWire, func(t *testing.T) (providerEmulator, string, string) {
		o := llmtest.NewOpenAI(t)
		return o, `openAI: {}`, `backendAuth: {key: ` + o.APIKey + `}`
	}},
	{"azure", "gpt-4o", openAIWire, func(t *testing.T) (providerEmulator, string, string) {
		a := llmtest.NewAzure(t)
		return a, `azure: {resourceName: emulated, resourceType: openAI}`, `backendAuth: {key: ` + a.APIKey + `}`
	}},
	{"anthropic", "claude-sonnet-4-5", onlyWire(convert.Messages), func(t *testing.T) (providerEmulator, string, string) {
		a := llmtest.NewAnthropic(t)
		return a, `anthropic: {}`, `backendAuth: {key: ` + a.APIKey + `}`
	}},
	{"gemini", "gemini-2.5-flash", onlyWire(convert.Gemini), func(t *testing.T) (providerEmulator, string, string) {
		g := llmtest.NewGemini(t)
		return g, `gemini: {}`, `backendAuth: {key: ` + g.APIKey + `}`
	}},
	{"vertex-gemini", "gemini-2.5-pro", onlyWire(convert.Gemini), startVertex},
	{"vertex-claude", "claude-sonnet-4-5", onlyWire(convert.Messages), startVertex},
	{"bedrock", "anthropic.claude-3-haiku-20240307-v1:0", onlyWire(convert.Bedrock), func(t *testing.T) (providerEmulator, string, string) {
		b := llmtest.NewBedrock(t)
		return b, `bedrock: {region: ` + b.Region + `}`,
			`backendAuth: {aws: {accessKeyId: ` + b.AccessKeyID + `, secretAccessKey: ` + b.SecretAccessKey + `}}`
	}},
}

func startVertex(t *testing.T) (providerEmulator, string, string) {
	v := llmtest.NewVertex(t)
	return v, `vertex: {projectId: ` + v.Project + `, region: ` + v.Location + `}`,
		`backendAuth: {gcp: {credential: {file: ` + v.ServiceAccountFile() + `}}}`
}

// translateCase is one row of the matrix: run for every client and
// provider, in each mode of modes (false: plain, true: streamed).
type translateCase struct {
	name       string
	modes      []bool
	streamOnly bool // the name carries no -stream
	// skip says why a client cannot express the case ("" when it can).
	skip func(client convert.Format) string
	run  func(x *translation)
}

// column is the case's name in a mode: its subtests' last element.
func (tc translateCase) column(stream bool) string {
	if stream && !tc.streamOnly {
		return tc.name + "-stream"
	}
	return tc.name
}

var bothModes = []bool{false, true}

var translateCases = []translateCase{
	{name: "conversation", modes: bothModes, run: caseConversation},
	{name: "tools", modes: bothModes, run: caseTools},
	{name: "length", modes: bothModes, run: caseLength},
	{name: "error", modes: bothModes, run: caseProviderError},
	{name: "stream-error", modes: []bool{true}, streamOnly: true, run: caseStreamError},
	{name: "untranslatable", modes: bothModes, run: caseUntranslatable},
	{name: "bad-bound", modes: bothModes, run: caseBadBound},
	{name: "sampling", modes: []bool{false}, run: caseSampling, skip: func(c convert.Format) string {
		if c == convert.Responses {
			return "Responses has no sampling settings beyond temperature and top_p"
		}
		return ""
	}},
	{name: "tool-result-image", modes: bothModes, run: caseToolResultImage, skip: func(c convert.Format) string {
		if c == convert.Chat {
			return "Chat tool messages carry text only"
		}
		return ""
	}},
}

// caseConversation: a system prompt, a turn of history, and an image.
func caseConversation(x *translation) {
	a := ask{conv: conversation{system: []string{"You are terse."}}.
		with("user", textPart("Hi")).
		with("assistant", textPart("Hello! How can I help?")).
		with("user", textPart("What is in this picture?"), imagePart())}
	x.emu.Enqueue(llmtest.Reply{Text: "A single red pixel.", Usage: testUsage})
	x.expectAnswer(x.mustSend(a), "A single red pixel.", "end")
	x.expectSent(0, a)
}

var weatherTool = toolDef{name: "get_weather", desc: "The current weather in a city.",
	schema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}}

// caseTools: the model calls a tool twice in parallel (after some text);
// the client answers with the results, JSON text, in a second turn; each
// call's id goes to the client and back.
func caseTools(x *translation) {
	first := ask{tools: []toolDef{weatherTool}, conv: conversation{system: []string{"You are a weather bot."}}.
		with("user", textPart("Is it warmer in Paris or in Rome?"))}
	cities := []string{"Paris", "Rome"}
	var calls []llmtest.ToolCall
	for i, city := range cities {
		calls = append(calls, llmtest.ToolCall{ID: providerCallID(x.wire, i), Name: "get_weather", Arguments: `{"city":"` + city + `"}`})
	}
	x.emu.Enqueue(llmtest.Reply{Text: "Let me check.", ToolCalls: calls, Usage: testUsage})
	ans := x.mustSend(first)
	x.expectAnswer(ans, "Let me check.", "tool")
	x.expectSent(0, first)
	if len(ans.calls) != len(calls) {
		x.t.Fatalf("tool calls %+v, want %d", ans.calls, len(calls))
	}
	turn := []part{textPart("Let me check.")}
	var results []part
	for i, c := range ans.calls {
		want := calls[i]
		if c.name != want.Name || c.args != canonText(want.Arguments) || c.id == "" || (want.ID != "" && c.id != want.ID) {
			x.t.Errorf("tool call %d: %+v, want %s %s with id %q", i, c, want.Name, want.Arguments, cmp.Or(want.ID, "(any)"))
		}
		if i > 0 && c.id == ans.calls[0].id {
			x.t.Errorf("tool calls share the id %q", c.id)
		}
		turn = append(turn, c)
		result := `{"city":"` + cities[i] + `","temp_c":` + strconv.Itoa(18+i*6) + `}`
		results = append(results, part{kind: "result", id: c.id, name: c.name, content: []part{textPart(result)}})
	}

	second := ask{tools: first.tools, conv: first.conv.with("assistant", turn...).with("user", results...)}
	x.emu.Enqueue(llmtest.Reply{Text: "Rome, at 24°C.", Usage: testUsage})
	x.expectAnswer(x.mustSend(second), "Rome, at 24°C.", "end")
	x.expectSent(1, second)
}

// providerCallID is the id an emulator gives its i-th tool call, in the
// provider's style; Gemini gives none, so the gateway makes one.
func providerCallID(w convert.Format, i int) string {
	n := strconv.Itoa(i + 1)
	switch w {
	case convert.Messages:
		return "toolu_e2e0" + n
	case convert.Bedrock:
		return "tooluse_e2e0" + n
	case convert.Gemini:
		return ""
	}
	return "call_e2e0" + n
}

// caseLength: the output bound reaches the provider in its field, and its
// stop reason reaches the client in the client's words.
func caseLength(x *translation) {
	a := ask{maxTokens: 7, conv: conversation{}.with("user", textPart("Tell me a long story."))}
	stop := map[convert.Format]string{convert.Chat: "length", convert.Responses: "max_output_tokens",
		convert.Messages: "max_tokens", convert.Gemini: "MAX_TOKENS", convert.Bedrock: "max_tokens"}[x.wire]
	x.emu.Enqueue(llmtest.Reply{Text: "Once upon a time", StopReason: stop, Usage: testUsage})
	x.expectAnswer(x.mustSend(a), "Once upon a time", "length")
	x.expectSent(0, a)
}

func simpleAsk() ask { return ask{conv: conversation{}.with("user", textPart("Hello?"))} }

// caseProviderError: a provider's error reaches the client in its SDK's
// error type, status and message kept.
func caseProviderError(x *translation) {
	x.emu.Enqueue(llmtest.Failure{Status: 429, Message: "quota exhausted for this key"})
	_, err := x.send(simpleAsk())
	x.expectAPIError(err, 429, "quota exhausted for this key")
}

// caseStreamError: an error event mid-stream ends the client's stream with
// an error, after the text sent before it.
func caseStreamError(x *translation) {
	x.emu.Enqueue(llmtest.Reply{Chunks: []string{"Partial ", "answer"}, Usage: testUsage,
		StreamError: &llmtest.Failure{Message: "capacity lost mid-stream"}})
	ans, err := x.send(simpleAsk())
	if err == nil || !strings.Contains(err.Error(), "capacity lost mid-stream") {
		x.t.Errorf("stream error %v, want one saying %q", err, "capacity lost mid-stream")
	}
	if ans.text != "Partial answer" {
		x.t.Errorf("text before the error %q, want %q", ans.text, "Partial answer")
	}
	if x.cutAfterError != nil {
		x.t.Errorf("after the error event the stream was cut (%v), not ended", x.cutAfterError)
	}
}

// untranslatable is, per client, features only its own format has: the
// raw members that ask for one, the words a refusal must name, and what a
// provider of the same format must receive.
var untranslatable = map[convert.Format][]struct {
	extra            map[string]any
	refusal, present string
}{
	convert.Chat: {{map[string]any{"response_format": map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": "answer", "schema": map[string]any{"type": "object"}}}},
		"response_format", `"json_schema"`},
		// Log probabilities: no other format answers with them.
		{map[string]any{"logprobs": true}, "logprobs", `"logprobs":true`},
		{map[string]any{"top_logprobs": 3}, "top_logprobs", `"top_logprobs":3`},
		{map[string]any{"web_search_options": map[string]any{"search_context_size": "low"}}, "web_search_options", `"search_context_size"`},
	},
	convert.Messages: {{map[string]any{"tools": []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}}},
		`server tool "web_search_20250305"`, `"web_search_20250305"`},
		{map[string]any{"mcp_servers": []any{map[string]any{"type": "url", "url": "https://mcp.example.com/sse", "name": "docs"}}},
			"mcp_servers", `mcp.example.com`}},
	convert.Responses: {
		{map[string]any{"tools": []any{map[string]any{"type": "web_search"}}}, `tool type "web_search"`, `"web_search"`},
		// State stored at OpenAI: another provider would answer the input
		// alone.
		{map[string]any{"conversation": "conv_123"}, "conversation", `"conv_123"`},
		{map[string]any{"conversation": map[string]any{"id": "conv_456"}}, "conversation", `"conv_456"`},
		{map[string]any{"prompt": map[string]any{"id": "pmpt_123", "variables": map[string]any{"city": "Paris"}}}, "prompt", `"pmpt_123"`},
		{map[string]any{"top_logprobs": 2}, "top_logprobs", `"top_logprobs":2`},
	},
}

// caseUntranslatable: a feature the provider's format lacks is a 400 naming
// it, and nothing reaches the provider; a provider of the client's own
// format receives it as it was sent.
func caseUntranslatable(x *translation) {
	for i, f := range untranslatable[x.client] {
		a := simpleAsk()
		a.extra = f.extra
		if x.wire != x.client {
			_, err := x.send(a)
			x.expectRefused(err, f.refusal)
			continue
		}
		x.emu.Enqueue(llmtest.Reply{Text: "ok", Usage: testUsage})
		ans, err := x.send(a)
		if err != nil {
			x.t.Fatalf("same-format request: %v", err)
		}
		x.expectAnswer(ans, "ok", "end")
		if body := string(x.emu.Requests()[i].Body); !strings.Contains(body, f.present) {
			x.t.Errorf("the provider did not get %s: %s", f.present, body)
		}
	}
}

// caseBadBound: an output bound below 1 is a 400 naming it in every
// format, translated or not (read as none, it became the default bound
// or none), and nothing reaches the provider.
func caseBadBound(x *translation) {
	for _, extra := range map[convert.Format][]map[string]any{
		convert.Chat:      {{"max_tokens": -5}, {"max_tokens": 0}, {"max_completion_tokens": 0}},
		convert.Messages:  {{"max_tokens": 0}, {"max_tokens": -5}},
		convert.Responses: {{"max_output_tokens": 0}, {"max_output_tokens": -1}},
	}[x.client] {
		a := simpleAsk()
		a.extra = extra
		_, err := x.send(a)
		for name := range extra {
			x.expectRefused(err, `"`+name+`" must be at least 1`)
		}
	}
}

// caseSampling: the sampling settings a provider's format has no
// counterpart for are the only members dropped (convert's package comment
// lists them): Chat's seed and penalties reach Gemini as its own, and
// nothing else; logit_bias (OpenAI token ids) reaches only OpenAI;
// Messages' top_k reaches Gemini and Bedrock, and no Chat provider.
func caseSampling(x *translation) {
	a := simpleAsk()
	var has, hasNot []string
	switch x.client {
	case convert.Chat:
		a.extra = map[string]any{"seed": 4, "frequency_penalty": 1, "presence_penalty": 0.5, "logit_bias": map[string]any{"1": 5}}
		switch x.wire {
		case convert.Chat:
			has = []string{`"seed":4`, `"frequency_penalty":1`, `"presence_penalty":0.5`, `"logit_bias"`}
		case convert.Gemini:
			has, hasNot = []string{`"seed":4`, `"frequencyPenalty":1`, `"presencePenalty":0.5`}, []string{"logit"}
		default:
			hasNot = []string{"seed", "enalty", "logit"}
		}
	case convert.Messages:
		a.extra = map[string]any{"top_k": 40}
		switch x.wire {
		case convert.Messages, convert.Bedrock:
			has = []string{`"top_k":40`}
		case convert.Gemini:
			has = []string{`"topK":40`}
		default:
			hasNot = []string{"top_k", "topK"}
		}
	}
	x.emu.Enqueue(llmtest.Reply{Text: "ok", Usage: testUsage})
	ans, err := x.send(a)
	if err != nil {
		x.t.Fatalf("send: %v", err)
	}
	x.expectAnswer(ans, "ok", "end")
	body := string(x.emu.Requests()[0].Body)
	for _, w := range has {
		if !strings.Contains(body, w) {
			x.t.Errorf("the provider did not get %s: %s", w, body)
		}
	}
	for _, w := range hasNot {
		if strings.Contains(body, w) {
			x.t.Errorf("the provider got %s: %s", w, body)
		}
	}
}

var chartTool = toolDef{name: "plot", desc: "Plots a city's temperatures.",
	schema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}

// caseToolResultImage: a tool result holding an image goes where the
// provider takes one (Anthropic, Bedrock, Responses) and is refused where it
// does not (Chat tool messages and Gemini function responses carry text).
func caseToolResultImage(x *translation) {
	a := ask{tools: []toolDef{chartTool}, conv: conversation{}.
		with("user", textPart("Plot today's temperatures in Paris.")).
		with("assistant", part{kind: "call", id: "call_plot01", name: "plot", args: canonText(`{"city":"Paris"}`)}).
		with("user", part{kind: "result", id: "call_plot01", name: "plot", content: []part{textPart("Chart attached."), imagePart()}})}
	x.emu.Enqueue(llmtest.Reply{Text: "Warm all day.", Usage: testUsage})
	ans, err := x.send(a)
	if x.wire == convert.Chat || x.wire == convert.Gemini {
		x.expectRefused(err, "tool result's non-text content")
		return
	}
	if err != nil {
		x.t.Fatalf("send: %v", err)
	}
	x.expectAnswer(ans, "Warm all day.", "end")
	x.expectSent(0, a)
}

// translation is one subtest: a client of one format, a provider emulator
// and the gateway between them.
type translation struct {
	t       *testing.T
	client  convert.Format
	wire    convert.Format
	emu     providerEmulator
	model   string
	stream  bool
	oa      openai.Client
	an      anthropic.Client
	outcome string // "refused" when the case ended in an expected refusal
	// cutAfterError is the transport error that followed a Responses
	// stream's error event (nil when the stream then ended cleanly): the
	// Responses SDK reads on after that event, the others stop at it.
	cutAfterError error
}

func startTranslation(t *testing.T, cl sdkClient, pr translateProvider, stream bool) *translation {
	emu, provider, auth := pr.start(t)
	tg := startGateway(t, llmConfig(provider, emu.Addr(), auth, ""), nil)
	return &translation{t: t, client: cl.format, wire: pr.wire(cl.format), emu: emu, model: pr.model,
		stream: stream, oa: openaiVia(tg), an: anthropicVia(tg)}
}

// ask is a request in shared terms.
type ask struct {
	conv      conversation
	tools     []toolDef
	maxTokens int64
	// extra are raw members set on the client's body (features under test).
	extra map[string]any
}

type toolDef struct {
	name, desc string
	schema     map[string]any
}

func (d toolDef) render() string { return d.name + ": " + d.desc + " " + canon(d.schema) }

// answer is a client's parsed answer in shared terms.
type answer struct {
	text          string
	calls         []part
	stop          string // end, length, tool; else the client's own word
	input, output int64
}

// part is a piece of a turn: text, an image, a tool call or a tool result.
type part struct {
	kind        string // text, image, call, result; anything else is unexpected
	text        string
	media, data string // an image's MIME type and base64 data
	id, name    string // a call's; a result's call id and (Gemini) name
	args        string // a call's arguments, canonical JSON
	content     []part // a result's
}

func textPart(s string) part { return part{kind: "text", text: s} }

func imagePart() part { return part{kind: "image", media: "image/png", data: redPixel} }

func (p part) dataURL() string { return "data:" + p.media + ";base64," + p.data }

type turn struct {
	role  string
	parts []part
}

type conversation struct {
	system []string
	turns  []turn
}

// with returns c with a turn added (c is left as it was).
func (c conversation) with(role string, parts ...part) conversation {
	c.turns = append(slices.Clip(c.turns), turn{role, parts})
	return c
}

// add appends parts to the conversation as role's, joining a turn of the
// same role (how providers that require alternation see it).
func (c *conversation) add(role string, parts ...part) {
	if len(parts) == 0 {
		return
	}
	if n := len(c.turns); n > 0 && c.turns[n-1].role == role {
		c.turns[n-1].parts = append(c.turns[n-1].parts, parts...)
		return
	}
	c.turns = append(c.turns, turn{role, parts})
}

// render is c as lines to compare. byName: tool calls and results are
// matched by name (Gemini), not by id.
func (c conversation) render(byName bool) string {
	var b strings.Builder
	for _, s := range c.system {
		fmt.Fprintf(&b, "system: %q\n", s)
	}
	for _, tn := range c.turns {
		fmt.Fprintf(&b, "%s: %s\n", tn.role, renderParts(tn.parts, byName))
	}
	return b.String()
}

func renderParts(ps []part, byName bool) string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		ref := p.name + "#" + p.id
		if byName {
			ref = p.name
		}
		switch p.kind {
		case "text":
			out = append(out, strconv.Quote(p.text))
		case "image":
			out = append(out, "image("+p.media+" "+p.data+")")
		case "call":
			out = append(out, "call "+ref+" "+p.args)
		case "result":
			if !byName {
				ref = "#" + p.id
			}
			out = append(out, "result "+ref+" ["+renderParts(p.content, byName)+"]")
		default:
			out = append(out, "unexpected "+p.kind)
		}
	}
	return strings.Join(out, " ")
}

// send sends a as the client's SDK does, plain or streamed, and returns
// its answer (as far as it got when err is set).
func (x *translation) send(a ask) (answer, error) {
	switch x.client {
	case convert.Chat:
		return x.sendChat(a)
	case convert.Messages:
		return x.sendMessages(a)
	}
	return x.sendResponses(a)
}

func (x *translation) mustSend(a ask) answer {
	x.t.Helper()
	ans, err := x.send(a)
	if err != nil {
		x.t.Fatalf("send: %v", err)
	}
	return ans
}

// expectAnswer checks the answer's text, stop reason and usage.
func (x *translation) expectAnswer(ans answer, text, stop string) {
	x.t.Helper()
	if ans.text != text || ans.stop != stop {
		x.t.Errorf("answer %q stop %q, want %q stop %q", ans.text, ans.stop, text, stop)
	}
	if ans.input != int64(testUsage.InputTokens) || ans.output != int64(testUsage.OutputTokens) {
		x.t.Errorf("usage %d in %d out, want %d in %d out", ans.input, ans.output, testUsage.InputTokens, testUsage.OutputTokens)
	}
}

// expectSent checks the i-th request the provider received against a, read
// back from the provider's format.
func (x *translation) expectSent(i int, a ask) {
	x.t.Helper()
	reqs := x.emu.Requests()
	if len(reqs) <= i {
		x.t.Fatalf("the provider received %d requests, want %d", len(reqs), i+1)
	}
	got := readWire(x.wire, reqs[i].JSON())
	byName := x.wire == convert.Gemini
	if g, w := got.conv.render(byName), a.conv.render(byName); g != w {
		x.t.Errorf("the provider received\n%s\nwant\n%s\nbody %s", g, w, reqs[i].Body)
	}
	var tools []string
	for _, d := range a.tools {
		tools = append(tools, d.render())
	}
	if g, w := strings.Join(got.tools, "\n"), strings.Join(tools, "\n"); g != w {
		x.t.Errorf("the provider's tools\n%s\nwant\n%s", g, w)
	}
	if a.maxTokens > 0 && got.maxTokens != a.maxTokens {
		x.t.Errorf("the provider's output bound %d, want %d", got.maxTokens, a.maxTokens)
	}
}

// expectAPIError checks an error in the client SDK's own error type, with
// status and a message that says what.
func (x *translation) expectAPIError(err error, status int, says string) {
	x.t.Helper()
	var oe *openai.Error
	var ae *anthropic.Error
	switch {
	case x.client != convert.Messages && errors.As(err, &oe):
		if oe.StatusCode != status || !strings.Contains(oe.Message, says) {
			x.t.Errorf("error %d %q, want %d saying %q (%s)", oe.StatusCode, oe.Message, status, says, oe.RawJSON())
		}
	case x.client == convert.Messages && errors.As(err, &ae):
		var body struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(ae.RawJSON()), &body)
		typ := map[int]string{400: "invalid_request_error", 429: "rate_limit_error"}[status]
		if ae.StatusCode != status || string(ae.Type()) != typ || !strings.Contains(body.Error.Message, says) {
			x.t.Errorf("error %d type %q %s, want %d %s saying %q", ae.StatusCode, ae.Type(), ae.RawJSON(), status, typ, says)
		}
	default:
		x.t.Errorf("error %v, want the client's API error %d saying %q", err, status, says)
	}
}

// expectRefused: a 400 naming the feature, and nothing sent.
func (x *translation) expectRefused(err error, feature string) {
	x.t.Helper()
	x.expectAPIError(err, 400, feature)
	if n := len(x.emu.Requests()); n != 0 {
		x.t.Errorf("the provider received %d requests for a refused one", n)
	}
	x.outcome = "refused"
}

// jsonSets are the request options that set a's raw members.
func jsonSets[O any](extra map[string]any, set func(string, any) O) []O {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	opts := make([]O, 0, len(keys))
	for _, k := range keys {
		opts = append(opts, set(k, extra[k]))
	}
	return opts
}

// The OpenAI SDK, Chat Completions.

func (x *translation) sendChat(a ask) (answer, error) {
	p := chatParams(x.model, a)
	opts := jsonSets(a.extra, option.WithJSONSet)
	if !x.stream {
		resp, err := x.oa.Chat.Completions.New(llmCtx(x.t), p, opts...)
		if err != nil {
			return answer{}, err
		}
		return chatAnswer(resp), nil
	}
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	s := x.oa.Chat.Completions.NewStreaming(llmCtx(x.t), p, opts...)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			x.t.Errorf("the SDK could not accumulate chunk %s", s.Current().RawJSON())
		}
	}
	return chatAnswer(&acc.ChatCompletion), s.Err()
}

func chatParams(model string, a ask) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: model}
	for _, s := range a.conv.system {
		p.Messages = append(p.Messages, openai.SystemMessage(s))
	}
	for _, tn := range a.conv.turns {
		if tn.role == "assistant" {
			m := openai.ChatCompletionAssistantMessageParam{}
			for _, pt := range tn.parts {
				switch pt.kind {
				case "text":
					m.Content.OfString = openai.String(pt.text)
				case "call":
					m.ToolCalls = append(m.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: pt.id,
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: pt.name, Arguments: pt.args}}})
				}
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &m})
			continue
		}
		var parts []openai.ChatCompletionContentPartUnionParam
		for _, pt := range tn.parts {
			switch pt.kind {
			case "result":
				p.Messages = append(p.Messages, openai.ToolMessage(pt.content[0].text, pt.id))
			case "text":
				parts = append(parts, openai.TextContentPart(pt.text))
			case "image":
				parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: pt.dataURL()}))
			}
		}
		if len(parts) > 0 {
			p.Messages = append(p.Messages, openai.UserMessage(parts))
		}
	}
	for _, d := range a.tools {
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: d.name, Description: openai.String(d.desc), Parameters: d.schema}))
	}
	if a.maxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(a.maxTokens)
	}
	return p
}

func chatAnswer(c *openai.ChatCompletion) answer {
	ans := answer{input: c.Usage.PromptTokens, output: c.Usage.CompletionTokens}
	if len(c.Choices) == 0 {
		return ans
	}
	ch := c.Choices[0]
	ans.text = ch.Message.Content
	for _, tc := range ch.Message.ToolCalls {
		ans.calls = append(ans.calls, part{kind: "call", id: tc.ID, name: tc.Function.Name, args: canonText(tc.Function.Arguments)})
	}
	ans.stop = map[string]string{"stop": "end", "length": "length", "tool_calls": "tool"}[ch.FinishReason]
	ans.stop = cmp.Or(ans.stop, ch.FinishReason)
	return ans
}

// The OpenAI SDK, Responses.

func (x *translation) sendResponses(a ask) (answer, error) {
	p := responsesParams(x.model, a)
	opts := jsonSets(a.extra, option.WithJSONSet)
	if !x.stream {
		resp, err := x.oa.Responses.New(llmCtx(x.t), p, opts...)
		if err != nil {
			return answer{}, err
		}
		return responsesAnswer(resp), nil
	}
	s := x.oa.Responses.NewStreaming(llmCtx(x.t), p, opts...)
	var text strings.Builder
	args := map[string]string{} // function call item id -> arguments from deltas
	var final *responses.Response
	var eventErr error
	seq := int64(0) // OpenAI numbers a stream's events from 0, one by one
	for s.Next() {
		if ev := s.Current(); ev.SequenceNumber != seq {
			x.t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
			seq = ev.SequenceNumber
		}
		seq++
		switch ev := s.Current(); ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			args[ev.ItemID] += ev.Delta
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			final = &r
		case "error":
			eventErr = fmt.Errorf("error event %s: %s", ev.Code, ev.Message)
		}
	}
	if eventErr != nil && s.Err() != nil {
		x.cutAfterError = s.Err()
	}
	err := cmp.Or(eventErr, s.Err())
	if final == nil {
		if err == nil {
			err = errors.New("the stream ended without its last event")
		}
		return answer{text: text.String()}, err
	}
	ans := responsesAnswer(final)
	if ans.text != text.String() {
		x.t.Errorf("streamed text %q, final response's %q", text.String(), ans.text)
	}
	for _, it := range final.Output {
		if it.Type == "function_call" && args[it.ID] != it.Arguments.OfString {
			x.t.Errorf("streamed arguments %q of %s, final response's %q", args[it.ID], it.ID, it.Arguments.OfString)
		}
	}
	return ans, err
}

func responsesParams(model string, a ask) responses.ResponseNewParams {
	p := responses.ResponseNewParams{Model: model}
	if len(a.conv.system) > 0 {
		p.Instructions = openai.String(strings.Join(a.conv.system, "\n"))
	}
	var items responses.ResponseInputParam
	for _, tn := range a.conv.turns {
		var content responses.ResponseInputMessageContentListParam
		flush := func() {
			if len(content) > 0 {
				items = append(items, responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRole(tn.role)))
				content = nil
			}
		}
		for _, pt := range tn.parts {
			switch pt.kind {
			case "text":
				if tn.role == "assistant" {
					items = append(items, responses.ResponseInputItemParamOfMessage(pt.text, responses.EasyInputMessageRoleAssistant))
					continue
				}
				content = append(content, responses.ResponseInputContentParamOfInputText(pt.text))
			case "image":
				img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)
				img.OfInputImage.ImageURL = openai.String(pt.dataURL())
				content = append(content, img)
			case "call":
				flush()
				items = append(items, responses.ResponseInputItemParamOfFunctionCall(pt.args, pt.id, pt.name))
			case "result":
				flush()
				items = append(items, responsesResult(pt))
			}
		}
		flush()
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	for _, d := range a.tools {
		tl := responses.ToolParamOfFunction(d.name, d.schema, false)
		tl.OfFunction.Description = openai.String(d.desc)
		p.Tools = append(p.Tools, tl)
	}
	if a.maxTokens > 0 {
		p.MaxOutputTokens = openai.Int(a.maxTokens)
	}
	return p
}

// responsesResult is a function_call_output item: its text, or a list of
// text and images.
func responsesResult(pt part) responses.ResponseInputItemUnionParam {
	var it responses.ResponseInputItemUnionParam
	if len(pt.content) == 1 && pt.content[0].kind == "text" {
		it = responses.ResponseInputItemParamOfFunctionCallOutput(pt.content[0].text)
	} else {
		var list responses.ResponseFunctionCallOutputItemListParam
		for _, c := range pt.content {
			if c.kind == "text" {
				list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputText: &responses.ResponseInputTextContentParam{Text: c.text}})
			} else {
				list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{ImageURL: openai.String(c.dataURL())}})
			}
		}
		it = responses.ResponseInputItemParamOfFunctionCallOutput(list)
	}
	it.OfFunctionCallOutput.CallID = openai.String(pt.id)
	return it
}

func responsesAnswer(r *responses.Response) answer {
	ans := answer{input: r.Usage.InputTokens, output: r.Usage.OutputTokens}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				if c.Type == "output_text" {
					ans.text += c.Text
				}
			}
		case "function_call":
			ans.calls = append(ans.calls, part{kind: "call", id: it.CallID, name: it.Name, args: canonText(it.Arguments.OfString)})
		}
	}
	switch {
	case r.Status == "incomplete" && r.IncompleteDetails.Reason == "max_output_tokens":
		ans.stop = "length"
	case r.Status == "completed" && len(ans.calls) > 0:
		ans.stop = "tool"
	case r.Status == "completed":
		ans.stop = "end"
	default:
		ans.stop = string(r.Status) + " " + string(r.IncompleteDetails.Reason)
	}
	return ans
}

// The Anthropic SDK, Messages.

func (x *translation) sendMessages(a ask) (answer, error) {
	p := messagesParams(x.model, a)
	opts := jsonSets(a.extra, anthropicopt.WithJSONSet)
	if !x.stream {
		msg, err := x.an.Messages.New(llmCtx(x.t), p, opts...)
		if err != nil {
			return answer{}, err
		}
		return messagesAnswer(msg), nil
	}
	s := x.an.Messages.NewStreaming(llmCtx(x.t), p, opts...)
	var acc anthropic.Message
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			return messagesAnswer(&acc), err
		}
	}
	return messagesAnswer(&acc), s.Err()
}

func messagesParams(model string, a ask) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: cmp.Or(a.maxTokens, 1024)}
	for _, s := range a.conv.system {
		p.System = append(p.System, anthropic.TextBlockParam{Text: s})
	}
	for _, tn := range a.conv.turns {
		var blocks []anthropic.ContentBlockParamUnion
		for _, pt := range tn.parts {
			switch pt.kind {
			case "text":
				blocks = append(blocks, anthropic.NewTextBlock(pt.text))
			case "image":
				blocks = append(blocks, anthropic.NewImageBlockBase64(pt.media, pt.data))
			case "call":
				blocks = append(blocks, anthropic.NewToolUseBlock(pt.id, json.RawMessage(pt.args), pt.name))
			case "result":
				r := anthropic.ToolResultBlockParam{ToolUseID: pt.id}
				for _, c := range pt.content {
					if c.kind == "text" {
						r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: c.text}})
					} else {
						r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{
							Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
								Data: c.data, MediaType: anthropic.Base64ImageSourceMediaType(c.media)}}}})
					}
				}
				blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &r})
			}
		}
		if tn.role == "assistant" {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
		}
	}
	for _, d := range a.tools {
		schema := anthropic.ToolInputSchemaParam{Properties: d.schema["properties"]}
		for _, r := range jarr(d.schema["required"]) {
			schema.Required = append(schema.Required, r.(string))
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name: d.name, Description: anthropic.String(d.desc), InputSchema: schema}})
	}
	return p
}

func messagesAnswer(m *anthropic.Message) answer {
	ans := answer{input: m.Usage.InputTokens, output: m.Usage.OutputTokens}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			ans.text += b.Text
		case "tool_use":
			ans.calls = append(ans.calls, part{kind: "call", id: b.ID, name: b.Name, args: canonText(string(b.Input))})
		}
	}
	stop := string(m.StopReason)
	ans.stop = cmp.Or(map[string]string{"end_turn": "end", "max_tokens": "length", "tool_use": "tool"}[stop], stop)
	return ans
}

// What a provider received, read back from its wire format.

type wireView struct {
	conv      conversation
	tools     []string // toolDef.render of each
	maxTokens int64
}

func readWire(w convert.Format, body map[string]any) wireView {
	switch w {
	case convert.Chat:
		return readChatWire(body)
	case convert.Responses:
		return readResponsesWire(body)
	case convert.Messages:
		return readMessagesWire(body)
	case convert.Gemini:
		return readGeminiWire(body)
	}
	return readBedrockWire(body)
}

func readChatWire(b map[string]any) (v wireView) {
	for _, m := range jarr(b["messages"]) {
		content := jget(m, "content")
		switch jstr(m, "role") {
		case "system", "developer":
			for _, p := range chatContent(content) {
				v.conv.system = append(v.conv.system, p.text)
			}
		case "user":
			v.conv.add("user", chatContent(content)...)
		case "assistant":
			ps := chatContent(content)
			for _, c := range jarr(jget(m, "tool_calls")) {
				ps = append(ps, part{kind: "call", id: jstr(c, "id"), name: jstr(c, "function", "name"),
					args: canonText(jstr(c, "function", "arguments"))})
			}
			v.conv.add("assistant", ps...)
		case "tool":
			v.conv.add("user", part{kind: "result", id: jstr(m, "tool_call_id"), content: chatContent(content)})
		default:
			v.conv.add("user", part{kind: "role " + jstr(m, "role")})
		}
	}
	for _, tl := range jarr(b["tools"]) {
		v.tools = append(v.tools, renderWireTool(jstr(tl, "function", "name"), jstr(tl, "function", "description"), jget(tl, "function", "parameters")))
	}
	v.maxTokens = max(jint(b, "max_completion_tokens"), jint(b, "max_tokens"))
	return v
}

// chatContent reads a string, or text and image_url parts.
func chatContent(c any) []part {
	if s, ok := c.(string); ok {
		if s == "" {
			return nil
		}
		return []part{textPart(s)}
	}
	var ps []part
	for _, p := range jarr(c) {
		switch jstr(p, "type") {
		case "text":
			ps = append(ps, textPart(jstr(p, "text")))
		case "image_url":
			ps = append(ps, dataURLPart(jstr(p, "image_url", "url")))
		default:
			ps = append(ps, part{kind: jstr(p, "type")})
		}
	}
	return ps
}

func dataURLPart(u string) part {
	meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	media, enc, _ := strings.Cut(meta, ";")
	if !ok || !strings.HasPrefix(u, "data:") || enc != "base64" {
		return part{kind: "image", media: "url", data: u}
	}
	return part{kind: "image", media: media, data: data}
}

func readResponsesWire(b map[string]any) (v wireView) {
	if s := jstr(b, "instructions"); s != "" {
		v.conv.system = append(v.conv.system, s)
	}
	if s, ok := b["input"].(string); ok {
		v.conv.add("user", textPart(s))
	}
	for _, it := range jarr(b["input"]) {
		switch typ := cmp.Or(jstr(it, "type"), "message"); typ {
		case "message":
			ps := responsesContent(jget(it, "content"))
			if r := jstr(it, "role"); r == "system" || r == "developer" {
				for _, p := range ps {
					v.conv.system = append(v.conv.system, p.text)
				}
			} else {
				v.conv.add(r, ps...)
			}
		case "function_call":
			v.conv.add("assistant", part{kind: "call", id: jstr(it, "call_id"), name: jstr(it, "name"), args: canonText(jstr(it, "arguments"))})
		case "function_call_output":
			v.conv.add("user", part{kind: "result", id: jstr(it, "call_id"), content: responsesContent(jget(it, "output"))})
		default:
			v.conv.add("user", part{kind: typ})
		}
	}
	for _, tl := range jarr(b["tools"]) {
		if jstr(tl, "type") != "function" {
			v.tools = append(v.tools, "built-in "+jstr(tl, "type"))
			continue
		}
		v.tools = append(v.tools, renderWireTool(jstr(tl, "name"), jstr(tl, "description"), jget(tl, "parameters")))
	}
	v.maxTokens = jint(b, "max_output_tokens")
	return v
}

func responsesContent(c any) []part {
	if s, ok := c.(string); ok {
		return []part{textPart(s)}
	}
	var ps []part
	for _, p := range jarr(c) {
		switch typ := jstr(p, "type"); typ {
		case "input_text", "output_text":
			ps = append(ps, textPart(jstr(p, "text")))
		case "input_image":
			ps = append(ps, dataURLPart(jstr(p, "image_url")))
		default:
			ps = append(ps, part{kind: typ})
		}
	}
	return ps
}

func readMessagesWire(b map[string]any) (v wireView) {
	if s, ok := b["system"].(string); ok {
		v.conv.system = append(v.conv.system, s)
	}
	for _, s := range jarr(b["system"]) {
		v.conv.system = append(v.conv.system, jstr(s, "text"))
	}
	for _, m := range jarr(b["messages"]) {
		v.conv.add(jstr(m, "role"), messagesContent(jget(m, "content"))...)
	}
	for _, tl := range jarr(b["tools"]) {
		if typ := jstr(tl, "type"); typ != "" && typ != "custom" {
			v.tools = append(v.tools, "built-in "+typ)
			continue
		}
		v.tools = append(v.tools, renderWireTool(jstr(tl, "name"), jstr(tl, "description"), jget(tl, "input_schema")))
	}
	v.maxTokens = jint(b, "max_tokens")
	return v
}

func messagesContent(c any) []part {
	if s, ok := c.(string); ok {
		return []part{textPart(s)}
	}
	var ps []part
	for _, bl := range jarr(c) {
		switch typ := jstr(bl, "type"); typ {
		case "text":
			ps = append(ps, textPart(jstr(bl, "text")))
		case "image":
			if jstr(bl, "source", "type") == "base64" {
				ps = append(ps, part{kind: "image", media: jstr(bl, "source", "media_type"), data: jstr(bl, "source", "data")})
			} else {
				ps = append(ps, part{kind: "image", media: "url", data: jstr(bl, "source", "url")})
			}
		case "tool_use":
			ps = append(ps, part{kind: "call", id: jstr(bl, "id"), name: jstr(bl, "name"), args: canon(jget(bl, "input"))})
		case "tool_result":
			ps = append(ps, part{kind: "result", id: jstr(bl, "tool_use_id"), content: messagesContent(jget(bl, "content"))})
		default:
			ps = append(ps, part{kind: typ})
		}
	}
	return ps
}

func readGeminiWire(b map[string]any) (v wireView) {
	for _, p := range jarr(jget(b, "systemInstruction", "parts")) {
		v.conv.system = append(v.conv.system, jstr(p, "text"))
	}
	for _, c := range jarr(b["contents"]) {
		role := jstr(c, "role")
		if role == "model" {
			role = "assistant"
		}
		var ps []part
		for _, p := range jarr(jget(c, "parts")) {
			pm, _ := p.(map[string]any)
			switch {
			case pm["text"] != nil:
				ps = append(ps, textPart(jstr(p, "text")))
			case pm["inlineData"] != nil:
				ps = append(ps, part{kind: "image", media: jstr(p, "inlineData", "mimeType"), data: jstr(p, "inlineData", "data")})
			case pm["functionCall"] != nil:
				ps = append(ps, part{kind: "call", id: jstr(p, "functionCall", "id"), name: jstr(p, "functionCall", "name"), args: canon(jget(p, "functionCall", "args"))})
			case pm["functionResponse"] != nil:
				r := jget(p, "functionResponse", "response")
				out := cmp.Or(jget(r, "content"), jget(r, "error"))
				text, ok := out.(string)
				if !ok {
					text = canon(out)
				}
				ps = append(ps, part{kind: "result", name: jstr(p, "functionResponse", "name"), content: []part{textPart(text)}})
			default:
				ps = append(ps, part{kind: canon(p)})
			}
		}
		v.conv.add(role, ps...)
	}
	for _, tl := range jarr(b["tools"]) {
		for _, f := range jarr(jget(tl, "functionDeclarations")) {
			v.tools = append(v.tools, renderWireTool(jstr(f, "name"), jstr(f, "description"), cmp.Or(jget(f, "parametersJsonSchema"), jget(f, "parameters"))))
		}
	}
	v.maxTokens = jint(b, "generationConfig", "maxOutputTokens")
	return v
}

func readBedrockWire(b map[string]any) (v wireView) {
	for _, s := range jarr(b["system"]) {
		if t := jstr(s, "text"); t != "" {
			v.conv.system = append(v.conv.system, t)
		}
	}
	for _, m := range jarr(b["messages"]) {
		v.conv.add(jstr(m, "role"), bedrockContent(jget(m, "content"))...)
	}
	for _, tl := range jarr(jget(b, "toolConfig", "tools")) {
		if jget(tl, "toolSpec") == nil {
			continue // a cache point
		}
		v.tools = append(v.tools, renderWireTool(jstr(tl, "toolSpec", "name"), jstr(tl, "toolSpec", "description"), jget(tl, "toolSpec", "inputSchema", "json")))
	}
	v.maxTokens = jint(b, "inferenceConfig", "maxTokens")
	return v
}

func bedrockContent(c any) []part {
	var ps []part
	for _, bl := range jarr(c) {
		bm, _ := bl.(map[string]any)
		switch {
		case bm["text"] != nil:
			ps = append(ps, textPart(jstr(bl, "text")))
		case bm["image"] != nil:
			ps = append(ps, part{kind: "image", media: "image/" + jstr(bl, "image", "format"), data: jstr(bl, "image", "source", "bytes")})
		case bm["toolUse"] != nil:
			ps = append(ps, part{kind: "call", id: jstr(bl, "toolUse", "toolUseId"), name: jstr(bl, "toolUse", "name"), args: canon(jget(bl, "toolUse", "input"))})
		case bm["toolResult"] != nil:
			ps = append(ps, part{kind: "result", id: jstr(bl, "toolResult", "toolUseId"), content: bedrockContent(jget(bl, "toolResult", "content"))})
		case bm["cachePoint"] != nil:
		default:
			ps = append(ps, part{kind: canon(bl)})
		}
	}
	return ps
}

func renderWireTool(name, desc string, schema any) string {
	m, _ := schema.(map[string]any)
	return toolDef{name: name, desc: desc, schema: m}.render()
}

// JSON helpers over decoded bodies.

func jget(v any, path ...string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func jstr(v any, path ...string) string { s, _ := jget(v, path...).(string); return s }

func jarr(v any) []any { a, _ := v.([]any); return a }

func jint(v any, path ...string) int64 { f, _ := jget(v, path...).(float64); return int64(f) }

// canon is v as JSON with sorted keys.
func canon(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// canonText is JSON text with sorted keys (s when it is not JSON).
func canonText(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	return canon(v)
}

// logMatrix logs the outcomes as a table, a row per client/provider.
func logMatrix(t *testing.T, outcomes *sync.Map) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s", "client/provider")
	var cols []string
	for _, tc := range translateCases {
		for _, stream := range tc.modes {
			col := tc.column(stream)
			cols = append(cols, col)
			fmt.Fprintf(&b, " %-*s", len(col), col)
		}
	}
	for _, cl := range translateClients {
		for _, pr := range translateProviders {
			row := cl.name + "/" + pr.name
			fmt.Fprintf(&b, "\n%-24s", row)
			for _, col := range cols {
				name := t.Name() + "/" + row + "/" + col
				o, ok := outcomes.Load(name)
				if !ok {
					o = "FAIL"
				}
				fmt.Fprintf(&b, " %-*s", len(col), o)
			}
		}
	}
	t.Logf("translation matrix:\n%s", b.String())
}
