package convert

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestStreamReader(t *testing.T) {
	_, in := streamInput(t, "text-tool.bedrock.events")
	info := RequestInfo{Client: Messages, Provider: Bedrock, Model: "requested-model", IncludeUsage: true}
	want := runStream(info, in, nil).out
	resetIDs()
	s := NewStream(info)
	got, err := io.ReadAll(s.Reader(iotest.OneByteReader(bytes.NewReader(in))))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("reader:\n%s\nwant\n%s", got, want)
	}

	// A provider body cut short ends the client's stream with an error
	// event and the reader with ErrTruncated.
	resetIDs()
	s = NewStream(info)
	got, err = io.ReadAll(s.Reader(bytes.NewReader(in[:len(in)/2])))
	if err != ErrTruncated || !bytes.Contains(got, []byte("event: error")) {
		t.Errorf("truncated: %v\n%s", err, got)
	}
}

func TestStreamChunkAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cases := []struct {
		desc             string
		provider, client Format
		prelude, chunk   []byte
	}{
		{desc: "chat to messages", provider: Chat, client: Messages, prelude: []byte(chatPrelude), chunk: []byte(chatChunk)},
		{desc: "messages to chat", provider: Messages, client: Chat, prelude: []byte(anPrelude), chunk: []byte(anChunk)},
		{desc: "bedrock to chat", provider: Bedrock, client: Chat,
			prelude: bedrockFixture(t, []byte(`event messageStart {"role":"assistant"}`)),
			chunk:   bedrockFixture(t, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":" the"}}`))},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "m"})
			out, _ := s.Feed(make([]byte, 0, 4096), tc.prelude)
			out, _ = s.Feed(out[:0], tc.chunk)
			n := testing.AllocsPerRun(100, func() {
				out, _ = s.Feed(out[:0], tc.chunk)
			})
			if n != 0 {
				t.Errorf("%.1f allocations per chunk", n)
			}
		})
	}
}

// TestStreamOutputEstimate: a stream counts the deltas of its answer, so
// that one cut before its usage can still be charged: a token a delta, or
// one for each four bytes of their text when that is more. Signatures are
// no text.
func TestStreamOutputEstimate(t *testing.T) {
	long := `"` + strings.Repeat("abcd", 10) + `"` // 40 bytes: 10 tokens by size
	for _, tc := range []struct {
		name     string
		provider Format
		events   string
		want     int64
	}{
		{"chat, short deltas", Chat, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"Hello"}}]}

data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":" world"}}]}

data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"!"}}]}

`, 3},
		{"chat, one long delta", Chat, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":` + long + `}}]}

`, 10},
		{"anthropic, text and signature", Messages, `event: message_start
data: {"type":"message_start","message":{"id":"m","model":"m","usage":{"input_tokens":7}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"` + strings.Repeat("s", 400) + `"}}

`, 1},
		{"responses", Responses, `event: response.output_text.delta
data: {"type":"response.output_text.delta","delta":"Hi","sequence_number":1}

event: response.output_text.delta
data: {"type":"response.output_text.delta","delta":"there","sequence_number":2}

`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, client := range []Format{tc.provider, Chat} {
				s := NewStream(RequestInfo{Client: client, Provider: tc.provider, Model: "m"})
				if _, err := s.Feed(nil, []byte(tc.events)); err != nil {
					t.Fatalf("client %v: %v", client, err)
				}
				if got := s.OutputEstimate(); got != tc.want {
					t.Errorf("client %v: estimate %d, want %d", client, got, tc.want)
				}
				if tc.provider == Responses {
					break // Responses streams are not translated
				}
			}
		})
	}
}

// TestStreamProviderFailure: a provider's error event is reported with its
// status, type and message whether the stream is translated or passed on
// as it came, and Answered tells an error before the answer from one
// after it (the gateway fails over only from the first).
func TestStreamProviderFailure(t *testing.T) {
	const anthropicStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"m\",\"usage\":{\"input_tokens\":7}}}\n\n"
	const anthropicDelta = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	const anthropicOverloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	const chatError = "data: {\"error\":{\"message\":\"server had an error\",\"type\":\"server_error\"}}\n\n"
	const chatDelta = "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
	for _, tc := range []struct {
		name     string
		provider Format
		events   string
		answered bool
		status   int
		typ, msg string
	}{
		{"anthropic, error first", Messages, anthropicStart + anthropicOverloaded, false, 529, "overloaded_error", "Overloaded"},
		{"anthropic, error after text", Messages, anthropicStart + anthropicDelta + anthropicOverloaded, true, 529, "overloaded_error", "Overloaded"},
		{"anthropic, no error", Messages, anthropicStart + anthropicDelta, true, 0, "", ""},
		{"chat, error first", Chat, chatError, false, 500, "server_error", "server had an error"},
		{"chat, error after text", Chat, chatDelta + chatError, true, 500, "server_error", "server had an error"},
		{"responses, failed first", Responses, "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}}\n\n", false, 500, "", "the provider's response failed"},
		{"responses, error first", Responses, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"sequence_number\":1}\n\n", false, 500, "", "boom"},
	} {
		clients := []Format{tc.provider, Chat, Messages}
		if tc.provider == Responses {
			clients = clients[:1] // Responses streams are not translated
		}
		for _, client := range clients {
			t.Run(tc.name+"/"+client.String(), func(t *testing.T) {
				s := NewStream(RequestInfo{Client: client, Provider: tc.provider, Model: "m"})
				_, _ = s.Feed(nil, []byte(tc.events))
				if got := s.Answered(); got != tc.answered {
					t.Errorf("Answered %v, want %v", got, tc.answered)
				}
				f, failed := s.ProviderFailure()
				if failed != (tc.status != 0) || f.Status != tc.status || f.Type != tc.typ || string(f.Message) != tc.msg {
					t.Errorf("ProviderFailure %d %q %q (%v), want %d %q %q", f.Status, f.Type, f.Message, failed, tc.status, tc.typ, tc.msg)
				}
				s.Reset(RequestInfo{Client: client, Provider: tc.provider})
				if _, failed := s.ProviderFailure(); failed || s.Answered() {
					t.Errorf("Reset kept the failure or the answer")
				}
			})
		}
	}
}

// TestStreamInterleavedToolCalls: a Chat provider that interleaves two tool
// calls' arguments (0, 1, 0, 1) gives an Anthropic client each call's
// arguments whole, never a delta after its block stopped, and a Responses
// client each item's whole arguments: the second call is held back until
// the calls end. The first call's last piece used to come after its
// block's content_block_stop, lost to the client.
func TestStreamInterleavedToolCalls(t *testing.T) {
	_, in := streamInput(t, "tools-interleaved.chat.sse")
	want := map[string]string{"f1": `{"a":1}`, "f2": `{"b":2}`}
	for _, client := range []Format{Messages, Responses} {
		got := runStream(RequestInfo{Client: client, Provider: Chat, Model: "m", Stream: true}, in, []int{len(in) / 2})
		if got.feedErr != nil || got.closeEr != nil {
			t.Fatalf("%v: %v %v", client, got.feedErr, got.closeEr)
		}
		args := map[string]string{}
		var f sseFramer
		f.reset(MaxEventBytes)
		p := got.out
		names := map[int]string{}
		stopped := map[int]bool{}
		for {
			ev, rest, ok, err := f.next(p)
			if err != nil || !ok {
				break
			}
			p = rest
			var e struct {
				Type         string
				Index        int
				ContentBlock struct{ Name string } `json:"content_block"`
				Delta        json.RawMessage
				Item         struct{ Name, Arguments string }
			}
			if err := json.Unmarshal(ev.data, &e); err != nil {
				t.Fatalf("%v: %s: %v", client, ev.data, err)
			}
			switch e.Type {
			case "content_block_start":
				names[e.Index] = e.ContentBlock.Name
			case "content_block_delta":
				if stopped[e.Index] {
					t.Errorf("%v: a delta for block %d after its stop", client, e.Index)
				}
				var d struct {
					PartialJSON string `json:"partial_json"`
				}
				_ = json.Unmarshal(e.Delta, &d)
				args[names[e.Index]] += d.PartialJSON
			case "content_block_stop":
				stopped[e.Index] = true
			case "response.output_item.done":
				args[e.Item.Name] = e.Item.Arguments
			}
		}
		for name, a := range want {
			if args[name] != a {
				t.Errorf("%v: %s's arguments %q, want %q", client, name, args[name], a)
			}
		}
	}
}

// TestStreamEnded: Ended holds once the client's stream has its last
// event, and never after an error, whatever the formats.
func TestStreamEnded(t *testing.T) {
	done := chatPrelude + chatChunk + `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	for _, tc := range []struct {
		desc   string
		client Format
		in     string
		want   bool
	}{
		{"passed through, before [DONE]", Chat, chatPrelude + chatChunk, false},
		{"passed through, [DONE]", Chat, done, true},
		{"translated, [DONE]", Messages, done, true},
		{"translated to responses, [DONE]", Responses, done, true},
		{"an error event", Messages, chatPrelude + `data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n", false},
		{"an event that does not read", Responses, chatPrelude + "data: {\"choices\":\n\n", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: Chat, Model: "m", Stream: true})
			out, err := s.Feed(nil, []byte(tc.in))
			if got := s.Ended(); got != tc.want {
				t.Errorf("Ended %v (%v), want %v\n%s", got, err, tc.want, out)
			}
		})
	}
}
