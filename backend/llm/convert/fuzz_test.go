package convert

import (
	"bytes"
	"io"
	"testing"

	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/sse"
)

// Fuzz targets of the translators and stream parsers: no input panics,
// accepted input gives valid JSON, and output stays bounded by the input;
// with a response guard too, whose masking never fails on what was
// accepted (mask_fuzz_test.go holds the masked text to Guard.Mask).

func addFiles(f *testing.F, dir string, names ...string) {
	for _, n := range names {
		b, err := readFileF(dir + "/" + n)
		if err == nil {
			f.Add(b, uint8(0))
		}
	}
}

func FuzzRequest(f *testing.F) {
	addFiles(f, "testdata/requests", "basic.chat.json", "tools.chat.json", "image-data.chat.json",
		"tools.messages.json", "basic.messages.json", "tools.responses.json")
	f.Fuzz(func(t *testing.T, body []byte, pick uint8) {
		client := clientFormats[int(pick)%len(clientFormats)]
		provider := providerFormats[int(pick/3)%len(providerFormats)]
		out, _, err := Request(nil, client, provider, body, &Options{Model: "m", StreamUsage: true})
		if err != nil {
			return
		}
		if !llm.Valid(out) {
			t.Fatalf("%v -> %v: output is not JSON:\n%s", client, provider, out)
		}
		if len(out) > 4*len(body)+4096 {
			t.Fatalf("%v -> %v: %d bytes out of %d", client, provider, len(out), len(body))
		}
		if name := repeatedTopMember(out); name != "" {
			t.Fatalf("%v -> %v: %s sent twice:\n%s", client, provider, name, out)
		}
	})
}

// repeatedTopMember is the name of a top-level member of obj given twice
// ("" for none).
func repeatedTopMember(obj []byte) string {
	seen := map[string]bool{}
	var m llm.Members
	for m.Reset(obj); m.Next(); {
		name := string(llm.KeyText(nil, m.Name()))
		if seen[name] {
			return name
		}
		seen[name] = true
	}
	return ""
}

func FuzzResponse(f *testing.F) {
	addFiles(f, "testdata/responses", "text.chat.json", "tools.chat.json", "thinking.messages.json",
		"tools.messages.json", "text.gemini.json", "call.gemini.json", "tools.bedrock.json")
	addFiles(f, "testdata/masked", "pii.chat.json", "pii.messages.json", "pii.responses.json")
	g := testGuard(f)
	f.Fuzz(func(t *testing.T, body []byte, pick uint8) {
		client := clientFormats[int(pick)%len(clientFormats)]
		provider := providerFormats[int(pick/3)%len(providerFormats)]
		if pick >= 128 {
			provider = client // same formats, Responses included
		}
		masked, _, err := Response(nil, body, RequestInfo{Client: client, Provider: provider, Model: "m", Mask: g})
		if err == errMaskFailed {
			t.Fatalf("%v -> %v: masking failed on an accepted body:\n%q", provider, client, body)
		}
		if err == nil && !llm.Valid(masked) {
			t.Fatalf("%v -> %v: masked output is not JSON:\n%s", provider, client, masked)
		}
		out, _, err := Response(nil, body, RequestInfo{Client: client, Provider: provider, Model: "m"})
		if err != nil || client == provider { // a passthrough copies the body as it is
			return
		}
		if !llm.Valid(out) {
			t.Fatalf("%v -> %v: output is not JSON:\n%s", provider, client, out)
		}
		if len(out) > 4*len(body)+4096 {
			t.Fatalf("%v -> %v: %d bytes out of %d", provider, client, len(out), len(body))
		}
		eout, _ := ProviderError(nil, RequestInfo{Client: client, Provider: provider}, 400, body)
		if !llm.Valid(eout) && client != provider {
			t.Fatalf("error body not JSON: %s", eout)
		}
	})
}

// fuzzStream feeds in, cut every step bytes, to a stream of provider into
// each client format.
func fuzzStream(t *testing.T, provider Format, in []byte, step uint8) {
	for _, g := range []*guard.Guard{nil, fuzzGuard} {
		fuzzStreamMask(t, provider, in, step, g)
	}
}

var fuzzGuard, _ = guard.New(guard.Spec{Builtins: maskBuiltins})

// fuzzStreamMask is fuzzStream with the response guard g (nil: none).
func fuzzStreamMask(t *testing.T, provider Format, in []byte, step uint8, g *guard.Guard) {
	n := int(step%97) + 1
	for _, client := range clientFormats {
		s := NewStream(RequestInfo{Client: client, Provider: provider, Model: "m", IncludeUsage: step&1 == 0, Mask: g})
		var out []byte
		var err error
		for i := 0; i < len(in) && err == nil; i += n {
			out, err = s.Feed(out, in[i:min(i+n, len(in))])
		}
		if err == nil {
			out, _ = s.Close(out)
		}
		if len(out) > 64*len(in)+16<<10 {
			t.Fatalf("%v -> %v: %d bytes out of %d", provider, client, len(out), len(in))
		}
		if client == provider && (g == nil || provider == Gemini || provider == Bedrock) {
			continue // the provider's bytes, or nothing (refused)
		}
		// What the client gets is SSE whose data is JSON; a masked
		// same-format stream is rewritten event by event, so its too.
		r := sse.NewReader(bytes.NewReader(out), 0)
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%v -> %v: client stream: %v\n%s", provider, client, err, out)
			}
			if string(ev.Data) != "[DONE]" && !llm.Valid(ev.Data) {
				t.Fatalf("%v -> %v: event data not JSON: %s", provider, client, ev.Data)
			}
		}
	}
}

func addStream(f *testing.F, file string) {
	_, in := streamInput(f, file)
	f.Add(in, uint8(0))
	f.Add(in, uint8(6))
}

func addMaskedStream(f *testing.F, file string) {
	_, in := maskedStreamInput(f, file)
	f.Add(in, uint8(0))
	f.Add(in, uint8(9))
}

func FuzzStreamChat(f *testing.F) {
	addStream(f, "text-tools.chat.sse")
	addStream(f, "truncated.chat.sse")
	addMaskedStream(f, "pii-split.chat.sse")
	f.Fuzz(func(t *testing.T, in []byte, step uint8) { fuzzStream(t, Chat, in, step) })
}

func FuzzStreamMessages(f *testing.F) {
	addStream(f, "text-tools.messages.sse")
	addStream(f, "error.messages.sse")
	addMaskedStream(f, "pii-split.messages.sse")
	f.Fuzz(func(t *testing.T, in []byte, step uint8) { fuzzStream(t, Messages, in, step) })
}

func FuzzStreamGemini(f *testing.F) {
	addStream(f, "text-call.gemini.sse")
	f.Fuzz(func(t *testing.T, in []byte, step uint8) { fuzzStream(t, Gemini, in, step) })
}

func FuzzStreamResponses(f *testing.F) {
	f.Add([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3}}}\n\n"), uint8(1))
	addMaskedStream(f, "pii-split.responses.sse")
	f.Fuzz(func(t *testing.T, in []byte, step uint8) { fuzzStream(t, Responses, in, step) })
}

func FuzzStreamBedrock(f *testing.F) {
	addStream(f, "text-tool.bedrock.events")
	addStream(f, "exception.bedrock.events")
	f.Fuzz(func(t *testing.T, in []byte, step uint8) { fuzzStream(t, Bedrock, in, step) })
}

// FuzzSSEFramer checks the push framer against codec/sse's Reader: same
// events (type and data) for any input cut anywhere.
func FuzzSSEFramer(f *testing.F) {
	f.Add([]byte("\xef\xbb\xbfdata: a\r\ndata:b\revent: x\n\n: c\n\ndata\n\n"), uint8(2))
	f.Add([]byte("event: e\ndata: 1\n\nid: 3\nretry: 5\ndata: 2\n\n"), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		const max = 256
		type ev struct{ typ, data string }
		var want []ev
		r := sse.NewReader(bytes.NewReader(in), max)
		var rerr error
		for {
			e, err := r.Next()
			if err != nil {
				rerr = err
				break
			}
			want = append(want, ev{e.Type, string(e.Data)})
		}
		var got []ev
		var fr sseFramer
		fr.reset(max)
		n := int(step%31) + 1
		var ferr error
	feed:
		for i := 0; i < len(in); i += n {
			p := in[i:min(i+n, len(in))]
			for len(p) > 0 {
				e, rest, ok, err := fr.next(p)
				if err != nil {
					ferr = err
					break feed
				}
				if !ok {
					break
				}
				p = rest
				if e.comment {
					if len(e.data) == 0 || e.data[0] != ':' {
						t.Fatalf("comment %q", e.data)
					}
					continue // the reader skips them
				}
				got = append(got, ev{string(e.typ), string(e.data)})
			}
		}
		if (rerr == sse.ErrEventTooLarge) != (ferr != nil) {
			t.Fatalf("too large: reader %v, framer %v", rerr, ferr)
		}
		if ferr != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("framer %d events %q, reader %d %q", len(got), got, len(want), want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("event %d: framer %q, reader %q", i, got[i], want[i])
			}
		}
		if (rerr == io.ErrUnexpectedEOF) != fr.pending() {
			t.Fatalf("end inside an event: reader %v, framer pending %v", rerr, fr.pending())
		}
	})
}

// FuzzProviderError: whatever a provider's error body, the client gets its
// status and a body in its shape: the provider's own only when that is
// already in the client's shape (same formats), else one written anew.
func FuzzProviderError(f *testing.F) {
	for _, b := range []string{
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`,
		`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`,
		`[{"error":{"code":400,"message":"x","status":"INVALID_ARGUMENT"}}]`,
		`{"message":"throttled"}`, `<html>Bad Gateway</html>`, ``,
	} {
		f.Add([]byte(b), uint8(0), uint16(429))
	}
	f.Fuzz(func(t *testing.T, body []byte, pick uint8, status uint16) {
		client := clientFormats[int(pick)%len(clientFormats)]
		provider := providerFormats[int(pick/3)%len(providerFormats)]
		if pick >= 128 {
			provider = client
		}
		st := 400 + int(status)%200
		out, got := ProviderError(nil, RequestInfo{Client: client, Provider: provider}, st, body)
		if got != st {
			t.Fatalf("status %d, want the provider's %d", got, st)
		}
		if client == provider && bytes.Equal(out, body) {
			if !inErrorShape(body, client) {
				t.Fatalf("%v: a body not in the client's shape was copied: %q", client, body)
			}
			return
		}
		if !llm.Valid(out) || !inErrorShape(out, client) {
			t.Fatalf("%v -> %v: error not in the client's shape: %s", provider, client, out)
		}
	})
}

// FuzzFastUsage: where the usage reader without the decoder answers, the
// decoder reads the same usage from the same object, in each format it
// serves.
func FuzzFastUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}`,
		`{"input_tokens":7,"output_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":null}`,
		`{"input_tokens":5,"cache_read_input_tokens":10,"cache_creation_input_tokens":3,"output_tokens":9}`,
		`{"prompt_tokens":1,"prompt_tokens":null,"prompt_tokens_details":{"cached_tokens":4},"prompt_tokens_details":{}}`,
		`{"prompt_tokens":-0,"x":"\u00e9","completion_tokens":1.5}`,
		`{"prompt_tokens":007}`, `{"prompt_tokens":"1"}`, `{"prompt\u005ftokens":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		tr := translators.Get().(*translator)
		defer tr.release()
		for _, fm := range []Format{Chat, Responses, Messages} {
			fast, ok := fastUsage(v, fm)
			if !ok {
				continue
			}
			slow, err := tr.decodeUsageSlow(v, fm)
			if err != nil || slow != fast {
				t.Fatalf("%v on %q: fast %+v, decoder %+v (%v)", fm, v, fast, slow, err)
			}
		}
	})
}
