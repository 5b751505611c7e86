package convert

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestPassRequest(t *testing.T) {
	cases := []struct {
		desc      string
		f         Format
		body      string
		opts      Options
		want      string
		wantModel string
		stream    bool
	}{
		{desc: "chat: untouched without options", f: Chat, body: `{"model":"a", "messages":[],"x":{"y":1}}`,
			want: `{"model":"a", "messages":[],"x":{"y":1}}`, wantModel: "a"},
		{desc: "chat: model rewritten, the rest byte for byte", f: Chat, body: `{"x" : [1, 2],"model":"a","model":"dup","z":"\u00e9"}`,
			opts: Options{Model: `b"c`}, want: `{"x" : [1, 2],"model":"b\"c","z":"\u00e9"}`, wantModel: `b"c`},
		{desc: "chat: usage asked for the gateway", f: Chat, body: `{"model":"a","stream":true,"messages":[]}`,
			opts: Options{StreamUsage: true, Model: "m"}, want: `{"model":"m","stream":true,"messages":[],"stream_options":{"include_usage":true}}`, wantModel: "m", stream: true},
		{desc: "chat: usage asked for the gateway, the client's other stream options kept", f: Chat,
			body: `{"model":"a","stream":true,"stream_options":{"include_obfuscation":false,"include_usage":false}}`,
			opts: Options{StreamUsage: true}, want: `{"model":"a","stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true}}`, wantModel: "a", stream: true},
		{desc: "chat: usage asked for the gateway, beside another stream option", f: Chat,
			body: `{"model":"a","stream":true,"stream_options":{"include_obfuscation":false},"n":1}`,
			opts: Options{StreamUsage: true, Model: "m"}, want: `{"model":"m","stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true},"n":1}`, wantModel: "m", stream: true},
		{desc: "chat: client already asked for usage", f: Chat, body: `{"model":"a","stream":true,"stream_options":{"include_usage":true}}`,
			opts: Options{StreamUsage: true}, want: `{"model":"a","stream":true,"stream_options":{"include_usage":true}}`, wantModel: "a", stream: true},
		{desc: "messages: model added when missing", f: Messages, body: `{"max_tokens":5}`, opts: Options{Model: "claude"},
			want: `{"max_tokens":5,"model":"claude"}`, wantModel: "claude"},
		{desc: "gemini: body untouched, model for the path", f: Gemini, body: `{"contents":[]}`, opts: Options{Model: "gemini-2.5-pro"},
			want: `{"contents":[]}`, wantModel: "gemini-2.5-pro"},
		{desc: "chat: escaped model replaced in place", f: Chat, body: ` { "model" : "g\u0070t" , "n":1 } `, opts: Options{Model: "m"},
			want: ` { "model" : "m" , "n":1 } `, wantModel: "m"},
		{desc: "chat: null model replaced", f: Chat, body: `{"model":"a","model":null}`, opts: Options{Model: "m"},
			want: `{"model":"m"}`, wantModel: "m"},
		{desc: "responses: same model untouched", f: Responses, body: `{"model":"m","input":"hi"}`, opts: Options{Model: "m"},
			want: `{"model":"m","input":"hi"}`, wantModel: "m"},
		{desc: "chat: a repeated model written once, also when the last is the model", f: Chat, body: `{"model":"secret","model":"m","n":1}`,
			opts: Options{Model: "m"}, want: `{"model":"m","n":1}`, wantModel: "m"},
	}
	for _, tc := range cases {
		// Request reads the head itself, or takes the caller's (the
		// server's path): the same result either way.
		for _, withHead := range []bool{false, true} {
			name := tc.desc
			if withHead {
				name += " (head given)"
			}
			t.Run(name, func(t *testing.T) {
				opts := tc.opts
				if withHead {
					h, err := ReadHead([]byte(tc.body))
					if err != nil {
						t.Fatal(err)
					}
					opts.Head = &h
				}
				out, info, err := Request([]byte("prefix:"), tc.f, tc.f, []byte(tc.body), &opts)
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.TrimPrefix(string(out), "prefix:"); got != tc.want {
					t.Errorf("got  %s\nwant %s", got, tc.want)
				}
				if info.Model != tc.wantModel || info.Stream != tc.stream {
					t.Errorf("info %+v", info)
				}
			})
		}
	}
}

func TestReadHead(t *testing.T) {
	cases := []struct {
		body, model string
		stream      bool
		maxTokens   int
		err         bool
	}{
		{body: `{"model":"gpt-4o","stream":true,"max_tokens":5}`, model: "gpt-4o", stream: true, maxTokens: 5},
		{body: `{"model":"a\u00e9"}`, model: "a\u00e9"},
		{body: `{"model":""}`, model: ""},
		{body: `{"model":"a","model":null}`, model: ""},
		{body: `{"messages":[]}`, model: ""},
		{body: `{"model":5}`, err: true},
		{body: `{"max_tokens":null,"max_output_tokens":7}`, maxTokens: 7},
		{body: `{"max_tokens":0}`, err: true},
		{body: `{"max_completion_tokens":-5}`, err: true},
		{body: `{"max_output_tokens":0}`, err: true},
		{body: `{"max_tokens":"5"}`, err: true},
		{body: `{"stream":"yes"}`, err: true},
		{body: `[1]`, err: true},
		{body: `{"model":"a"`, err: true},
	}
	for _, tc := range cases {
		h, err := ReadHead([]byte(tc.body))
		if (err != nil) != tc.err {
			t.Errorf("%s: err %v", tc.body, err)
			continue
		}
		if tc.err {
			continue
		}
		if h.Model() != tc.model || h.stream != tc.stream || h.maxTokens() != tc.maxTokens {
			t.Errorf("%s: model %q stream %v max %d", tc.body, h.Model(), h.stream, h.maxTokens())
		}
	}
}

// TestRequestRoundTrip translates a Chat request to each provider format
// that is also a client format and back: the conversation must survive.
func TestRequestRoundTrip(t *testing.T) {
	in := readFile(t, "testdata/requests/tools.chat.json")
	there, _, err := Request(nil, Chat, Messages, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := Request(nil, Messages, Chat, there, nil)
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type msg struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []call `json:"tool_calls"`
	}
	var a, b struct {
		Messages []msg `json:"messages"`
		Tools    any   `json:"tools"`
	}
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(back, &b); err != nil {
		t.Fatal(err)
	}
	text := func(c any) string {
		switch v := c.(type) {
		case string:
			return v
		case []any:
			var s string
			for _, p := range v {
				s += p.(map[string]any)["text"].(string)
			}
			return s
		}
		return ""
	}
	if len(a.Messages) != len(b.Messages) {
		t.Fatalf("%d messages became %d:\n%s", len(a.Messages), len(b.Messages), back)
	}
	for i := range a.Messages {
		x, y := a.Messages[i], b.Messages[i]
		if x.Role == "developer" {
			x.Role = "system"
		}
		if x.Role != y.Role || text(x.Content) != text(y.Content) || x.ToolCallID != y.ToolCallID || len(x.ToolCalls) != len(y.ToolCalls) {
			t.Errorf("message %d: %+v became %+v", i, x, y)
			continue
		}
		for j := range x.ToolCalls {
			var ax, ay any
			_ = json.Unmarshal([]byte(x.ToolCalls[j].Function.Arguments), &ax)
			_ = json.Unmarshal([]byte(y.ToolCalls[j].Function.Arguments), &ay)
			if x.ToolCalls[j].ID != y.ToolCalls[j].ID || !reflect.DeepEqual(ax, ay) {
				t.Errorf("tool call %d.%d: %+v became %+v", i, j, x.ToolCalls[j], y.ToolCalls[j])
			}
		}
	}
	if !reflect.DeepEqual(a.Tools, b.Tools) {
		t.Errorf("tools changed:\n%v\n%v", a.Tools, b.Tools)
	}
}

// TestResponseRoundTrip: an Anthropic response told as Chat and back.
func TestResponseRoundTrip(t *testing.T) {
	for _, file := range []string{"thinking.messages.json", "tools.messages.json", "stop-sequence.messages.json"} {
		t.Run(file, func(t *testing.T) {
			in := readFile(t, "testdata/responses/"+file)
			chat, u1, err := Response(nil, in, RequestInfo{Client: Chat, Provider: Messages})
			if err != nil {
				t.Fatal(err)
			}
			back, u2, err := Response(nil, chat, RequestInfo{Client: Messages, Provider: Chat})
			if err != nil {
				t.Fatal(err)
			}
			if u1.InputTokens != u2.InputTokens || u1.OutputTokens != u2.OutputTokens || u1.CachedInputTokens != u2.CachedInputTokens {
				t.Errorf("usage %+v became %+v", u1, u2)
			}
			type blk struct {
				Type  string `json:"type"`
				Text  string `json:"text"`
				ID    string `json:"id"`
				Name  string `json:"name"`
				Input any    `json:"input"`
			}
			var a, b struct {
				Content    []blk  `json:"content"`
				StopReason string `json:"stop_reason"`
			}
			_ = json.Unmarshal(in, &a)
			_ = json.Unmarshal(back, &b)
			var keep []blk
			for _, c := range a.Content {
				if c.Type == "text" || c.Type == "tool_use" {
					keep = append(keep, c)
				}
			}
			var got []blk
			for _, c := range b.Content {
				if c.Type != "thinking" {
					got = append(got, c)
				}
			}
			if !reflect.DeepEqual(keep, got) {
				t.Errorf("content %+v became %+v", keep, got)
			}
			if a.StopReason != b.StopReason && a.StopReason != "stop_sequence" {
				t.Errorf("stop %s became %s", a.StopReason, b.StopReason)
			}
		})
	}
}

func TestResponseStreamAgree(t *testing.T) {
	// The stream and the whole response of the same Bedrock answer end in
	// the same usage.
	_, in := streamInput(t, "text-tool.bedrock.events")
	r := runStream(RequestInfo{Client: Chat, Provider: Bedrock}, in, nil)
	if r.usage != (Usage{InputTokens: 340, OutputTokens: 22, CachedInputTokens: 300}) {
		t.Errorf("usage %+v", r.usage)
	}
}

// TestRefusedNotDropped: content a provider's format cannot hold is a 400
// naming it, never sent without it.
func TestRefusedNotDropped(t *testing.T) {
	const toolUse = `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"plot","input":{}}]}`
	cases := []struct {
		desc             string
		client, provider Format
		body             string
		want             string // "" when translated
	}{
		{desc: "tool result image to chat", client: Messages, provider: Chat,
			body: `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"plot"},` + toolUse + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}]}`,
			want: "a tool result's non-text content cannot be translated to chat"},
		{desc: "tool result text blocks to chat", client: Messages, provider: Chat,
			body: `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"plot"},` + toolUse + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}]}`},
		{desc: "function output image to chat", client: Responses, provider: Chat,
			body: `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"plot","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}]}`,
			want: "a tool result's non-text content cannot be translated to chat"},
		{desc: "assistant image to chat", client: Responses, provider: Chat,
			body: `{"model":"m","input":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}]}`,
			want: "an image in an assistant turn cannot be translated to chat"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			out, _, err := Request(nil, tc.client, tc.provider, []byte(tc.body), nil)
			var e *Error
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				if !strings.Contains(string(out), `"content":"ab"`) {
					t.Errorf("text blocks not joined: %s", out)
				}
			case !errors.As(err, &e) || e.Status != 400 || e.Message != tc.want:
				t.Errorf("error %v, want 400 %q", err, tc.want)
			case len(out) != 0:
				t.Errorf("a refused request wrote %s", out)
			}
		})
	}
}

// TestRefusedForEveryProvider: what a request asks of the client's own
// provider (state it stores, ...) is a 400 naming it whatever the format it
// is translated to, never dropped.
func TestRefusedForEveryProvider(t *testing.T) {
	cases := []struct {
		desc   string
		client Format
		body   string
		want   string // the refusal starts so
	}{
		{desc: "responses: previous_response_id", client: Responses,
			body: `{"model":"m","previous_response_id":"resp_1","input":"and then?"}`, want: "previous_response_id needs"},
		{desc: "responses: conversation id", client: Responses,
			body: `{"model":"m","conversation":"conv_1","input":"and then?"}`, want: "conversation needs"},
		{desc: "responses: conversation object", client: Responses,
			body: `{"model":"m","conversation":{"id":"conv_1"},"input":"and then?"}`, want: "conversation needs"},
		{desc: "responses: stored prompt", client: Responses,
			body: `{"model":"m","prompt":{"id":"pmpt_123","variables":{"city":"Paris"}},"input":"go"}`, want: "prompt (a template"},
		{desc: "responses: input item_reference", client: Responses,
			body: `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, want: `input item type "item_reference"`},
		// Log probabilities: no other format answers with them.
		{desc: "chat: logprobs", client: Chat,
			body: `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"x"}]}`, want: "logprobs is not supported"},
		{desc: "chat: top_logprobs", client: Chat,
			body: `{"model":"m","logprobs":false,"top_logprobs":3,"messages":[{"role":"user","content":"x"}]}`, want: "top_logprobs is not supported"},
		{desc: "responses: top_logprobs", client: Responses,
			body: `{"model":"m","top_logprobs":2,"input":"x"}`, want: "top_logprobs is not supported"},
		// Answers only the client's own provider gives.
		{desc: "chat: audio output", client: Chat,
			body: `{"model":"m","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":"x"}]}`, want: "audio output"},
		{desc: "chat: web search", client: Chat,
			body: `{"model":"m","web_search_options":{},"messages":[{"role":"user","content":"x"}]}`, want: "web_search_options"},
		{desc: "messages: MCP connector", client: Messages,
			body: `{"model":"m","max_tokens":9,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}],"messages":[{"role":"user","content":"x"}]}`, want: "mcp_servers"},
		// An output bound below 1, in every client format.
		{desc: "chat: negative max_tokens", client: Chat,
			body: `{"model":"m","max_tokens":-5,"messages":[{"role":"user","content":"x"}]}`, want: `invalid chat completions request: "max_tokens" must be at least 1`},
		{desc: "chat: zero max_completion_tokens", client: Chat,
			body: `{"model":"m","max_completion_tokens":0,"messages":[{"role":"user","content":"x"}]}`, want: `invalid chat completions request: "max_completion_tokens" must be at least 1`},
		{desc: "messages: zero max_tokens", client: Messages,
			body: `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, want: `invalid messages request: "max_tokens" must be at least 1`},
		{desc: "responses: negative max_output_tokens", client: Responses,
			body: `{"model":"m","max_output_tokens":-1,"input":"x"}`, want: `invalid responses request: "max_output_tokens" must be at least 1`},
	}
	for _, tc := range cases {
		for _, provider := range providerFormats {
			if provider == tc.client {
				continue
			}
			t.Run(tc.desc+" to "+provider.String(), func(t *testing.T) {
				out, _, err := Request(nil, tc.client, provider, []byte(tc.body), nil)
				var e *Error
				if !errors.As(err, &e) || e.Status != 400 || !strings.HasPrefix(e.Message, tc.want) {
					t.Fatalf("error %v (sent %s), want 400 %q...", err, out, tc.want)
				}
				if len(out) != 0 {
					t.Errorf("a refused request wrote %s", out)
				}
			})
		}
	}
	// null (and logprobs false, top_logprobs 0) asks for nothing.
	for _, c := range []struct {
		client Format
		body   string
	}{
		{Responses, `{"model":"m","conversation":null,"prompt":null,"top_logprobs":0,"max_output_tokens":null,"input":"hi"}`},
		{Chat, `{"model":"m","logprobs":false,"top_logprobs":0,"max_tokens":null,"messages":[{"role":"user","content":"x"}]}`},
		{Chat, `{"model":"m","logprobs":null,"top_logprobs":null,"messages":[{"role":"user","content":"x"}]}`},
	} {
		for _, provider := range providerFormats {
			if provider == c.client {
				continue
			}
			if _, _, err := Request(nil, c.client, provider, []byte(c.body), nil); err != nil {
				t.Errorf("%s to %s: %v", c.body, provider, err)
			}
		}
	}
}

// TestSamplingHints: the sampling settings without a counterpart in the
// provider's format are the only members dropped, as the package comment
// lists them: Chat's seed and penalties go to Gemini (and nowhere else),
// logit_bias nowhere; Messages' top_k goes to Gemini and Bedrock, not to
// Chat providers.
func TestSamplingHints(t *testing.T) {
	const chat = `{"model":"m","seed":4,"frequency_penalty":1,"presence_penalty":-0.5,"logit_bias":{"1":5},"messages":[{"role":"user","content":"x"}]}`
	const messages = `{"model":"m","max_tokens":9,"top_k":40,"messages":[{"role":"user","content":"x"}]}`
	cases := []struct {
		client, provider Format
		body             string
		has, hasNot      []string
	}{
		{Chat, Gemini, chat, []string{`"seed":4`, `"frequencyPenalty":1`, `"presencePenalty":-0.5`}, []string{"logit", "bias"}},
		{Chat, Messages, chat, nil, []string{"seed", "enalty", "logit"}},
		{Chat, Bedrock, chat, nil, []string{"seed", "enalty", "logit"}},
		{Messages, Gemini, messages, []string{`"topK":40`}, nil},
		{Messages, Bedrock, messages, []string{`"top_k":40`}, nil},
		{Messages, Chat, messages, nil, []string{"top_k", "topK"}},
	}
	for _, tc := range cases {
		out, _, err := Request(nil, tc.client, tc.provider, []byte(tc.body), nil)
		if err != nil {
			t.Errorf("%s to %s: %v", tc.client, tc.provider, err)
			continue
		}
		for _, w := range tc.has {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s to %s: %s not sent: %s", tc.client, tc.provider, w, out)
			}
		}
		for _, w := range tc.hasNot {
			if strings.Contains(string(out), w) {
				t.Errorf("%s to %s: %s sent: %s", tc.client, tc.provider, w, out)
			}
		}
	}
}
