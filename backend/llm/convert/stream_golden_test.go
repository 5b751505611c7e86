package convert

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/codec/llm"
)

// bedrockFixture encodes a .events file (lines "event TYPE PAYLOAD" or
// "exception TYPE PAYLOAD") as an AWS event stream.
func bedrockFixture(t testing.TB, text []byte) []byte {
	t.Helper()
	var out []byte
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		typ, payload, _ := strings.Cut(rest, " ")
		switch kind {
		case "event":
			out = llm.AppendEventMessage(out, []byte(payload), ":message-type", "event", ":event-type", typ, ":content-type", "application/json")
		case "exception":
			out = llm.AppendEventMessage(out, []byte(payload), ":message-type", "exception", ":exception-type", typ, ":content-type", "application/json")
		default:
			t.Fatalf("bad fixture line %q", line)
		}
	}
	return out
}

type streamResult struct {
	out              []byte
	usage            Usage
	feedErr, closeEr error
}

// runStream feeds in, cut into pieces by cuts (ascending offsets), and
// closes the stream.
func runStream(info RequestInfo, in []byte, cuts []int) streamResult {
	resetIDs()
	s := AcquireStream(info)
	defer ReleaseStream(s)
	var r streamResult
	prev := 0
	for _, c := range append(cuts, len(in)) {
		var err error
		r.out, err = s.Feed(r.out, in[prev:c])
		prev = c
		if err != nil {
			r.feedErr = err
			r.usage = s.Usage()
			return r
		}
	}
	r.out, r.closeEr = s.Close(r.out)
	r.usage = s.Usage()
	return r
}

func (r streamResult) golden() []byte {
	out := append([]byte(nil), r.out...)
	out = append(out, usageLine(r.usage)...)
	if r.feedErr != nil {
		out = append(out, "// feed error: "+r.feedErr.Error()+"\n"...)
	}
	if r.closeEr != nil {
		out = append(out, "// close error: "+r.closeEr.Error()+"\n"...)
	}
	return out
}

func streamInput(t testing.TB, file string) (Format, []byte) {
	t.Helper()
	in := readFile(t, filepath.Join("testdata/streams", file))
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

var streamCases = []struct{ desc, file string }{
	{desc: "chat: text, two tool calls in pieces, usage chunk", file: "text-tools.chat.sse"},
	{desc: "chat: ends without finish (CRLF, comment)", file: "truncated.chat.sse"},
	{desc: "chat: whole, but no blank line after [DONE]", file: "done-unterminated.chat.sse"},
	{desc: "chat: finish, then cut inside the usage chunk", file: "usage-cut.chat.sse"},
	{desc: "chat: cut after a whole delta, without its blank line", file: "delta-unterminated.chat.sse"},
	{desc: "messages: whole, but no blank line after message_stop", file: "stop-unterminated.messages.sse"},
	{desc: "gemini: whole, but no blank line after the last event", file: "last-unterminated.gemini.sse"},
	{desc: "messages: thinking with signature, text, tool use, ping", file: "text-tools.messages.sse"},
	{desc: "messages: error event mid-stream", file: "error.messages.sse"},
	{desc: "gemini: thought, text, whole function call, usage at the end", file: "text-call.gemini.sse"},
	{desc: "gemini: empty text parts around a function call make no block", file: "call-empty.gemini.sse"},
	{desc: "gemini: signatures on the text after a thought, on a text part that goes on, on the first of two calls", file: "think-sig.gemini.sse"},
	{desc: "gemini: a signed call first, its stream's first part", file: "call-sig.gemini.sse"},
	{desc: "bedrock: reasoning, text, tool use, metadata", file: "text-tool.bedrock.events"},
	{desc: "bedrock: an empty text block after a tool use makes none", file: "tool-empty.bedrock.events"},
	{desc: "bedrock: throttling exception mid-stream", file: "exception.bedrock.events"},
	{desc: "chat: two tool calls whose arguments interleave", file: "tools-interleaved.chat.sse"},
	{desc: "messages: a tool use without arguments (an empty partial_json)", file: "tool-noargs.messages.sse"},
	{desc: "bedrock: a tool use without arguments (no delta)", file: "tool-noargs.bedrock.events"},
}

func TestStreamGolden(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.desc, func(t *testing.T) {
			provider, in := streamInput(t, tc.file)
			base := tc.file[:strings.LastIndexByte(tc.file, '.')]
			for _, client := range clientFormats {
				if client == provider {
					continue
				}
				info := RequestInfo{Client: client, Provider: provider, Model: "requested-model", Stream: true, IncludeUsage: true}
				whole := runStream(info, in, nil)
				checkGolden(t, filepath.Join("testdata/streams", base+"."+client.String()+".golden"), whole.golden())
				checkClientStream(t, client, whole.out)

				// The same bytes fed one by one, and cut at random places,
				// translate to the same stream.
				var ones []int
				for i := 1; i < len(in); i++ {
					ones = append(ones, i)
				}
				if got := runStream(info, in, ones); !bytes.Equal(got.golden(), whole.golden()) {
					t.Errorf("%v: fed byte by byte:\n%s\nwant\n%s", client, got.golden(), whole.golden())
				}
				rng := rand.New(rand.NewPCG(1, uint64(len(in))))
				for round := 0; round < 20; round++ {
					var cuts []int
					for i := 1; i < len(in); i++ {
						if rng.IntN(7) == 0 {
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

// checkClientStream reads the translated stream as the client would: SSE
// events whose data is JSON (or [DONE]).
func checkClientStream(t *testing.T, client Format, out []byte) {
	t.Helper()
	var f sseFramer
	f.reset(MaxEventBytes)
	p := out
	for {
		ev, rest, ok, err := f.next(p)
		if err != nil {
			t.Fatalf("client stream: %v", err)
		}
		if !ok {
			break
		}
		p = rest
		if ev.comment || string(ev.data) == "[DONE]" {
			continue
		}
		if !llm.Valid(ev.data) {
			t.Errorf("%v event %q: data is not JSON: %s", client, ev.typ, ev.data)
		}
	}
	if f.pending() {
		t.Errorf("%v stream ends inside an event", client)
	}
}

func TestStreamPassthrough(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.desc, func(t *testing.T) {
			provider, in := streamInput(t, tc.file)
			info := RequestInfo{Client: provider, Provider: provider, IncludeUsage: true, Stream: true}
			got := runStream(info, in, []int{len(in) / 3, len(in) / 2})
			// A stream that ends inside an event whose data is whole gets
			// the blank line that ends it (Stream.lastEvent).
			if !bytes.Equal(got.out, in) && !bytes.Equal(got.out, append(in[:len(in):len(in)], "\n\n"...)) {
				t.Errorf("passthrough changed the stream:\n%s", got.out)
			}
			other := Chat
			if provider == Chat {
				other = Messages
			}
			want := runStream(RequestInfo{Client: other, Provider: provider, IncludeUsage: true}, in, nil)
			if got.usage != want.usage {
				t.Errorf("passthrough usage %+v, translated %+v", got.usage, want.usage)
			}
		})
	}
}

func TestStreamStripsUnaskedUsage(t *testing.T) {
	_, in := streamInput(t, "text-tools.chat.sse")
	info := RequestInfo{Client: Chat, Provider: Chat, Stream: true, IncludeUsage: false}
	got := runStream(info, in, []int{7, 100, 400})
	if bytes.Contains(got.out, []byte(`"usage"`)) {
		t.Errorf("usage chunk reached a client that did not ask for it:\n%s", got.out)
	}
	if got.usage.InputTokens != 80 || got.usage.CachedInputTokens != 64 || got.usage.OutputTokens != 25 {
		t.Errorf("usage %+v", got.usage)
	}
	if !bytes.HasSuffix(got.out, []byte("data: [DONE]\n\n")) || bytes.Count(got.out, []byte("data: ")) != bytes.Count(in, []byte("data: "))-1 {
		t.Errorf("stream not relayed event by event:\n%s", got.out)
	}
}
