package convert

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	assestream "github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go/v3"
	ossestream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/sse"
)

// clientText is what a client reads of a stream's answer: the text deltas
// joined, and for Responses the full texts the stream repeats
// (output_text.done, content_part.done, output_item.done and the final
// response), which must all equal the deltas joined.
type clientText struct {
	deltas string
	finals []string
	// seqs are a Responses stream's sequence numbers in order.
	seqs []int64
}

// readClientStream reads a client stream as its client would, failing on
// an event whose data is not JSON.
func readClientStream(t *testing.T, client Format, out []byte) clientText {
	t.Helper()
	var ct clientText
	var sb strings.Builder
	r := sse.NewReader(bytes.NewReader(out), 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%v stream: %v\n%s", client, err, out)
		}
		if string(ev.Data) == "[DONE]" {
			continue
		}
		if !llm.Valid(ev.Data) {
			t.Fatalf("%v event %q: data is not JSON: %s", client, ev.Type, ev.Data)
		}
		switch client {
		case Chat:
			var c struct {
				Choices []struct {
					Index int
					Delta struct{ Content string }
				}
			}
			mustUnmarshal(t, ev.Data, &c)
			for _, ch := range c.Choices {
				if ch.Index == 0 {
					sb.WriteString(ch.Delta.Content)
				}
			}
		case Messages:
			var e struct {
				Type         string
				ContentBlock struct{ Type, Text string } `json:"content_block"`
				Delta        struct{ Type, Text string }
			}
			mustUnmarshal(t, ev.Data, &e)
			switch {
			case e.Type == "content_block_start" && e.ContentBlock.Type == "text":
				sb.WriteString(e.ContentBlock.Text)
			case e.Type == "content_block_delta" && e.Delta.Type == "text_delta":
				sb.WriteString(e.Delta.Text)
			}
		case Responses:
			var e struct {
				Type           string
				SequenceNumber *int64 `json:"sequence_number"`
				Delta          string
				Text           string
				Part           struct{ Type, Text string }
				Item           responsesItemText
				Response       struct{ Output []responsesItemText }
			}
			mustUnmarshal(t, ev.Data, &e)
			if e.SequenceNumber != nil {
				ct.seqs = append(ct.seqs, *e.SequenceNumber)
			}
			switch e.Type {
			case "response.output_text.delta":
				sb.WriteString(e.Delta)
			case "response.output_text.done":
				ct.finals = append(ct.finals, e.Text)
			case "response.content_part.done":
				if e.Part.Type == "output_text" {
					ct.finals = append(ct.finals, e.Part.Text)
				}
			case "response.output_item.done":
				if e.Item.Type == "message" {
					ct.finals = append(ct.finals, e.Item.text())
				}
			case "response.completed", "response.incomplete":
				var all strings.Builder
				for _, it := range e.Response.Output {
					all.WriteString(it.text())
				}
				ct.finals = append(ct.finals, all.String())
			}
		}
	}
	ct.deltas = sb.String()
	return ct
}

// checkMaskedText holds a masked stream's text to the unmasked stream's,
// masked whole.
func checkMaskedText(t *testing.T, client Format, masked, plain []byte, mask func(string) string) {
	t.Helper()
	want := mask(readClientStream(t, client, plain).deltas)
	got := readClientStream(t, client, masked)
	if got.deltas != want {
		t.Errorf("%v: text deltas join to\n%q\nwant\n%q", client, got.deltas, want)
	}
	for _, f := range got.finals {
		if f != want {
			t.Errorf("%v: a final text is %q, want %q", client, f, want)
		}
	}
	for i := 1; i < len(got.seqs); i++ {
		if got.seqs[i] != got.seqs[i-1]+1 {
			t.Errorf("%v: sequence numbers %v are not contiguous", client, got.seqs)
			break
		}
	}
}

var maskedStreamCases = []struct{ desc, file string }{
	{desc: "chat: an SSN and an email split across chunks, a card, a tool call", file: "pii-split.chat.sse"},
	{desc: "messages: an SSN split across deltas beside thinking and a tool use", file: "pii-split.messages.sse"},
	{desc: "responses: an SSN and an email split across deltas beside reasoning and a call", file: "pii-split.responses.sse"},
	{desc: "gemini: an email and a SIN split across events", file: "pii-split.gemini.sse"},
	{desc: "bedrock: an SSN and a card split across deltas", file: "pii-split.bedrock.events"},
}

func maskedStreamInput(t testing.TB, file string) (Format, []byte) {
	t.Helper()
	in := readFile(t, filepath.Join("testdata/masked", file))
	name := file[:strings.LastIndexByte(file, '.')]
	provider, ok := ParseFormat(name[strings.LastIndexByte(name, '.')+1:])
	if !ok {
		t.Fatalf("no format in %s", file)
	}
	if provider == Bedrock {
		in = bedrockFixture(t, in)
	}
	return provider, in
}

func TestMaskedStreamGolden(t *testing.T) {
	g := testGuard(t)
	for _, tc := range maskedStreamCases {
		t.Run(tc.desc, func(t *testing.T) {
			provider, in := maskedStreamInput(t, tc.file)
			base := tc.file[:strings.LastIndexByte(tc.file, '.')]
			for _, client := range clientsOf(provider) {
				info := RequestInfo{Client: client, Provider: provider, Model: "requested-model", Stream: true, IncludeUsage: true}
				plain := runStream(info, in, nil)
				info.Mask = g
				whole := runStream(info, in, nil)
				checkGolden(t, filepath.Join("testdata/masked", base+"."+client.String()+".golden"), whole.golden())
				if whole.feedErr != nil || whole.closeEr != nil {
					t.Errorf("%v: %v %v", client, whole.feedErr, whole.closeEr)
				}
				if whole.usage != plain.usage {
					t.Errorf("%v: usage %+v, unmasked %+v", client, whole.usage, plain.usage)
				}
				checkMaskedText(t, client, whole.out, plain.out, func(s string) string { return maskString(g, s) })

				// Fed byte by byte, and cut at random places, the stream
				// masks the same.
				var ones []int
				for i := 1; i < len(in); i++ {
					ones = append(ones, i)
				}
				if got := runStream(info, in, ones); !bytes.Equal(got.golden(), whole.golden()) {
					t.Errorf("%v: fed byte by byte:\n%s\nwant\n%s", client, got.golden(), whole.golden())
				}
				rng := rand.New(rand.NewPCG(2, uint64(len(in))))
				for round := 0; round < 20; round++ {
					var cuts []int
					for i := 1; i < len(in); i++ {
						if rng.IntN(9) == 0 {
							cuts = append(cuts, i)
						}
					}
					if got := runStream(info, in, cuts); !bytes.Equal(got.golden(), whole.golden()) {
						t.Fatalf("%v: cut at %v:\n%s\nwant\n%s", client, cuts, got.golden(), whole.golden())
					}
				}
			}
		})
	}
}

// TestMaskedStreamSDK reads masked streams with the official SDKs.
func TestMaskedStreamSDK(t *testing.T) {
	g := testGuard(t)
	for _, tc := range maskedStreamCases {
		t.Run(tc.desc, func(t *testing.T) {
			provider, in := maskedStreamInput(t, tc.file)
			for _, client := range clientsOf(provider) {
				info := RequestInfo{Client: client, Provider: provider, Model: "m", Stream: true, IncludeUsage: true}
				want := maskString(g, readClientStream(t, client, runStream(info, in, nil).out).deltas)
				info.Mask = g
				out := runStream(info, in, nil).out
				var got []string // the text as the SDK assembles it, possibly twice
				switch client {
				case Chat:
					s := ossestream.NewStream[openai.ChatCompletionChunk](ossestream.NewDecoder(sseResponse(out)), nil)
					var acc openai.ChatCompletionAccumulator
					for s.Next() {
						acc.AddChunk(s.Current())
					}
					if err := s.Err(); err != nil {
						t.Fatalf("chat SDK: %v", err)
					}
					got = append(got, acc.Choices[0].Message.Content)
				case Messages:
					s := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(sseResponse(out)), nil)
					var m anthropic.Message
					for s.Next() {
						if err := m.Accumulate(s.Current()); err != nil {
							t.Fatalf("messages SDK: %v", err)
						}
					}
					if err := s.Err(); err != nil {
						t.Fatalf("messages SDK: %v", err)
					}
					var text string
					for _, b := range m.Content {
						if b.Type == "text" {
							text += b.Text
						}
					}
					got = append(got, text)
				case Responses:
					s := ossestream.NewStream[responses.ResponseStreamEventUnion](ossestream.NewDecoder(sseResponse(out)), nil)
					var deltas, final string
					for s.Next() {
						switch ev := s.Current(); ev.Type {
						case "response.output_text.delta":
							deltas += ev.Delta
						case "response.completed":
							final = ev.Response.OutputText()
						}
					}
					if err := s.Err(); err != nil {
						t.Fatalf("responses SDK: %v", err)
					}
					got = append(got, deltas, final)
				}
				for _, text := range got {
					if text != want {
						t.Errorf("%v SDK reads %q, want %q", client, text, want)
					}
				}
			}
		})
	}
}

// sseResponse wraps a client stream as the HTTP response an SDK reads.
func sseResponse(body []byte) *http.Response {
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
	}
}

// TestMaskedPassStreamKeepsMembers: a same-format stream is rewritten only
// in its answer's text, thinking and tool call arguments.
func TestMaskedPassStreamKeepsMembers(t *testing.T) {
	g := testGuard(t)
	for _, tc := range maskedStreamCases {
		provider, in := maskedStreamInput(t, tc.file)
		if provider != Chat && provider != Messages && provider != Responses {
			continue
		}
		t.Run(tc.desc, func(t *testing.T) {
			got := runStream(RequestInfo{Client: provider, Provider: provider, IncludeUsage: true, Mask: g}, in, nil).out
			want := readEvents(t, in)
			have := readEvents(t, got)
			// Every provider event is there, in order, with the same
			// members but for the text (and the sequence number, checked
			// contiguous elsewhere); events the gateway added are text
			// deltas; dropped ones are text deltas too.
			j := 0
			for _, w := range want {
				for j < len(have) && !sameEvent(w, have[j]) && added(have[j]) {
					j++
				}
				if j < len(have) && sameEvent(w, have[j]) {
					j++
					continue
				}
				if !droppable(w) {
					t.Fatalf("provider event %s %s is missing or changed", w.typ, w.data)
				}
			}
			for ; j < len(have); j++ {
				if !added(have[j]) {
					t.Errorf("unexpected event %s %s", have[j].typ, have[j].data)
				}
			}
		})
	}
}

type sseItem struct {
	typ  string
	data map[string]any
}

func readEvents(t *testing.T, b []byte) []sseItem {
	t.Helper()
	var items []sseItem
	r := sse.NewReader(bytes.NewReader(b), 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return items
		}
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if string(ev.Data) != "[DONE]" {
			mustUnmarshal(t, ev.Data, &m)
		}
		items = append(items, sseItem{typ: ev.Type, data: m})
	}
}

// textMembers are the members masking may change: text, thinking, tool
// call arguments.
var textMembers = map[string]bool{"content": true, "text": true, "delta": true, "output_text": true, "sequence_number": true,
	"thinking": true, "reasoning_content": true, "arguments": true, "partial_json": true}

// sameEvent compares two events but for their text members.
func sameEvent(a, b sseItem) bool {
	if a.typ != b.typ {
		return false
	}
	return sameBut(a.data, b.data)
}

func sameBut(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				return false
			}
			if _, isStr := v.(string); (isStr || k == "sequence_number") && textMembers[k] {
				continue
			}
			if !sameBut(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameBut(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	xb, _ := json.Marshal(a)
	yb, _ := json.Marshal(b)
	return bytes.Equal(xb, yb)
}

// added reports an event masking may add: a delta of text, thinking or
// arguments (Chat: a chunk of one choice with only one of them).
func added(e sseItem) bool {
	switch e.typ {
	case "content_block_delta", "response.output_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_text.delta", "response.function_call_arguments.delta":
		return true
	case "message":
		ch, _ := e.data["choices"].([]any)
		if len(ch) != 1 {
			return false
		}
		d, _ := ch[0].(map[string]any)["delta"].(map[string]any)
		_, text := d["content"]
		_, thinking := d["reasoning_content"]
		_, calls := d["tool_calls"]
		return (text || thinking || calls) && len(d) == 1
	}
	return false
}

// droppable reports an event masking may drop: a delta of text, thinking
// or arguments.
func droppable(e sseItem) bool {
	switch e.typ {
	case "response.output_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_text.delta", "response.function_call_arguments.delta":
		return true
	}
	d, _ := e.data["delta"].(map[string]any)
	return e.typ == "content_block_delta" && d["type"] != "signature_delta"
}

// TestMaskedStreamEnds: a stream cut short or broken flushes what its
// maskers held back (masked) before its error event, and a same-format
// stream never falls back to relaying raw provider bytes.
func TestMaskedStreamEnds(t *testing.T) {
	g := testGuard(t)
	chatHead := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":`
	cases := []struct {
		desc         string
		client       Format
		provider     Format
		in           string
		wantIn       []string // in the output, in order
		wantOut      []string // nowhere in the output
		wantFeedErr  bool
		wantCloseErr bool
	}{
		{desc: "chat passthrough: an invalid event ends it with an error event", client: Chat, provider: Chat,
			in:          chatHead + `"call me at 555-123-"},"finish_reason":null}]}` + "\n\ndata: {oops 4567\n\n" + chatHead + `"4567"}}]}` + "\n\n",
			wantIn:      []string{`"content":"call me at"`, `"content":" 555-123-"`, `data: {"error":{"message":"invalid event from provider`},
			wantOut:     []string{"oops", "4567"},
			wantFeedErr: true},
		{desc: "messages passthrough: cut short, held-back text flushed before the error", client: Messages, provider: Messages,
			in: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"mail a@b.co\"}}\n\n",
			wantIn:       []string{`"text":"mail "`, `"text":"<EMAIL_ADDRESS>"`, "event: error\n"},
			wantOut:      []string{"a@b.co"},
			wantCloseErr: true},
		{desc: "responses passthrough: the provider's error event flushes first, then goes on as it is", client: Responses, provider: Responses,
			in: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"SSN 123-45-6789\"}\n\n" +
				"event: error\ndata: {\"type\":\"error\",\"sequence_number\":5,\"code\":\"server_error\",\"message\":\"boom\",\"param\":null}\n\n",
			wantIn:  []string{`"sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"SSN"`, `"sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" <SSN>"`, `"type":"error","sequence_number":6`},
			wantOut: []string{"6789"}},
		{desc: "translated: a provider error flushes the open text first", client: Chat, provider: Messages,
			in: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"card 4111111111111111\"}}\n\n" +
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			wantIn:      []string{`"content":"card"`, `"content":" <CREDIT_CARD>"`, `"message":"Overloaded"`},
			wantOut:     []string{"4111"},
			wantFeedErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			r := runStream(RequestInfo{Client: tc.client, Provider: tc.provider, IncludeUsage: true, Mask: g}, []byte(tc.in), nil)
			if (r.feedErr != nil) != tc.wantFeedErr || (r.closeEr != nil) != tc.wantCloseErr {
				t.Errorf("feed error %v, close error %v", r.feedErr, r.closeEr)
			}
			out := string(r.out)
			at := 0
			for _, w := range tc.wantIn {
				i := strings.Index(out[at:], w)
				if i < 0 {
					t.Fatalf("%q not found (in order) in\n%s", w, out)
				}
				at += i + len(w)
			}
			for _, w := range tc.wantOut {
				if strings.Contains(out, w) {
					t.Errorf("%q reached the client:\n%s", w, out)
				}
			}
			readClientStream(t, tc.client, r.out) // every event is JSON
		})
	}
}

func TestMaskedStreamRefusesGeminiAndBedrockPassthrough(t *testing.T) {
	g := testGuard(t)
	for _, f := range []Format{Gemini, Bedrock} {
		s := NewStream(RequestInfo{Client: f, Provider: f, Mask: g})
		out, err := s.Feed(nil, []byte("data: {}\n\n"))
		if err == nil || len(out) != 0 {
			t.Errorf("%v passthrough with a mask: %v, %q (never unmasked)", f, err, out)
		}
		if _, err := s.Close(nil); err == nil {
			t.Errorf("%v: Close accepted", f)
		}
	}
}

// TestMaskedStreamReuse: a pooled stream keeps no masking state from a
// stream abandoned midway.
func TestMaskedStreamReuse(t *testing.T) {
	g := testGuard(t)
	provider, in := maskedStreamInput(t, "pii-split.messages.sse")
	cut := bytes.Index(in, []byte("6789. Call")) // a text is held back there
	fresh := func(info RequestInfo) []byte {
		resetIDs()
		s := NewStream(info)
		out, _ := s.Feed(nil, in)
		out, _ = s.Close(out)
		return out
	}
	for _, info := range []RequestInfo{
		{Client: Chat, Provider: provider, IncludeUsage: true, Mask: g},
		{Client: Messages, Provider: provider, IncludeUsage: true, Mask: g},
		{Client: Chat, Provider: provider, IncludeUsage: true},
	} {
		for i := 0; i < 3; i++ {
			s := AcquireStream(RequestInfo{Client: info.Client, Provider: provider, Mask: g})
			_, _ = s.Feed(nil, in[:cut])
			ReleaseStream(s)
		}
		if got, want := runStream(info, in, nil).out, fresh(info); !bytes.Equal(got, want) {
			t.Errorf("%v (mask %v): a pooled stream differs from a new one:\n%s\nwant\n%s", info.Client, info.Mask != nil, got, want)
		}
	}
}

func TestMaskedStreamChunkAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	g := testGuard(t)
	for _, tc := range maskedChunkCases(t) {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "m", Mask: g})
			out, _ := s.Feed(make([]byte, 0, 4096), tc.prelude)
			for i := 0; i < 10; i++ {
				out, _ = s.Feed(out[:0], tc.chunk)
			}
			n := testing.AllocsPerRun(100, func() {
				out, _ = s.Feed(out[:0], tc.chunk)
			})
			if n != 0 {
				t.Errorf("%.1f allocations per masked chunk", n)
			}
		})
	}
}

// TestMaskedPassStreamRefusesDuplicateMembers: an event with a member
// given twice (the decoder masks the last; a client reading the first
// would get it unmasked) ends the stream with an error event; its text
// never reaches the client.
func TestMaskedPassStreamRefusesDuplicateMembers(t *testing.T) {
	g := testGuard(t)
	in := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"mail a@b.co\",\"content\":\"clean\"}}]}\n\n" +
		"data: [DONE]\n\n"
	r := runStream(RequestInfo{Client: Chat, Provider: Chat, IncludeUsage: true, Mask: g}, []byte(in), nil)
	if strings.Contains(string(r.out), "a@b.co") {
		t.Fatalf("the unmasked text went out:\n%s", r.out)
	}
	if r.feedErr == nil && r.closeEr == nil {
		t.Fatalf("the stream ended cleanly:\n%s", r.out)
	}
	if !strings.Contains(string(r.out), "given twice") {
		t.Errorf("no error event naming the cause:\n%s", r.out)
	}
}
