package convert

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/relaygate/gateway/codec/sse"
)

// TestBigScan: the scanner of events too large to hold keeps the top-level
// type and the usage (top-level, or in the top-level response or message)
// as the decoder reads them, whatever splits the data, and nothing of a
// "usage" deeper down or inside a string.
func TestBigScan(t *testing.T) {
	pad := strings.Repeat("QUJD", 300)
	for _, tc := range []struct {
		name, data, typ, usage string
	}{
		{"responses completed", `{"type":"response.completed","sequence_number":9,"response":{"id":"r","output":[{"type":"image_generation_call","result":"` + pad + `","usage":{"input_tokens":999}}],"usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}}`,
			`"response.completed"`, `{"input_tokens":10,"output_tokens":20,"total_tokens":30}`},
		{"chat chunk", `{"id":"c","choices":[{"index":0,"delta":{"content":"` + pad + `\"usage\":{\"prompt_tokens\":1}\\"}}],"usage" : {"prompt_tokens":3,"completion_tokens":4} }`,
			``, `{"prompt_tokens":3,"completion_tokens":4}`},
		{"message start", `{"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":7,"output_tokens":1}}}`,
			`"message_start"`, `{"input_tokens":7,"output_tokens":1}`},
		{"repeated, the last counts", `{"usage":{"a":1},"text":"` + pad + `","usage":{"b":2}}`, ``, `{"b":2}`},
		{"usage null", `{"type":"x","usage":null}`, `"x"`, `null`},
		{"escaped key", `{"us\u0061ge":{"a":1},"t\"ype":"y"}`, ``, ``},
		{"nested objects are not followed", `{"data":{"usage":{"a":1},"message":{"usage":{"b":2}}}}`, ``, ``},
		{"top-level array", `[{"usage":{"a":1}},"usage",{"type":"x"}]`, ``, ``},
		{"usage too large", `{"usage":{"pad":"` + strings.Repeat("x", bigKeep) + `"}}`, ``, ``},
		{"gemini", `{"candidates":[{"content":{"parts":[{"inlineData":{"data":"` + pad + `"}}]}}],"usageMetadata":{"promptTokenCount":5}}`, ``, `{"promptTokenCount":5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.data)) {
				t.Fatal("the test's data is not JSON")
			}
			for _, step := range []int{1, 2, 3, 7, 64, len(tc.data)} {
				var b bigScan
				b.reset()
				for i := 0; i < len(tc.data); i += step {
					b.write([]byte(tc.data[i:min(i+step, len(tc.data))]))
				}
				if string(b.typ) != tc.typ || string(b.usage) != tc.usage || !b.closed {
					t.Fatalf("step %d: type %q usage %q closed %v, want %q %q", step, b.typ, b.usage, b.closed, tc.typ, tc.usage)
				}
			}
		})
	}
}

// sseData is one SSE event of type typ (none when "") with data.
func sseData(typ, data string) string {
	if typ == "" {
		return "data: " + data + "\n\n"
	}
	return "event: " + typ + "\ndata: " + data + "\n\n"
}

// TestStreamBigEvent: an event past MaxEventBytes in a same-format stream
// (a Responses event with an image in base64, a huge delta) is passed on
// unread, as it came or, the usage chunk stripped, event by event; the
// events after it are still read, and so is the usage and type in it, so
// the usage a provider reports (last, or in the big event itself) is
// known, the end is seen, and the stream's estimate counts it as one
// delta, not as its bytes. It used to make the rest of the stream blind:
// usage lost, and every byte after it counted as text, so the token
// bucket was charged the stream's bytes over four. With the usage chunk
// stripped, the stream failed.
func TestStreamBigEvent(t *testing.T) {
	huge := strings.Repeat("iVBORw0KGgo", MaxEventBytes/11+100) // base64 past the bound
	chatDelta := func(s string) string {
		return sseData("", `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"`+s+`"},"finish_reason":null}]}`)
	}
	chatUsage := sseData("", `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":22,"total_tokens":33}}`)
	chatStop := sseData("", `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	rsEvent := func(typ, rest string) string {
		return sseData(typ, `{"type":"`+typ+`","sequence_number":1`+rest+`}`)
	}
	rsCompleted := func(output string) string {
		return rsEvent("response.completed", `,"response":{"id":"r","status":"completed","output":[`+output+`],"usage":{"input_tokens":11,"output_tokens":22,"total_tokens":33}}`)
	}
	image := `{"type":"image_generation_call","id":"ig","status":"completed","result":"` + huge + `"}`
	anStart := sseData("message_start", `{"type":"message_start","message":{"id":"m","model":"m","content":[],"usage":{"input_tokens":11,"output_tokens":1}}}`)
	anBlock := sseData("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	anDelta := func(s string) string {
		return sseData("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+s+`"}}`)
	}
	anEnd := sseData("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		sseData("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":22}}`) +
		sseData("message_stop", `{"type":"message_stop"}`)

	for _, tc := range []struct {
		name     string
		info     RequestInfo
		events   []string
		stripped int // the event a client that asked for no usage does not get (-1: none)
		noEnd    bool
		closeErr error
		usage    Usage
		estimate int64 // at most
	}{
		{name: "chat, as it came", info: RequestInfo{Client: Chat, Provider: Chat, IncludeUsage: true},
			events: []string{chatDelta("a"), chatDelta(huge), chatStop, chatUsage, "data: [DONE]\n\n"}, stripped: -1,
			usage: Usage{InputTokens: 11, OutputTokens: 22}, estimate: 2},
		{name: "chat, usage stripped", info: RequestInfo{Client: Chat, Provider: Chat},
			events: []string{chatDelta("a"), chatDelta(huge), chatStop, chatUsage, "data: [DONE]\n\n"}, stripped: 3,
			usage: Usage{InputTokens: 11, OutputTokens: 22}, estimate: 2},
		{name: "chat, usage stripped, the big chunk first and in lines", info: RequestInfo{Client: Chat, Provider: Chat},
			events: []string{"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"" + huge + "\"}}]}\r\n\r\n", chatStop, chatUsage, "data: [DONE]\n\n"}, stripped: 2,
			usage: Usage{InputTokens: 11, OutputTokens: 22}, estimate: 1},
		{name: "chat, usage stripped, the big chunk last", info: RequestInfo{Client: Chat, Provider: Chat},
			events: []string{chatDelta("a"), chatUsage, chatDelta(huge)}, stripped: 1,
			usage: Usage{InputTokens: 11, OutputTokens: 22}, estimate: 2},
		{name: "responses, usage in the big last event", info: RequestInfo{Client: Responses, Provider: Responses},
			events: []string{rsEvent("response.created", `,"response":{"id":"r","status":"in_progress","output":[],"usage":null}`),
				rsEvent("response.output_item.done", `,"output_index":0,"item":`+image), rsCompleted(image)}, stripped: -1,
			usage: Usage{InputTokens: 11, OutputTokens: 22}, estimate: 0},
		{name: "responses, the big last event without its blank line", info: RequestInfo{Client: Responses, Provider: Responses},
			events: []string{rsEvent("response.output_text.delta", `,"delta":"hi"`), strings.TrimSuffix(rsCompleted(image), "\n\n")}, stripped: -1,
			usage: Usage{InputTokens: 11, OutputTokens: 22}, estimate: 1},
		{name: "responses, cut inside the big event", info: RequestInfo{Client: Responses, Provider: Responses},
			events: []string{rsEvent("response.output_text.delta", `,"delta":"hi"`), rsCompleted(image)[:MaxEventBytes+500]}, stripped: -1,
			noEnd: true, closeErr: ErrTruncated, estimate: 1},
		{name: "anthropic, a big delta", info: RequestInfo{Client: Messages, Provider: Messages},
			events: []string{anStart, anBlock, anDelta("a"), anDelta(huge), anDelta("b"), anEnd}, stripped: -1,
			usage: Usage{InputTokens: 11, OutputTokens: 22}, estimate: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.info.Stream = true
			in := []byte(strings.Join(tc.events, ""))
			want := in
			if tc.stripped >= 0 {
				want = []byte(strings.Join(append(append([]string(nil), tc.events[:tc.stripped]...), tc.events[tc.stripped+1:]...), ""))
				// Written event by event: the lines of the big event before
				// it outgrew the bound too.
				want = bytes.Replace(want, []byte(",\r\n"), []byte(",\n"), 1)
			}
			bigAt := strings.Index(string(in), huge)
			cutSets := [][]int{nil, {len(in) / 3, len(in) / 2}}
			for _, at := range []int{bigAt - 40, bigAt - 1, bigAt + 1, bigAt + MaxEventBytes - 40, bigAt + len(huge) - 2, bigAt + len(huge) + 3, bigAt + len(huge) + 8} {
				for _, d := range []int{0, 1, 17} {
					if c := at + d; c > 0 && c < len(in) {
						cutSets = append(cutSets, []int{c})
					}
				}
			}
			for _, cuts := range cutSets {
				got := runStream(tc.info, in, cuts)
				out := got.out
				if tc.stripped < 0 && !tc.noEnd && !strings.HasSuffix(tc.events[len(tc.events)-1], "\n\n") {
					out = bytes.TrimSuffix(out, []byte("\n\n")) // the blank line the gateway adds
				}
				if got.feedErr != nil || got.closeEr != tc.closeErr {
					t.Fatalf("cuts %v: feed %v, close %v, want close %v", cuts, got.feedErr, got.closeEr, tc.closeErr)
				}
				if !bytes.Equal(out, want) {
					t.Fatalf("cuts %v: %d bytes out, want %d: %.200q ... %.200q", cuts, len(out), len(want), out, out[max(len(out)-200, 0):])
				}
				if got.usage != tc.usage {
					t.Errorf("cuts %v: usage %+v, want %+v", cuts, got.usage, tc.usage)
				}
				s := NewStream(tc.info)
				_, _ = s.Feed(nil, in)
				_, _ = s.Close(nil)
				if e := s.OutputEstimate(); e > tc.estimate {
					t.Errorf("estimate %d, want at most %d (deltas, not bytes)", e, tc.estimate)
				}
			}
		})
	}
}

// TestStreamBigEventRead: an event past MaxEventBytes that a stream must
// read (translated, masked, tapped for remote guards) still ends it with an
// error event: its text cannot be translated, masked or judged unread.
func TestStreamBigEventRead(t *testing.T) {
	_, head := streamInput(t, "text-tools.chat.sse")
	head = head[:bytes.Index(head, []byte("\n\n"))+2] // the first event
	big := append([]byte(`data: {"choices":[{"index":0,"delta":{"content":"`), bytes.Repeat([]byte("x"), MaxEventBytes+10)...)
	big = append(big, "\"}}]}\n\ndata: [DONE]\n\n"...)
	in := append(append([]byte(nil), head...), big...)
	cuts := []int{len(head) + 100, len(head) + MaxEventBytes/2, len(head) + MaxEventBytes + 40}
	for _, tc := range []struct {
		name string
		info RequestInfo
		tap  bool
	}{
		{"translated", RequestInfo{Client: Messages, Provider: Chat, Stream: true}, false},
		{"masked", RequestInfo{Client: Chat, Provider: Chat, Stream: true, Mask: testGuard(t)}, false},
		{"tapped", RequestInfo{Client: Chat, Provider: Chat, Stream: true, IncludeUsage: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(tc.info)
			if tc.tap {
				s.TapText()
			}
			var out []byte
			var err error
			prev := 0
			for _, c := range append(cuts, len(in)) {
				if out, err = s.Feed(out, in[prev:c]); err != nil {
					break
				}
				prev = c
			}
			if err == nil || !bytes.Contains(out, []byte("too large")) || bytes.Contains(out, []byte("xxxx")) {
				t.Errorf("err %v, %d bytes out: %.300q", err, len(out), out)
			}
		})
	}
}

// FuzzSSEFramerSkip: a framer that skips events past its bound, written
// out as a stream relayed event by event writes them (events read: their
// data; skipped ones: their start, then their bytes as they come), gives a
// stream with the same events' data as the input, for any input cut
// anywhere.
func FuzzSSEFramerSkip(f *testing.F) {
	f.Add([]byte("data: 0123456789abcdef0123456789\r\ndata: x\n\ndata: y\r\n\r\n"), uint8(3))
	f.Add([]byte("event: e\ndata: 0123456789\ndata: 0123456789\r: c\rid: 1\r\rdata: z\n\n"), uint8(1))
	f.Add([]byte("\xef\xbb\xbfdata: 0123456789abcdef0123456789\n\n"), uint8(30))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		const max = 16
		datas := func(b []byte) []string {
			var out []string
			r := sse.NewReader(bytes.NewReader(b), 1<<20)
			for {
				e, err := r.Next()
				if err != nil {
					return out
				}
				out = append(out, string(e.Data))
			}
		}
		var fr sseFramer
		fr.reset(max)
		fr.skipBig = true
		var out []byte
		n := int(step%31) + 1
		for i := 0; i < len(in); i += n {
			p := in[i:min(i+n, len(in))]
			for len(p) > 0 {
				skipping := fr.big.on
				e, rest, ok, err := fr.next(p)
				if err != nil {
					t.Fatal(err)
				}
				if skipping {
					out = append(out, p[:len(p)-len(rest)]...)
				}
				if !ok {
					break
				}
				p = rest
				switch {
				case e.begun:
					out = fr.prefix(out)
				case e.big:
					if fr.skipLF {
						out = append(out, '\n')
					}
				case e.comment:
				default:
					out = sse.AppendEvent(out, sse.Event{Data: e.data})
				}
			}
		}
		got, want := datas(out), datas(in)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("events %q, want %q (out %q)", got, want, out)
		}
	})
}
