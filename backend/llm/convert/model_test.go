package convert

import (
	"strings"
	"testing"
)

// TestResponseModel: the model a provider's answer says answered, whole
// (AppendResponseModel) and streamed (Stream.Model), in each provider
// format; none for Bedrock, whose answers name none, for a model that is
// no string, and for one longer than MaxModelBytes.
func TestResponseModel(t *testing.T) {
	long := strings.Repeat("m", MaxModelBytes+1)
	for _, tc := range []struct {
		desc     string
		provider Format
		body     string
		want     string
	}{
		{"chat", Chat, `{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[]}`, "gpt-4o-2024-08-06"},
		{"chat, escaped", Chat, `{"model":"gpt\u002d4o","choices":[]}`, "gpt-4o"},
		{"chat, the last of two", Chat, `{"model":"a","choices":[],"model":"b"}`, "b"},
		{"messages", Messages, `{"id":"m","type":"message","model":"claude-sonnet-4-5-20250929","content":[]}`, "claude-sonnet-4-5-20250929"},
		{"responses", Responses, `{"id":"r","object":"response","model":"gpt-5-2025-08-07","output":[]}`, "gpt-5-2025-08-07"},
		{"gemini", Gemini, `{"candidates":[],"modelVersion":"gemini-2.5-flash","responseId":"x"}`, "gemini-2.5-flash"},
		{"gemini's model member is not its version", Gemini, `{"candidates":[],"model":"x"}`, ""},
		{"bedrock", Bedrock, `{"output":{},"model":"x"}`, ""},
		{"no string", Chat, `{"model":null}`, ""},
		{"too long", Chat, `{"model":"` + long + `"}`, ""},
		{"not JSON", Chat, `{"model":"x"`, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := string(AppendResponseModel([]byte("kept:"), []byte(tc.body), tc.provider)); got != "kept:"+tc.want {
				t.Errorf("AppendResponseModel %q, want %q", got, "kept:"+tc.want)
			}
		})
	}
	gemini := func(model string) string {
		return `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"index":0}],"modelVersion":"` + model + `"}` + "\n\n"
	}
	for _, tc := range []struct {
		desc             string
		provider, client Format
		stream           string
		want             string
	}{
		{"chat passed through", Chat, Chat, chatPrelude + chatChunk, "gpt-4o"},
		{"chat, a first chunk without a model", Chat, Messages, `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n" + chatChunk, "gpt-4o"},
		{"messages to chat", Messages, Chat, anPrelude + anChunk, "claude"},
		{"gemini to responses", Gemini, Responses, gemini("gemini-2.5-flash") + gemini("other"), "gemini-2.5-flash"},
		{"responses passed through", Responses, Responses, rsPrelude + rsChunk, "gpt-5"},
		{"too long", Gemini, Chat, gemini(long), ""},
	} {
		t.Run("stream: "+tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "asked", Stream: true})
			if _, err := s.Feed(nil, []byte(tc.stream)); err != nil {
				t.Fatal(err)
			}
			if got := string(s.Model()); got != tc.want {
				t.Errorf("Model %q, want %q", got, tc.want)
			}
			s.Reset(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "asked", Stream: true})
			if s.Model() != nil {
				t.Errorf("after Reset: %q", s.Model())
			}
		})
	}
	t.Run("bedrock stream", func(t *testing.T) {
		s := NewStream(RequestInfo{Client: Chat, Provider: Bedrock, Model: "asked", Stream: true})
		if _, err := s.Feed(nil, bedrockFixture(t, []byte(`event messageStart {"role":"assistant"}`))); err != nil || s.Model() != nil {
			t.Errorf("%v, %q: want no model", err, s.Model())
		}
	})
}

func TestAppendResponseModelDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	body := []byte(`{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."}}],"usage":{"prompt_tokens":9,"completion_tokens":3}}`)
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendResponseModel(buf[:0], body, Chat) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestEmbeddingsUsage: an embeddings answer's prompt_tokens are its input;
// one without usage, or not JSON, has none.
func TestEmbeddingsUsage(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Usage
	}{
		{`{"object":"list","data":[],"model":"m","usage":{"prompt_tokens":8,"total_tokens":8}}`, Usage{InputTokens: 8}},
		{`{"object":"list","data":[],"model":"m"}`, Usage{}},
		{`{"object":"list","usage":null}`, Usage{}},
		{`{"usage":{"prompt_tokens":"x"}}`, Usage{}},
		{`not json`, Usage{}},
	} {
		if got := EmbeddingsUsage([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.body, got, tc.want)
		}
	}
}
