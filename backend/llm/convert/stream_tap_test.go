package convert

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	assestream "github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go/v3"
	ossestream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/relaygate/gateway/codec/sse"
)

// tappedRun is a tapped stream fed piece by piece: after each Feed (and
// the Close) the output so far and the text taken so far.
type tappedRun struct {
	out, text []byte
	steps     []tapStep
	err       error
}

type tapStep struct{ out, text int } // lengths after the step

func runTapped(info RequestInfo, in []byte, cuts []int) tappedRun {
	resetIDs()
	s := AcquireStream(info)
	defer ReleaseStream(s)
	s.TapText()
	var r tappedRun
	prev := 0
	step := func() {
		r.text = s.TakeText(r.text)
		r.steps = append(r.steps, tapStep{out: len(r.out), text: len(r.text)})
	}
	for _, c := range append(cuts, len(in)) {
		var err error
		r.out, err = s.Feed(r.out, in[prev:c])
		prev = c
		step()
		if err != nil {
			r.err = err
			return r
		}
	}
	r.out, r.err = s.Close(r.out)
	step()
	return r
}

func randomCuts(rng *rand.Rand, n, oneIn int) []int {
	var cuts []int
	for i := 1; i < n; i++ {
		if rng.IntN(oneIn) == 0 {
			cuts = append(cuts, i)
		}
	}
	return cuts
}

// TestTapTextIsTheTextSent: whatever the formats, masked or not, and
// however the provider's stream is cut, the text taken after each Feed is
// the text of the output so far, and that output ends on an event's end;
// the tap changes no event, and masked streams give the masked text.
func TestTapTextIsTheTextSent(t *testing.T) {
	forEachStreamRun(t, func(t *testing.T, client Format, masked bool, info RequestInfo, in []byte) {
		untapped := runStream(info, in, nil)
		want := readClientStream(t, client, untapped.out).deltas
		if masked && !strings.Contains(want, "<") {
			t.Fatalf("the masked text %q has no mask: the case tests nothing", want)
		}
		rng := rand.New(rand.NewPCG(7, uint64(len(in))))
		cutSets := [][]int{nil, randomCuts(rng, len(in), 1)}
		for range 10 {
			cutSets = append(cutSets, randomCuts(rng, len(in), 1+rng.IntN(40)))
		}
		for _, cuts := range cutSets {
			r := runTapped(info, in, cuts)
			if r.err != nil {
				t.Fatalf("%d cuts: %v", len(cuts), r.err)
			}
			for _, st := range r.steps {
				out := r.out[:st.out]
				if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
					t.Fatalf("%d cuts: the output so far ends inside an event:\n%s", len(cuts), out)
				}
				if got := readClientStream(t, client, out).deltas; got != string(r.text[:st.text]) {
					t.Fatalf("%d cuts: taken %q, the output so far has %q", len(cuts), r.text[:st.text], got)
				}
			}
			if string(r.text) != want {
				t.Fatalf("%d cuts: taken %q, want %q", len(cuts), r.text, want)
			}
			tapped, plain := readEvents(t, r.out), readEvents(t, untapped.out)
			if len(tapped) != len(plain) {
				t.Fatalf("%d cuts: %d events, untapped %d", len(cuts), len(tapped), len(plain))
			}
			for i := range tapped {
				if tapped[i].typ != plain[i].typ || !sameBut(tapped[i].data, plain[i].data) ||
					!sameBut(plain[i].data, tapped[i].data) {
					t.Fatalf("%d cuts: event %d is %+v, untapped %+v", len(cuts), i, tapped[i], plain[i])
				}
			}
		}
	})
}

// TestTapTextCollects: what is text and what is not, per provider.
func TestTapTextCollects(t *testing.T) {
	tests := []struct {
		desc     string
		provider Format
		in       string
		want     string
	}{
		{desc: "chat: every choice's content, not refusals or arguments", provider: Chat,
			in: `data: {"id":"c","choices":[{"index":0,"delta":{"content":"a\u00e9"}},{"index":1,"delta":{"content":"b","refusal":"no"}}]}` + "\n\n" +
				`data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"k\":1}"}}]}}]}` + "\n\n" +
				"data: [DONE]\n\n",
			want: "a\u00e9b"},
		{desc: "messages: first texts and text deltas, not thinking", provider: Messages,
			in: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[{\"type\":\"text\",\"text\":\"0\"}]}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"hmm\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"deep\"}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"1\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"2\\n\"}}\n\n",
			want: "012\n"},
		{desc: "gemini: every candidate's text, not thoughts", provider: Gemini,
			in:   `data: {"candidates":[{"content":{"parts":[{"text":"think","thought":true},{"text":"x"}]}},{"content":{"parts":[{"text":"y"}]}}]}` + "\n\n",
			want: "xy"},
		{desc: "responses: output_text deltas only", provider: Responses,
			in: "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":1,\"delta\":\"why\"}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"delta\":\"t\"}\n\n" +
				"event: response.refusal.delta\ndata: {\"type\":\"response.refusal.delta\",\"sequence_number\":3,\"delta\":\"no\"}\n\n" +
				"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":4,\"text\":\"t\"}\n\n",
			want: "t"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, client := range clientsOf(tc.provider) {
				s := NewStream(RequestInfo{Client: client, Provider: tc.provider, IncludeUsage: true})
				s.TapText()
				if _, err := s.Feed(nil, []byte(tc.in)); err != nil {
					t.Fatalf("%v: %v", client, err)
				}
				if got := string(s.TakeText(nil)); got != tc.want {
					t.Errorf("%v: taken %q, want %q", client, got, tc.want)
				}
				if got := s.TakeText(nil); len(got) != 0 {
					t.Errorf("%v: taken twice: %q", client, got)
				}
			}
		})
	}
	t.Run("bedrock text deltas", func(t *testing.T) {
		in := bedrockFixture(t, []byte(`event messageStart {"role":"assistant"}`+"\n"+
			`event contentBlockDelta {"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"think"}}}`+"\n"+
			`event contentBlockDelta {"contentBlockIndex":1,"delta":{"text":"Hi"}}`+"\n"+
			`event contentBlockDelta {"contentBlockIndex":2,"delta":{"toolUse":{"input":"{}"}}}`))
		s := NewStream(RequestInfo{Client: Chat, Provider: Bedrock})
		s.TapText()
		if _, err := s.Feed(nil, in); err != nil {
			t.Fatal(err)
		}
		if got := string(s.TakeText(nil)); got != "Hi" {
			t.Errorf("taken %q", got)
		}
	})
}

// TestTapTextOff: an untapped stream collects nothing, and a same-format
// one passes the provider's bytes as they came (comments included).
func TestTapTextOff(t *testing.T) {
	_, in := maskedStreamInput(t, "pii-split.chat.sse")
	s := AcquireStream(RequestInfo{Client: Chat, Provider: Chat, IncludeUsage: true})
	s.TapText()
	ReleaseStream(s) // the next user of the pooled stream does not tap
	s = AcquireStream(RequestInfo{Client: Chat, Provider: Chat, IncludeUsage: true})
	defer ReleaseStream(s)
	out, err := s.Feed(nil, in)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("untapped pass: %v\n%s", err, out)
	}
	if got := s.TakeText(nil); len(got) != 0 {
		t.Errorf("untapped stream collected %q", got)
	}
}

// TestTapTextFailsClosed: a tapped same-format stream that meets an event
// it cannot read ends with an error event, and nothing after it reaches
// the client (untapped, it passes the provider's bytes on unread); a
// same-format Bedrock stream cannot be tapped.
func TestTapTextFailsClosed(t *testing.T) {
	good := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"fine "}}]}` + "\n\n"
	bad := `data: {"id":"c","choices":[{"index":0,"delta":{"content":` + "\n\n"
	after := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"unseen"}}]}` + "\n\n"
	in := []byte(good + bad + after)

	s := NewStream(RequestInfo{Client: Chat, Provider: Chat, IncludeUsage: true})
	out, err := s.Feed(nil, in)
	if err != nil || !bytes.Contains(out, []byte("unseen")) {
		t.Fatalf("untapped: %v\n%s (the premise changed)", err, out)
	}

	s = NewStream(RequestInfo{Client: Chat, Provider: Chat, IncludeUsage: true})
	s.TapText()
	out, err = s.Feed(nil, in)
	if err == nil || bytes.Contains(out, []byte("unseen")) || !bytes.Contains(out, []byte(`"error"`)) {
		t.Errorf("tapped: %v\n%s", err, out)
	}
	if got := string(s.TakeText(nil)); got != "fine " {
		t.Errorf("taken %q", got)
	}

	s = NewStream(RequestInfo{Client: Bedrock, Provider: Bedrock})
	s.TapText()
	out, err = s.Feed(nil, bedrockFixture(t, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":"Hi"}}`)))
	if err == nil || len(out) != 0 {
		t.Errorf("bedrock passthrough tapped: %v, %q", err, out)
	}
}

// TestAbort: an aborted stream ends with one error event in the client's
// shape, read as an error by its SDK, with nothing a masker held back
// before it and nothing after it.
func TestAbort(t *testing.T) {
	msg := []byte(`blocked: "bad" words`)
	forEachStreamRun(t, func(t *testing.T, client Format, masked bool, info RequestInfo, in []byte) {
		s := NewStream(info)
		s.TapText()
		half, err := s.Feed(nil, in[:len(in)/2])
		if err != nil {
			t.Fatal(err)
		}
		text := s.TakeText(nil)
		ev := s.Abort(nil, "guardrail_blocked", "guardrail_intervention", msg)
		if len(s.TakeText(nil)) != 0 {
			t.Error("text taken after the abort")
		}
		if out, err := s.Feed(nil, in[len(in)/2:]); !errors.Is(err, ErrAborted) || len(out) != 0 {
			t.Errorf("Feed after Abort: %v, %q", err, out)
		}
		if out, err := s.Close(nil); !errors.Is(err, ErrAborted) || len(out) != 0 {
			t.Errorf("Close after Abort: %v, %q", err, out)
		}
		if n := len(readEvents(t, ev)); n != 1 {
			t.Fatalf("%d events, want 1:\n%s", n, ev)
		}
		// The client reads what it got before and the error
		// event; the text is what was taken.
		all := append(append([]byte(nil), half...), ev...)
		if got := readClientStream(t, client, all).deltas; got != string(text) {
			t.Errorf("the client read %q, taken %q", got, text)
		}
		checkAbortEvent(t, client, all, string(msg))
	})
}

// checkAbortEvent reads a stream with client's SDK, which must end it with
// the error event's message (Responses: an error event of that code).
func checkAbortEvent(t *testing.T, client Format, out []byte, msg string) {
	t.Helper()
	switch client {
	case Chat:
		s := ossestream.NewStream[openai.ChatCompletionChunk](ossestream.NewDecoder(sseResponse(out)), nil)
		for s.Next() {
		}
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "guardrail_intervention") || !strings.Contains(err.Error(), "guardrail_blocked") {
			t.Errorf("chat SDK: %v", err)
		}
	case Messages:
		s := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(sseResponse(out)), nil)
		for s.Next() {
		}
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "guardrail_blocked") {
			t.Errorf("messages SDK: %v", err)
		}
	case Responses:
		s := ossestream.NewStream[responses.ResponseStreamEventUnion](ossestream.NewDecoder(sseResponse(out)), nil)
		var last responses.ResponseStreamEventUnion
		var seqs []int64
		for s.Next() {
			last = s.Current()
			seqs = append(seqs, last.SequenceNumber)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("responses SDK: %v", err)
		}
		if last.Type != "error" || last.Code != "guardrail_intervention" || last.Message != msg {
			t.Errorf("responses SDK: last event %s %q %q", last.Type, last.Code, last.Message)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("sequence numbers %v do not increase", seqs)
				break
			}
		}
	}
	if !bytes.Contains(out, []byte(`blocked: \"bad\" words`)) {
		t.Errorf("the message is not in the event:\n%s", out)
	}
}

// TestTapTextAllocs: a tapped chunk allocates nothing once warm.
func TestTapTextAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range maskedChunkCases(t) {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "m"})
			s.TapText()
			out, _ := s.Feed(make([]byte, 0, 4096), tc.prelude)
			text := s.TakeText(make([]byte, 0, 256))
			for range 10 {
				out, _ = s.Feed(out[:0], tc.chunk)
				text = s.TakeText(text[:0])
			}
			n := testing.AllocsPerRun(100, func() {
				out, _ = s.Feed(out[:0], tc.chunk)
				text = s.TakeText(text[:0])
			})
			if n != 0 {
				t.Errorf("%.1f allocations per tapped chunk", n)
			}
			if string(text) != " the gateway" {
				t.Errorf("taken %q", text)
			}
		})
	}
}

// FuzzStreamTapped: whatever the provider sends, cut anywhere, a tapped
// stream's output ends on an event's end after every Feed, as SSE the
// client can read, and an Abort ends it for good.
func FuzzStreamTapped(f *testing.F) {
	for _, tc := range maskedStreamCases {
		_, in := maskedStreamInput(f, tc.file)
		f.Add(in, uint8(0), uint8(3))
		f.Add(in, uint8(0x85), uint8(1))
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":"), uint8(0), uint8(5))
	providers := []Format{Chat, Messages, Responses, Gemini, Bedrock}
	f.Fuzz(func(t *testing.T, in []byte, pick, step uint8) {
		provider := providers[int(pick&0x7f)%len(providers)]
		clients := clientsOf(provider)
		info := RequestInfo{Client: clients[int(pick>>3)%len(clients)], Provider: provider, IncludeUsage: step&1 == 0}
		if pick&0x80 != 0 {
			info.Mask = fuzzGuard
		}
		s := NewStream(info)
		s.TapText()
		n := int(step%97) + 1
		var out, text []byte
		var err error
		for i := 0; i < len(in) && err == nil; i += n {
			out, err = s.Feed(out, in[i:min(i+n, len(in))])
			text = s.TakeText(text)
			if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
				t.Fatalf("%v -> %v: output ends inside an event:\n%q", provider, info.Client, out)
			}
		}
		if err == nil {
			out, _ = s.Close(out)
		}
		if len(text) > len(in)*8+64 {
			t.Fatalf("%d bytes of text from %d bytes in", len(text), len(in))
		}
		r := sse.NewReader(bytes.NewReader(out), 0)
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%v -> %v: client stream: %v\n%s", provider, info.Client, err, out)
			}
		}
		ev := s.Abort(nil, "guardrail_blocked", "", []byte("no"))
		if !bytes.HasSuffix(ev, []byte("\n\n")) {
			t.Fatalf("abort event %q", ev)
		}
		if more, err := s.Feed(nil, in); !errors.Is(err, ErrAborted) || len(more) != 0 {
			t.Fatalf("Feed after Abort: %v %q", err, more)
		}
	})
}

// forEachStreamRun runs f as a subtest for every recorded stream
// (maskedStreamCases), every client format its provider format translates
// to, unmasked and masked, with the request info of that pairing.
func forEachStreamRun(t *testing.T, f func(t *testing.T, client Format, masked bool, info RequestInfo, in []byte)) {
	g := testGuard(t)
	for _, tc := range maskedStreamCases {
		provider, in := maskedStreamInput(t, tc.file)
		for _, client := range clientsOf(provider) {
			for _, masked := range []bool{false, true} {
				info := RequestInfo{Client: client, Provider: provider, Model: "m", Stream: true, IncludeUsage: true}
				name := provider.String() + " to " + client.String()
				if masked {
					info.Mask = g
					name += ", masked"
				}
				t.Run(name, func(t *testing.T) { f(t, client, masked, info, in) })
			}
		}
	}
}

// TestAbortSequenceNumber: the error event that ends a Responses stream
// follows the provider's numbering, which starts at 0 (OpenAI's, and the
// gateway's own for translated streams): 0 when no event went before it.
func TestAbortSequenceNumber(t *testing.T) {
	const created = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"m\",\"output\":[]}}\n\n"
	for _, tc := range []struct {
		desc     string
		provider Format
		in       string
		want     string
	}{
		{"same format, before any event", Responses, "", `"type":"error","sequence_number":0,`},
		{"same format, after the first", Responses, created, `"type":"error","sequence_number":1,`},
		{"translated, after message_start", Messages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n",
			`"type":"error","sequence_number":2,`}, // after response.created and response.in_progress
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: Responses, Provider: tc.provider, Model: "m"})
			s.TapText()
			out, err := s.Feed(nil, []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if tc.in != "" && !bytes.Contains(out, []byte(`"sequence_number":0,`)) {
				t.Errorf("the first event is not numbered 0:\n%s", out)
			}
			if ev := s.Abort(nil, "guardrail_blocked", "guardrail_intervention", []byte("no")); !bytes.Contains(ev, []byte(tc.want)) {
				t.Errorf("error event\n%s\nwant %s", ev, tc.want)
			}
		})
	}
}
