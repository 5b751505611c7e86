package convert

import (
	"strings"
	"testing"
)

// TestPassRequestHead: what passRequest reads of a body in the client's own
// format, and the bodies it refuses.
func TestPassRequestHead(t *testing.T) {
	tests := []struct {
		desc, body string
		client     Format
		want       RequestInfo // Client and Provider aside
		wantErr    string
	}{
		{desc: "chat, stream with usage", client: Chat,
			body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":7,"max_completion_tokens":9}`,
			want: RequestInfo{Model: "m", Stream: true, IncludeUsage: true, MaxTokens: 9}},
		{desc: "nulls read as absent", client: Chat,
			body: `{"model":null,"stream":null,"stream_options":null,"max_tokens":null}`,
			want: RequestInfo{}},
		{desc: "escaped member names", client: Chat,
			body: `{"mod\u0065l":"m","str\u0065am":true}`,
			want: RequestInfo{Model: "m", Stream: true}},
		{desc: "gemini bound", client: Gemini,
			body: `{"contents":[],"generationConfig":{"temperature":1,"maxOutputTokens":12}}`,
			want: RequestInfo{IncludeUsage: true, MaxTokens: 12}},
		{desc: "bedrock bound", client: Bedrock,
			body: `{"messages":[],"inferenceConfig":{"maxTokens":5}}`,
			want: RequestInfo{IncludeUsage: true, MaxTokens: 5}},
		{desc: "messages", client: Messages,
			body: `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi \"there\""}]}`,
			want: RequestInfo{Model: "claude", IncludeUsage: true, MaxTokens: 100}},
		{desc: "stream not a boolean", client: Chat, body: `{"stream":"yes"}`, wantErr: `"stream" is not a boolean`},
		{desc: "bound not an integer", client: Chat, body: `{"max_tokens":1.5}`, wantErr: "not an integer"},
		{desc: "model not a string", client: Chat, body: `{"model":3}`, wantErr: `"model" is not a string`},
		{desc: "stream_options not an object", client: Chat, body: `{"stream_options":true}`, wantErr: "not an object"},
		{desc: "not an object", client: Chat, body: `[1]`, wantErr: "invalid"},
		{desc: "cut short", client: Chat, body: `{"model":"m","messages":[`, wantErr: "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, info, err := Request(nil, tc.client, tc.client, []byte(tc.body), &Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			info.Client, info.Provider = 0, 0
			if info != tc.want {
				t.Fatalf("info %+v, want %+v", info, tc.want)
			}
		})
	}
}

// TestPassResponseUsage: an answer in the client's own format goes on byte
// for byte, and its usage is read, in every provider format.
func TestPassResponseUsage(t *testing.T) {
	tests := []struct {
		f       Format
		body    string
		want    Usage
		wantErr bool
	}{
		{f: Chat, body: `{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`,
			want: Usage{InputTokens: 3, OutputTokens: 2, CachedInputTokens: 1}},
		{f: Messages, body: `{"content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":4}}`,
			want: Usage{InputTokens: 7, OutputTokens: 2, CachedInputTokens: 4}},
		{f: Responses, body: `{"output":[],"usage":{"input_tokens":3,"output_tokens":2}}`,
			want: Usage{InputTokens: 3, OutputTokens: 2}},
		{f: Gemini, body: `{"candidates":[],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}`,
			want: Usage{InputTokens: 3, OutputTokens: 2}},
		{f: Bedrock, body: `{"output":{},"usage":{"inputTokens":3,"outputTokens":2}}`,
			want: Usage{InputTokens: 3, OutputTokens: 2}},
		{f: Chat, body: `{"choices":[{"message":{"content":"hi"}}],"usage":null}`},
		{f: Chat, body: `{"choices":[{"message":{"content":"hi"}}]}`},
		{f: Chat, body: `{"choices":[]}`, wantErr: true}, // no answer (answerError)
		{f: Chat, body: `{"usage":{"prompt_tokens":"three"}}`, wantErr: true},
		{f: Chat, body: `{"choices":[`, wantErr: true},
		{f: Chat, body: `"text"`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.f.String()+" "+tc.body, func(t *testing.T) {
			out, u, err := Response(nil, []byte(tc.body), RequestInfo{Client: tc.f, Provider: tc.f})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error, usage %+v", u)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.body {
				t.Fatalf("body changed: %s", out)
			}
			if u != tc.want {
				t.Fatalf("usage %+v, want %+v", u, tc.want)
			}
		})
	}
}

// TestPassRequestRepeats: a top-level member given twice reaches the
// provider once, with the last value, the one the gateway read (routed,
// authorized, guarded and counted on); a body without repeats is copied
// as it came, however many members it has.
func TestPassRequestRepeats(t *testing.T) {
	var many, manyRepeat strings.Builder
	many.WriteString(`{"model":"m"`)
	for i := range 30 {
		many.WriteString(`,"x` + itoa(i) + `":` + itoa(i))
	}
	manyRepeat.WriteString(many.String() + `,"x3":"last"}`)
	many.WriteString(`}`)
	cases := []struct {
		desc   string
		f      Format
		body   string
		opts   Options
		want   string
		max    int
		stream bool
	}{
		{desc: "chat: bound and stream", f: Chat,
			body: `{"model":"m","max_tokens":5000,"stream":false,"messages":[{"role":"user","content":"x"}],"max_tokens":10,"stream":true}`,
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":10,"stream":true}`, max: 10, stream: true},
		{desc: "chat: the conversation", f: Chat,
			body: `{"messages":[{"role":"user","content":"first"}], "model" : "m" ,"messages":[{"role":"user","content":"last"}]}`,
			want: `{"model" : "m","messages":[{"role":"user","content":"last"}]}`},
		{desc: "chat: escaped names, model and stream usage set", f: Chat, opts: Options{Model: "b", StreamUsage: true},
			body: `{"model":"a","stre\u0061m":false,"stream":true,"messages":[],"mod\u0065l":"c"}`,
			want: `{"stream":true,"messages":[],"model":"b","stream_options":{"include_usage":true}}`, stream: true},
		{desc: "messages: bound", f: Messages,
			body: `{"model":"m","max_tokens":5000,"messages":[],"max_tokens":10}`,
			want: `{"model":"m","messages":[],"max_tokens":10}`, max: 10},
		{desc: "responses: bound and input", f: Responses,
			body: `{"model":"m","input":"a","max_output_tokens":5000,"input":"b","max_output_tokens":16}`,
			want: `{"model":"m","input":"b","max_output_tokens":16}`, max: 16},
		{desc: "gemini: contents, and the last nested bound read", f: Gemini,
			body: `{"contents":[1],"generationConfig":{"maxOutputTokens":500,"maxOutputTokens":7},"contents":[2]}`,
			want: `{"generationConfig":{"maxOutputTokens":500,"maxOutputTokens":7},"contents":[2]}`, max: 7},
		{desc: "bedrock: inference config", f: Bedrock,
			body: `{"inferenceConfig":{"maxTokens":500},"messages":[],"inferenceConfig":{"maxTokens":5}}`,
			want: `{"messages":[],"inferenceConfig":{"maxTokens":5}}`, max: 5},
		{desc: "chat: many members, none repeated", f: Chat, body: many.String(), want: many.String()},
		{desc: "chat: many members, one repeated past the head's count", f: Chat, body: manyRepeat.String(),
			want: strings.Replace(manyRepeat.String(), `,"x3":3`, "", 1)},
	}
	for _, tc := range cases {
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
				if info.MaxTokens != tc.max || info.Stream != tc.stream {
					t.Errorf("info %+v, want max_tokens %d stream %v", info, tc.max, tc.stream)
				}
			})
		}
	}
}
