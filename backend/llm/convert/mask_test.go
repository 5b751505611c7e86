package convert

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/relaygate/gateway/backend/llm/guard"
)

// The five builtins, as a response guard names them.
var maskBuiltins = []string{"ssn", "creditCard", "phoneNumber", "email", "caSin"}

func testGuard(t testing.TB) *guard.Guard {
	t.Helper()
	g, err := guard.New(guard.Spec{Builtins: maskBuiltins})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// maskString is Guard.Mask on a string; a clean text comes back as it is.
func maskString(g *guard.Guard, s string) string {
	if m := g.Mask([]byte(s)); m != nil {
		return string(m)
	}
	return s
}

// responseText is the answer text a client reads in a whole response:
// Chat's content (string or text parts), Messages' text blocks, Responses'
// output_text parts, each format's texts joined.
func responseText(t *testing.T, client Format, out []byte) string {
	t.Helper()
	var sb strings.Builder
	switch client {
	case Chat:
		var r struct {
			Choices []struct {
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		mustUnmarshal(t, out, &r)
		for _, c := range r.Choices {
			var s string
			if json.Unmarshal(c.Message.Content, &s) == nil {
				sb.WriteString(s)
				continue
			}
			var parts []struct{ Type, Text string }
			_ = json.Unmarshal(c.Message.Content, &parts)
			for _, p := range parts {
				if p.Type == "text" {
					sb.WriteString(p.Text)
				}
			}
		}
	case Messages:
		var r struct{ Content []struct{ Type, Text string } }
		mustUnmarshal(t, out, &r)
		for _, b := range r.Content {
			if b.Type == "text" {
				sb.WriteString(b.Text)
			}
		}
	case Responses:
		var r struct{ Output []responsesItemText }
		mustUnmarshal(t, out, &r)
		for _, it := range r.Output {
			sb.WriteString(it.text())
		}
	}
	return sb.String()
}

type responsesItemText struct {
	Type    string
	Content []struct{ Type, Text string }
}

func (it responsesItemText) text() string {
	var sb strings.Builder
	if it.Type == "message" {
		for _, p := range it.Content {
			if p.Type == "output_text" {
				sb.WriteString(p.Text)
			}
		}
	}
	return sb.String()
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
}

var maskedResponseCases = []struct{ desc, file string }{
	{desc: "chat: text with escapes beside reasoning and a tool call", file: "pii.chat.json"},
	{desc: "messages: two text blocks beside thinking and a tool use", file: "pii.messages.json"},
	{desc: "gemini: a phone number and an email split across text parts", file: "pii.gemini.json"},
	{desc: "responses: an output_text part and the output_text member beside reasoning and a call", file: "pii.responses.json"},
}

// clientsOf are the client formats a provider's answers are served to.
func clientsOf(provider Format) []Format {
	if provider == Responses {
		return []Format{Responses}
	}
	return clientFormats
}

func TestMaskedResponseGolden(t *testing.T) {
	g := testGuard(t)
	for _, tc := range maskedResponseCases {
		t.Run(tc.desc, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata/masked", tc.file))
			base := strings.TrimSuffix(tc.file, ".json")
			provider, _ := ParseFormat(base[strings.LastIndexByte(base, '.')+1:])
			for _, client := range clientsOf(provider) {
				resetIDs()
				info := RequestInfo{Client: client, Provider: provider, Model: "requested-model"}
				plain, plainUsage, err := Response(nil, in, info)
				if err != nil {
					t.Fatal(err)
				}
				resetIDs()
				info.Mask = g
				out, usage, err := Response(nil, in, info)
				if err != nil {
					t.Fatalf("%v: %v", client, err)
				}
				var got []byte
				if client == provider {
					got = append(append(got, out...), '\n') // as sent: the provider's bytes
				} else {
					got = indent(t, out)
				}
				got = append(got, usageLine(usage)...)
				checkGolden(t, filepath.Join("testdata/masked", base+"."+client.String()+".golden"), got)

				want := maskString(g, responseText(t, client, plain))
				if text := responseText(t, client, out); text != want {
					t.Errorf("%v: text %q, want %q", client, text, want)
				}
				if want == responseText(t, client, plain) {
					t.Errorf("%v: the fixture has nothing to mask", client)
				}
				if usage != plainUsage {
					t.Errorf("%v: usage %+v, unmasked %+v", client, usage, plainUsage)
				}
			}
		})
	}
}

func TestMaskedPassResponseKeepsBytes(t *testing.T) {
	g := testGuard(t)
	cases := []struct {
		desc     string
		f        Format
		in, want string
	}{
		{desc: "chat: only the content token changes", f: Chat,
			in:   `{"x" : [1, 2],  "choices":[ {"index":0, "message": {"content" : "mail a@b.co now", "z":{"k":"a@b.co"}}} ], "usage":{"prompt_tokens":1}}`,
			want: `{"x" : [1, 2],  "choices":[ {"index":0, "message": {"content" : "mail <EMAIL_ADDRESS> now", "z":{"k":"a@b.co"}}} ], "usage":{"prompt_tokens":1}}`},
		{desc: "chat: nothing to mask, nothing changes", f: Chat,
			in:   `{"choices":[{"message":{"content":"caf\u00e9 \/ 12 units"}}]}`,
			want: `{"choices":[{"message":{"content":"caf\u00e9 \/ 12 units"}}]}`},
		{desc: "chat: escapes are read, the masked token written anew", f: Chat,
			in:   `{"choices":[{"message":{"content":"SSN \u0031\u0032\u0033-45-6789\n\u00e9"}}]}`,
			want: `{"choices":[{"message":{"content":"SSN <SSN>\né"}}]}`},
		{desc: "chat: text parts, two choices, reasoning masked, refusal left", f: Chat,
			in:   `{"choices":[{"index":0,"message":{"content":[{"type":"text","text":"card 4111111111111111"},{"type":"image_url","image_url":{"url":"x"}}],"reasoning_content":"a@b.co"}},{"index":1,"message":{"content":"123-45-6789","refusal":"a@b.co"}}]}`,
			want: `{"choices":[{"index":0,"message":{"content":[{"type":"text","text":"card <CREDIT_CARD>"},{"type":"image_url","image_url":{"url":"x"}}],"reasoning_content":"<EMAIL_ADDRESS>"}},{"index":1,"message":{"content":"<SSN>","refusal":"a@b.co"}}]}`},
		{desc: "chat: tool call arguments masked inside their strings, escapes and all", f: Chat,
			in:   `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"send","arguments":"{\"to\": \"a@b.co\", \"n\": 4111111111111111, \"note\":\"x\\n4111 1111 1111 1111\\\"\"}"}}]}}]}`,
			want: `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"send","arguments":"{\"to\": \"<EMAIL_ADDRESS>\", \"n\": 4111111111111111, \"note\":\"x\\n<CREDIT_CARD>\\\"\"}"}}]}}]}`},
		{desc: "chat: invalid UTF-8 is repaired, as sonic reads it", f: Chat,
			in:   "{\"id\":\"\xff\",\"choices\":[{\"message\":{\"content\":\"\xfe a@b.co\"}}]}",
			want: "{\"id\":\"\uFFFD\",\"choices\":[{\"message\":{\"content\":\"\uFFFD <EMAIL_ADDRESS>\"}}]}"},
		{desc: "messages: text, thinking (its signature kept) and tool input; citations left", f: Messages,
			in:   `{"type":"message","content":[{"type":"thinking","thinking":"a@b.co","signature":"s"},{"type":"text","text":"a@b.co","citations":[{"cited_text":"a@b.co"}]},{"type":"tool_use","id":"t","name":"n","input":{"e": ["a@b.co", 1]}}],"usage":{}}`,
			want: `{"type":"message","content":[{"type":"thinking","thinking":"<EMAIL_ADDRESS>","signature":"s"},{"type":"text","text":"<EMAIL_ADDRESS>","citations":[{"cited_text":"a@b.co"}]},{"type":"tool_use","id":"t","name":"n","input":{"e": ["<EMAIL_ADDRESS>", 1]}}],"usage":{}}`},
		{desc: "responses: output_text parts, the output_text member, reasoning and calls", f: Responses,
			in:   `{"output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"a@b.co"}],"content":[{"type":"reasoning_text","text":"4111 1111 1111 1111"}]},{"type":"function_call","arguments":"{\"e\":\"a@b.co\"}"},{"type":"message","content":[{"type":"output_text","text":"x a@b.co"},{"type":"refusal","refusal":"a@b.co"}]}],"output_text":"x a@b.co","usage":{"input_tokens":3}}`,
			want: `{"output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"<EMAIL_ADDRESS>"}],"content":[{"type":"reasoning_text","text":"<CREDIT_CARD>"}]},{"type":"function_call","arguments":"{\"e\":\"<EMAIL_ADDRESS>\"}"},{"type":"message","content":[{"type":"output_text","text":"x <EMAIL_ADDRESS>"},{"type":"refusal","refusal":"a@b.co"}]}],"output_text":"x <EMAIL_ADDRESS>","usage":{"input_tokens":3}}`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			out, _, err := Response([]byte("prefix:"), []byte(tc.in), RequestInfo{Client: tc.f, Provider: tc.f, Mask: g})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimPrefix(string(out), "prefix:"); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestMaskedResponseRefusals(t *testing.T) {
	g := testGuard(t)
	for _, f := range []Format{Gemini, Bedrock} {
		_, _, err := Response(nil, []byte(`{}`), RequestInfo{Client: f, Provider: f, Mask: g})
		if e, ok := err.(*Error); !ok || e.Status != 500 {
			t.Errorf("%v passthrough with a mask: %v, want a 500 (never unmasked)", f, err)
		}
	}
	if _, _, err := Response(nil, []byte(`{"choices":[`), RequestInfo{Client: Chat, Provider: Chat, Mask: g}); err == nil {
		t.Error("invalid provider body accepted")
	}
	// A member given twice: the decoder masks the last, a client reading
	// the first would get it unmasked: refused, whatever the format.
	for _, tc := range []struct {
		f    Format
		body string
	}{
		{Chat, `{"choices":[{"message":{"content":"a@b.co"}}],"choices":[{"message":{"content":"clean"}}]}`},
		{Chat, `{"choices":[{"message":{"content":"a@b.co","content":"clean"}}]}`},
		{Messages, `{"content":[{"type":"text","text":"a@b.co"}],"content":[{"type":"text","text":"clean"}]}`},
		{Responses, `{"output":[{"type":"message","content":[{"type":"output_text","text":"a@b.co","text":"clean"}]}]}`},
	} {
		out, _, err := Response(nil, []byte(tc.body), RequestInfo{Client: tc.f, Provider: tc.f, Mask: g})
		if e, ok := err.(*Error); !ok || e.Status != 502 {
			t.Errorf("%v %s: %v (%s), want a 502", tc.f, tc.body, err, out)
		}
	}
}

// TestMaskedResponseSDK reads masked responses with the official SDKs'
// types.
func TestMaskedResponseSDK(t *testing.T) {
	g := testGuard(t)
	for _, tc := range maskedResponseCases {
		t.Run(tc.desc, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata/masked", tc.file))
			base := strings.TrimSuffix(tc.file, ".json")
			provider, _ := ParseFormat(base[strings.LastIndexByte(base, '.')+1:])
			for _, client := range clientsOf(provider) {
				plain, _, _ := Response(nil, in, RequestInfo{Client: client, Provider: provider, Model: "m"})
				want := maskString(g, responseText(t, client, plain))
				out, _, err := Response(nil, in, RequestInfo{Client: client, Provider: provider, Model: "m", Mask: g})
				if err != nil {
					t.Fatal(err)
				}
				var got string
				switch client {
				case Chat:
					var c openai.ChatCompletion
					mustUnmarshal(t, out, &c)
					got = c.Choices[0].Message.Content
				case Messages:
					var m anthropic.Message
					mustUnmarshal(t, out, &m)
					for _, b := range m.Content {
						if b.Type == "text" {
							got += b.Text
						}
					}
				case Responses:
					var r responses.Response
					mustUnmarshal(t, out, &r)
					got = r.OutputText()
				}
				if got != want {
					t.Errorf("%v SDK reads %q, want %q", client, got, want)
				}
			}
		})
	}
}
