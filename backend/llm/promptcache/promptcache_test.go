package promptcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/config"
)

// goldenOptions are the option sets the golden files are named after.
var goldenOptions = map[string]*config.PromptCaching{
	"all":     everything(),
	"default": {MinTokens: ptr(0)},
	"tools":   {CacheSystem: ptr(false), CacheMessages: ptr(false), CacheTools: ptr(true), MinTokens: ptr(0)},
	"offset1": {CacheSystem: ptr(false), CacheMessageOffset: ptr(1), MinTokens: ptr(0)},
	"offset9": {CacheSystem: ptr(false), CacheMessageOffset: ptr(9), MinTokens: ptr(0)},
	// In anthropic-strings the tools are 13 words (16 tokens), tools and
	// system 20 (26), the prefix up to the second message 29 (37). In
	// bedrock-basic the tools are 3 words (3 tokens), tools and system 8
	// (10), the prefix up to the second message 15 (19), the whole prompt
	// 19 (24): with min20 no point is placed although the prompt is over.
	"min30": {CacheTools: ptr(true), MinTokens: ptr(30)},
	"min10": {CacheTools: ptr(true), MinTokens: ptr(10)},
	"min20": {CacheTools: ptr(true), MinTokens: ptr(20)},
}

// TestApplyGolden: the points of each format and option set, against the
// golden files; every other byte of the input is kept (the inputs carry
// odd spacing and escapes to show it). Applying the policy again adds
// nothing.
func TestApplyGolden(t *testing.T) {
	cases := []struct{ input, option string }{
		{"anthropic-strings", "all"},
		{"anthropic-strings", "default"},
		{"anthropic-strings", "tools"},
		{"anthropic-strings", "offset1"},
		{"anthropic-strings", "offset9"},
		{"anthropic-strings", "min30"},
		{"anthropic-strings", "min20"},
		{"anthropic-blocks", "all"},
		{"anthropic-blocks", "offset1"},
		{"anthropic-marked", "all"},
		{"bedrock-basic", "all"},
		{"bedrock-basic", "default"},
		{"bedrock-basic", "tools"},
		{"bedrock-basic", "offset1"},
		{"bedrock-basic", "min10"},
		{"bedrock-basic", "min20"},
		{"bedrock-marked", "all"},
	}
	for _, tt := range cases {
		t.Run(tt.input+"/"+tt.option, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", tt.input+".json"))
			f := formatOf(tt.input)
			p := New(goldenOptions[tt.option])
			out, err := p.Apply(nil, in, f)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(out) {
				t.Fatalf("output is not JSON:\n%s", out)
			}
			checkGolden(t, filepath.Join("testdata", tt.input+"."+tt.option+".golden"), out)
			again, err := p.Apply(nil, out, f)
			if err != nil || string(again) != string(out) {
				t.Errorf("a second Apply changed the body (%v):\n%s", err, again)
			}
		})
	}
}

// TestApplyUnchanged: what Apply leaves alone comes back as the very body
// it was given.
func TestApplyUnchanged(t *testing.T) {
	small := []byte(`{"system":"Be brief.","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`)
	fourMarks := []byte(`{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"t","input_schema":{},"cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":[{"type":"text","text":"c","cache_control":{"type":"ephemeral"}}]}]}`)
	messagesOnly := &config.PromptCaching{CacheSystem: ptr(false), MinTokens: ptr(0)}
	systemOnly := &config.PromptCaching{CacheMessages: ptr(false), MinTokens: ptr(0)}
	tests := []struct {
		desc   string
		policy *Policy
		f      convert.Format
		body   string
	}{
		{"chat provider", New(everything()), convert.Chat, string(small)},
		{"gemini provider", New(everything()), convert.Gemini, string(small)},
		{"nil policy", nil, convert.Messages, string(small)},
		{"every point off", New(&config.PromptCaching{CacheSystem: ptr(false), CacheMessages: ptr(false)}), convert.Messages, string(small)},
		{"under the default minTokens", New(nil), convert.Messages, string(small)},
		{"under the default minTokens, bedrock", New(nil), convert.Bedrock,
			`{"system":[{"text":"Be brief."}],"messages":[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"text":"b"}]},{"role":"user","content":[{"text":"c"}]}]}`},
		{"four client points", New(everything()), convert.Messages, string(fourMarks)},
		{"a request-level point and three more", New(everything()), convert.Messages,
			`{"cache_control":{"type":"ephemeral"},"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],` +
				`"tools":[{"name":"t","input_schema":{},"cache_control":{"type":"ephemeral"}}],` +
				`"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`},
		{"system named twice", New(everything()), convert.Messages, `{"system":"a","system":"b","messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}`},
		{"messages named twice", New(everything()), convert.Bedrock, `{"messages":[],"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"user","content":[{"text":"y"}]}]}`},
		{"one message", New(messagesOnly), convert.Messages, `{"messages":[{"role":"user","content":"hello"}]}`},
		{"target holds only thinking", New(messagesOnly), convert.Messages,
			`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":" "}]},{"role":"user","content":"r"}]}`},
		{"target content named twice", New(messagesOnly), convert.Messages,
			`{"messages":[{"role":"user","content":"q","content":"q2"},{"role":"user","content":"r"}]}`},
		{"blank system", New(systemOnly), convert.Messages, `{"system":" \n\t ","messages":[{"role":"user","content":"x"}]}`},
		{"escaped blank system", New(systemOnly), convert.Messages, `{"system":"\u00a0\n\u2003","messages":[{"role":"user","content":"x"}]}`},
		{"empty bedrock system", New(systemOnly), convert.Bedrock, `{"system":[],"messages":[{"role":"user","content":[{"text":"x"}]}]}`},
		{"bedrock target already marked", New(messagesOnly), convert.Bedrock,
			`{"messages":[{"role":"user","content":[{"text":"x"},{"cachePoint":{"type":"default"}}]},{"role":"user","content":[{"text":"y"}]}]}`},
		{"bedrock tools named twice", New(&config.PromptCaching{CacheSystem: ptr(false), CacheMessages: ptr(false), CacheTools: ptr(true), MinTokens: ptr(0)}), convert.Bedrock,
			`{"messages":[],"toolConfig":{"tools":[{"toolSpec":{"name":"a"}}],"tools":[]}}`},
		{"no sections", New(everything()), convert.Messages, `{"model":"m"}`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			body := []byte(tt.body)
			if !json.Valid(body) {
				t.Fatalf("test body is not JSON: %s", body)
			}
			out, err := tt.policy.Apply(make([]byte, 0, 64), body, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(body) || &out[0] != &body[0] {
				t.Errorf("the body was rewritten:\n%s", out)
			}
		})
	}
}

func TestApplyNotAnObject(t *testing.T) {
	for _, body := range []string{`[1,2]`, `{"system":`, `"text"`, `{"a":1} x`, ``} {
		t.Run(body, func(t *testing.T) {
			out, err := New(everything()).Apply(nil, []byte(body), convert.Messages)
			if !errors.Is(err, ErrNotObject) || string(out) != body {
				t.Errorf("Apply = %q, %v; want the body and ErrNotObject", out, err)
			}
		})
	}
}

// TestApplyLimit: the client's points count against the four a request
// may hold; the free ones go to the messages, then the system prompt,
// then the tools.
func TestApplyLimit(t *testing.T) {
	const mark = `,"cache_control":{"type":"ephemeral"}`
	// clientMarks puts n of the client's points on the first message's
	// blocks (which the policy never marks).
	body := func(n int) []byte {
		var blocks []string
		for i := range max(n, 1) {
			b := fmt.Sprintf(`{"type":"text","text":"doc %d"`, i)
			if i < n {
				b += mark
			}
			blocks = append(blocks, b+"}")
		}
		return []byte(`{"system":"s","tools":[{"name":"t","input_schema":{}}],"messages":[{"role":"user","content":[` +
			strings.Join(blocks, ",") + `]},{"role":"assistant","content":"a"},{"role":"user","content":"q"}]}`)
	}
	tests := []struct {
		client                  int
		system, messages, tools int // the points after Apply
	}{
		{0, 1, 1, 1},
		{1, 1, 2, 1},
		{2, 1, 3, 0}, // two free: the messages' and the system's
		{3, 0, 4, 0},
		{4, 0, 4, 0},
		{5, 0, 5, 0}, // over the limit already: nothing added
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.client, " client points"), func(t *testing.T) {
			out, err := New(everything()).Apply(nil, body(tt.client), convert.Messages)
			if err != nil {
				t.Fatal(err)
			}
			system, messages, tools, _ := sectionPoints(t, out, convert.Messages)
			if system != tt.system || messages != tt.messages || tools != tt.tools {
				t.Errorf("points system %d messages %d tools %d, want %d %d %d:\n%s",
					system, messages, tools, tt.system, tt.messages, tt.tools, out)
			}
		})
	}
}

// TestApplyLongTTL: the five-minute points Apply adds go only after the
// client's last point with a longer TTL (Anthropic refuses a longer TTL
// after a shorter one).
func TestApplyLongTTL(t *testing.T) {
	const long = `,"cache_control":{"type":"ephemeral","ttl":"1h"}`
	body := func(tools, system, first, last string) []byte {
		return []byte(`{"tools":[{"name":"t","input_schema":{}` + tools + `}],` +
			`"system":[{"type":"text","text":"s"` + system + `}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"a"` + first + `}]},{"role":"assistant","content":"b"},` +
			`{"role":"user","content":[{"type":"text","text":"c"` + last + `}]}]}`)
	}
	bedrockLast := []byte(`{"system":[{"text":"s"}],"toolConfig":{"tools":[{"toolSpec":{"name":"t"}}]},` +
		`"messages":[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"text":"b"}]},` +
		`{"role":"user","content":[{"text":"c"},{"cachePoint":{"type":"default","ttl":"1h"}}]}]}`)
	tests := []struct {
		desc                    string
		f                       convert.Format
		body                    []byte
		system, messages, tools int // the points after Apply
	}{
		{"on the tools", convert.Messages, body(long, "", "", ""), 1, 1, 1},
		{"on the system prompt", convert.Messages, body("", long, "", ""), 1, 1, 0},
		{"on the first message", convert.Messages, body("", "", long, ""), 0, 2, 0},
		{"on the last message", convert.Messages, body("", "", "", long), 0, 1, 0},
		{"a five-minute one does not count", convert.Messages, body("", "", "", `,"cache_control":{"type":"ephemeral","ttl":"5m"}`), 1, 2, 1},
		{"bedrock, on the last message", convert.Bedrock, bedrockLast, 0, 1, 0},
		{"on the request", convert.Messages, append(body("", "", "", "")[:len(body("", "", "", ""))-1], (long + "}")...), 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			out, err := New(everything()).Apply(nil, tt.body, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			system, messages, tools, _ := sectionPoints(t, out, tt.f)
			if system != tt.system || messages != tt.messages || tools != tt.tools {
				t.Errorf("points system %d messages %d tools %d, want %d %d %d:\n%s",
					system, messages, tools, tt.system, tt.messages, tt.tools, out)
			}
		})
	}
}

// TestApplyMinTokens: with the default minTokens (1024, about 788 words),
// each point needs the prompt before it to reach the estimate.
func TestApplyMinTokens(t *testing.T) {
	anthropicBody := func(tools, system, first int) []byte {
		return []byte(`{"tools":[{"name":"t","description":"` + words(tools) + `","input_schema":{}}],` +
			`"system":"` + words(system) + `",` +
			`"messages":[{"role":"user","content":"` + words(first) + `"},{"role":"assistant","content":"ok"},{"role":"user","content":"next"}]}`)
	}
	bedrockBody := func(tools, system, first int) []byte {
		return []byte(`{"toolConfig":{"tools":[{"toolSpec":{"name":"t","description":"` + words(tools) + `"}}]},` +
			`"system":[{"text":"` + words(system) + `"}],` +
			`"messages":[{"role":"user","content":[{"text":"` + words(first) + `"}]},{"role":"assistant","content":[{"text":"ok"}]},{"role":"user","content":[{"text":"next"}]}]}`)
	}
	withTools := &config.PromptCaching{CacheTools: ptr(true)}
	tests := []struct {
		desc                    string
		c                       *config.PromptCaching
		tools, system, first    int // words
		system2, messages, tool int // the points
	}{
		{"a long system prompt", nil, 1, 800, 1, 1, 1, 0},
		{"the system prompt short of it, the conversation over", nil, 1, 700, 200, 0, 1, 0},
		{"the whole prompt short of it", nil, 1, 700, 50, 0, 0, 0},
		{"long tools carry every point", withTools, 800, 1, 1, 1, 1, 1},
		{"tools short of it, the system prompt over with them", withTools, 500, 300, 1, 1, 1, 0},
	}
	for _, tt := range tests {
		for _, f := range []convert.Format{convert.Messages, convert.Bedrock} {
			t.Run(tt.desc+"/"+f.String(), func(t *testing.T) {
				body := anthropicBody(tt.tools, tt.system, tt.first)
				if f == convert.Bedrock {
					body = bedrockBody(tt.tools, tt.system, tt.first)
				}
				out, err := New(tt.c).Apply(nil, body, f)
				if err != nil {
					t.Fatal(err)
				}
				system, messages, tools, _ := sectionPoints(t, out, f)
				if system != tt.system2 || messages != tt.messages || tools != tt.tool {
					t.Errorf("points system %d messages %d tools %d, want %d %d %d", system, messages, tools, tt.system2, tt.messages, tt.tool)
				}
			})
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		desc string
		c    *config.PromptCaching
		want Policy
	}{
		{"nil", nil, Policy{system: true, messages: true, minTokens: 1024}},
		{"empty", &config.PromptCaching{}, Policy{system: true, messages: true, minTokens: 1024}},
		{"every field", &config.PromptCaching{CacheSystem: ptr(false), CacheMessages: ptr(false), CacheTools: ptr(true), MinTokens: ptr(5), CacheMessageOffset: ptr(2)},
			Policy{tools: true, minTokens: 5, offset: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := New(tt.c); *got != tt.want {
				t.Errorf("New = %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestSupports(t *testing.T) {
	tests := []struct {
		f     convert.Format
		model string
		want  bool
	}{
		{convert.Messages, "claude-sonnet-4-5", true},
		{convert.Bedrock, "anthropic.claude-3-5-sonnet-20240620-v1:0", true},
		{convert.Bedrock, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{convert.Bedrock, "Anthropic.Claude-3-7-Sonnet-20250219-v1:0", true},
		{convert.Bedrock, "anthropic.claude-v2:1", false},
		{convert.Bedrock, "anthropic.claude-instant-v1", false},
		{convert.Bedrock, "amazon.nova-pro-v1:0", true},
		{convert.Bedrock, "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc", true},
		{convert.Bedrock, "meta.llama3-70b-instruct-v1:0", false},
		{convert.Chat, "gpt-4o", false},
		{convert.Gemini, "gemini-2.5-pro", false},
	}
	for _, tt := range tests {
		if got := Supports(tt.f, tt.model); got != tt.want {
			t.Errorf("Supports(%v, %q) = %v, want %v", tt.f, tt.model, got, tt.want)
		}
	}
}
