package convert

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestStreamKeepsBoundedAnswer: what a Stream keeps of an answer for the
// events that repeat it (a Responses client's done events and
// response.completed, a Chat provider's tool call held while another is
// open) is bounded: an endless answer fails the stream with an error event
// in the client's format once the bound is reached, instead of growing
// the gateway's memory until the provider stops. The bound is set small
// here; the bytes kept are checked after every piece fed.
func TestStreamKeepsBoundedAnswer(t *testing.T) {
	const limit = 4 << 10
	chatCall := func(index int, id, args string) string {
		head := ""
		if id != "" {
			head = `"id":"` + id + `","type":"function","function":{"name":"f","arguments":` + args + `}`
		} else {
			head = `"function":{"arguments":` + args + `}`
		}
		return `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":` + string(rune('0'+index)) + `,` + head + `}]},"finish_reason":null}]}` + "\n\n"
	}
	for _, tc := range []struct {
		desc             string
		provider, client Format
		prelude, chunk   []byte
		// wantError is what the client's error event starts with.
		wantError string
	}{
		{
			desc: "bedrock text to responses", provider: Bedrock, client: Responses,
			prelude:   bedrockFixture(t, []byte(`event messageStart {"role":"assistant"}`)),
			chunk:     bedrockFixture(t, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":"all work and no play "}}`)),
			wantError: "event: error\ndata: {\"type\":\"error\"",
		},
		{
			desc: "bedrock reasoning to responses", provider: Bedrock, client: Responses,
			prelude:   bedrockFixture(t, []byte(`event messageStart {"role":"assistant"}`)),
			chunk:     bedrockFixture(t, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hmm, "}}}`)),
			wantError: "event: error\ndata: {\"type\":\"error\"",
		},
		{
			desc: "chat tool call arguments to responses", provider: Chat, client: Responses,
			prelude:   []byte(chatPrelude + chatCall(0, "call_1", `"{\"a\":\""`)),
			chunk:     []byte(chatCall(0, "", `"aaaaaaaaaaaaaaaaaaaaaaaa"`)),
			wantError: "event: error\ndata: {\"type\":\"error\"",
		},
		{
			desc: "messages text to responses", provider: Messages, client: Responses,
			prelude:   []byte(anPrelude),
			chunk:     []byte(anChunk),
			wantError: "event: error\ndata: {\"type\":\"error\"",
		},
		{
			// The second call's arguments are held while the first is
			// open, whatever the client's format.
			desc: "chat held tool call to messages", provider: Chat, client: Messages,
			prelude:   []byte(chatPrelude + chatCall(0, "call_1", `"{}"`) + chatCall(1, "call_2", `"{\"a\":\""`)),
			chunk:     []byte(chatCall(1, "", `"aaaaaaaaaaaaaaaaaaaaaaaa"`)),
			wantError: "event: error\ndata: {\"type\":\"error\"",
		},
		{
			desc: "chat held tool call to chat (usage chunk stripped)", provider: Chat, client: Chat,
			prelude:   []byte(chatPrelude + chatCall(0, "call_1", `"{}"`) + chatCall(1, "call_2", `"{\"a\":\""`)),
			chunk:     []byte(chatCall(1, "", `"aaaaaaaaaaaaaaaaaaaaaaaa"`)),
			wantError: `data: {"error":`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "m", Stream: true})
			s.keptMax = limit
			out, err := s.Feed(nil, tc.prelude)
			if err != nil {
				t.Fatalf("prelude: %v\n%s", err, out)
			}
			var fed int
			for fed = 0; fed < 64*limit && err == nil; fed += len(tc.chunk) {
				n := len(out)
				out, err = s.Feed(out, tc.chunk)
				if s.kept > limit {
					t.Fatalf("%d bytes kept after %d fed, over the bound %d", s.kept, fed, limit)
				}
				if err == nil && bytes.Contains(out[n:], []byte("error")) {
					t.Fatalf("an error event without an error:\n%s", out[n:])
				}
			}
			if err == nil {
				t.Fatalf("%d bytes fed, %d kept: the stream goes on", fed, s.kept)
			}
			if !strings.Contains(err.Error(), errKeptTooMuch) {
				t.Errorf("error %v, want %q", err, errKeptTooMuch)
			}
			// The error event is the stream's last: nothing of the event
			// that went over the bound follows it, and nothing else does.
			i := bytes.LastIndex(out, []byte(tc.wantError))
			if i < 0 || !bytes.Contains(out[i:], []byte(errKeptTooMuch)) || bytes.Count(out[i:], []byte("\n\n")) != 1 || !bytes.HasSuffix(out, []byte("\n\n")) {
				t.Fatalf("no error event last:\n%s", tail(out))
			}
			if bytes.Contains(out, []byte("response.completed")) || bytes.Contains(out, []byte("message_stop")) || bytes.Contains(out, []byte("[DONE]")) {
				t.Errorf("the stream ended as complete:\n%s", tail(out))
			}
			if tc.client == Responses {
				checkSequence(t, out)
			}
			if more, err2 := s.Feed(nil, tc.chunk); err2 == nil || len(more) > 0 {
				t.Errorf("after the error: %v, %q", err2, more)
			}
			if more, err2 := s.Close(nil); err2 == nil || len(more) > 0 {
				t.Errorf("closed after the error: %v, %q", err2, more)
			}
		})
	}

	// Under the bound nothing changes: held calls written out free their
	// part of it, and the stream completes.
	t.Run("under the bound", func(t *testing.T) {
		s := NewStream(RequestInfo{Client: Responses, Provider: Chat, Model: "m", Stream: true})
		s.keptMax = limit
		in := chatPrelude + chatCall(0, "call_1", `"{}"`) + chatCall(1, "call_2", `"{\"a\":\"`+strings.Repeat("b", limit/4)+`\"}"`) +
			`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
		out, err := s.Feed(nil, []byte(in))
		if err == nil {
			out, err = s.Close(out)
		}
		if err != nil || !bytes.Contains(out, []byte("event: response.completed")) || s.heldKept != 0 {
			t.Fatalf("%v, %d held bytes kept\n%s", err, s.heldKept, tail(out))
		}
	})
}

// checkSequence checks that a Responses stream's sequence numbers count
// from 0 without a gap.
func checkSequence(t *testing.T, out []byte) {
	t.Helper()
	want := 0
	for _, ev := range bytes.Split(out, []byte("\n\n")) {
		_, rest, ok := bytes.Cut(ev, []byte(`"sequence_number":`))
		if !ok {
			continue
		}
		n := 0
		for _, c := range rest {
			if c < '0' || c > '9' {
				break
			}
			n = 10*n + int(c-'0')
		}
		if n != want {
			t.Fatalf("sequence number %d, want %d:\n%s", n, want, ev)
		}
		want++
	}
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// TestStreamScratchStaysSmall: a provider's function calls without ids
// get ids the gateway makes, and each made id is a copy: an endless
// stream of id-less calls (Gemini never sends ids) must not grow the
// stream's scratch buffer by one id per call.
func TestStreamScratchStaysSmall(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		provider Format
		event    func(i int) string
	}{
		{"gemini", Gemini, func(int) string {
			return `data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}}}]}}]}` + "\n\n"
		}},
		{"chat", Chat, func(i int) string {
			return `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":` + strconv.Itoa(i) + `,"type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n"
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: Messages, Provider: tc.provider, Model: "m", Stream: true})
			for i := range 5000 {
				if _, err := s.Feed(nil, []byte(tc.event(i))); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			if n := cap(s.scratch); n > 4<<10 {
				t.Fatalf("scratch grew to %d bytes over 5000 calls", n)
			}
		})
	}
}
