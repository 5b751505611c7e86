package convert

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relaygate/gateway/codec/llm"
)

// Fuzz targets of masking: an answer text holding SSNs, emails, cards and
// phone numbers, cut into deltas anywhere, streamed by each provider and
// fed in pieces cut anywhere, reaches every client masked exactly as
// Guard.Mask masks the whole text, in valid frames.

var maskFuzzSeeds = []string{
	"Your SSN is 123-45-6789 and your card 4111 1111 1111 1111.",
	"Write to jane.doe@example.com or call (555) 123-4567, SIN 046-454-286.",
	"ids 123-45-6789@example.com; a@b.co,c@d.co; x@y..z — café 📞555-123-4567",
	"no match here, only 12 units and 2026-01-01",
	"\"quoted\" \\ back\\slash\n\ttab \u2028 123-45-6789\r\n",
}

var fuzzProviders = []Format{Chat, Messages, Gemini, Bedrock, Responses}

// splitText cuts text into deltas of the lengths cuts give (0 is an empty
// delta), moved forward to rune starts; the last delta takes the rest.
func splitText(text string, cuts []byte) []string {
	var deltas []string
	for i := 0; len(text) > 0; i++ {
		n := len(text)
		if i < len(cuts) {
			n = min(int(cuts[i]), n)
			for n < len(text) && !utf8.RuneStart(text[n]) {
				n++
			}
		}
		deltas = append(deltas, text[:n])
		text = text[n:]
	}
	return deltas
}

// fuzzText makes s valid UTF-8 and shorter than the 4 KiB a stream masker
// holds before it cuts without a clean place (guard.StreamMasker).
func fuzzText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for len(s) > 4000 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

func FuzzMaskedStream(f *testing.F) {
	for i, s := range maskFuzzSeeds {
		for p := range fuzzProviders {
			f.Add(s, []byte{byte(3 + i), 7, 1, 0, 12, 5}, uint8(p+5*i))
		}
	}
	g := testGuard(f)
	f.Fuzz(func(t *testing.T, text string, cuts []byte, pick uint8) {
		text = fuzzText(text)
		provider := fuzzProviders[int(pick)%len(fuzzProviders)]
		in := providerStream(t, provider, splitText(text, cuts))
		want := maskString(g, text)
		for _, client := range clientsOf(provider) {
			info := RequestInfo{Client: client, Provider: provider, Model: "m", IncludeUsage: pick&64 == 0, Mask: g}
			s := NewStream(info)
			var out []byte
			var err error
			for i, at := 0, 0; at < len(in) && err == nil; i++ {
				n := 1 + int(pick)%13
				if len(cuts) > 0 {
					n = 1 + int(cuts[i%len(cuts)])%97
				}
				out, err = s.Feed(out, in[at:min(at+n, len(in))])
				at += n
			}
			if err == nil {
				out, err = s.Close(out)
			}
			if err != nil {
				t.Fatalf("%v -> %v: %v\n%s", provider, client, err, out)
			}
			got := readClientStream(t, client, out)
			if got.deltas != want {
				t.Fatalf("%v -> %v: deltas join to\n%q\nwant\n%q", provider, client, got.deltas, want)
			}
			for _, final := range got.finals {
				if final != want {
					t.Fatalf("%v -> %v: final text %q, want %q", provider, client, final, want)
				}
			}
		}
	})
}

func FuzzMaskedResponse(f *testing.F) {
	for i, s := range maskFuzzSeeds {
		f.Add(s, uint8(i))
	}
	g := testGuard(f)
	f.Fuzz(func(t *testing.T, text string, pick uint8) {
		text = strings.ToValidUTF8(text, "\uFFFD")
		provider := fuzzProviders[int(pick)%len(fuzzProviders)]
		body := providerResponse(provider, text)
		want := maskString(g, text)
		for _, client := range clientsOf(provider) {
			out, _, err := Response(nil, body, RequestInfo{Client: client, Provider: provider, Model: "m", Mask: g})
			if err != nil {
				t.Fatalf("%v -> %v: %v", provider, client, err)
			}
			if !llm.Valid(out) {
				t.Fatalf("%v -> %v: not JSON: %s", provider, client, out)
			}
			if got := responseText(t, client, out); got != want {
				t.Fatalf("%v -> %v: text %q, want %q", provider, client, got, want)
			}
		}
	})
}

// providerStream is a provider's stream whose answer is deltas.
func providerStream(tb testing.TB, f Format, deltas []string) []byte {
	var b []byte
	str := func(s string) string { return string(llm.AppendString(nil, s)) }
	switch f {
	case Chat:
		head := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
		b = append(b, head+`{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n"...)
		for _, d := range deltas {
			b = append(b, head+`{"content":`+str(d)+`},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		}
		b = append(b, head+`{},"finish_reason":"stop"}]}`+"\n\n"...)
		b = append(b, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`+"\n\ndata: [DONE]\n\n"...)
	case Messages:
		b = append(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"...)
		b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"...)
		for _, d := range deltas {
			b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"+str(d)+"}}\n\n"...)
		}
		b = append(b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"...)
		b = append(b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"...)
		b = append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	case Gemini:
		for i, d := range deltas {
			finish := ""
			if i == len(deltas)-1 {
				finish = `,"finishReason":"STOP"`
			}
			b = append(b, `data: {"candidates":[{"content":{"parts":[{"text":`+str(d)+`}],"role":"model"}`+finish+`,"index":0}],"modelVersion":"g"}`+"\n\n"...)
		}
		if len(deltas) == 0 {
			b = append(b, `data: {"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"g"}`+"\n\n"...)
		}
	case Bedrock:
		lines := []string{`event messageStart {"role":"assistant"}`}
		for _, d := range deltas {
			lines = append(lines, `event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":`+str(d)+`}}`)
		}
		lines = append(lines, `event contentBlockStop {"contentBlockIndex":0}`, `event messageStop {"stopReason":"end_turn"}`,
			`event metadata {"usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}`)
		b = bedrockFixture(tb, []byte(strings.Join(lines, "\n")))
	case Responses:
		seq := 0
		ev := func(typ, rest string) {
			b = append(b, "event: "+typ+"\ndata: {\"type\":\""+typ+"\",\"sequence_number\":"+itoa(seq)+rest+"}\n\n"...)
			seq++
		}
		full := str(strings.Join(deltas, ""))
		ref := `,"item_id":"msg_1","output_index":0,"content_index":0`
		ev("response.created", `,"response":{"id":"resp_1","status":"in_progress","output":[]}`)
		ev("response.output_item.added", `,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}`)
		ev("response.content_part.added", ref+`,"part":{"type":"output_text","annotations":[],"text":""}`)
		for _, d := range deltas {
			ev("response.output_text.delta", ref+`,"delta":`+str(d)+`,"logprobs":[]`)
		}
		item := `{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":` + full + `}],"role":"assistant"}`
		ev("response.output_text.done", ref+`,"text":`+full)
		ev("response.content_part.done", ref+`,"part":{"type":"output_text","annotations":[],"text":`+full+`}`)
		ev("response.output_item.done", `,"output_index":0,"item":`+item)
		ev("response.completed", `,"response":{"id":"resp_1","status":"completed","output":[`+item+`],"output_text":`+full+`,"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`)
	}
	return b
}

// providerResponse is a provider's whole response whose answer is text.
func providerResponse(f Format, text string) []byte {
	s := string(llm.AppendString(nil, text))
	switch f {
	case Chat:
		return []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + s + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	case Messages:
		return []byte(`{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":` + s + `}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}`)
	case Gemini:
		return []byte(`{"candidates":[{"content":{"parts":[{"text":` + s + `}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"g"}`)
	case Bedrock:
		return []byte(`{"output":{"message":{"role":"assistant","content":[{"text":` + s + `}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}`)
	case Responses:
		return []byte(`{"id":"resp_1","object":"response","status":"completed","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":` + s + `}]}],"output_text":` + s + `,"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`)
	}
	return nil
}
