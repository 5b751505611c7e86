package llm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"testing"
	"unicode/utf8"
)

// Fuzz targets of the wire-format decoders: no input panics, and what is
// decoded stays bounded by the input (Raw values alias it, or are a copy
// with invalid UTF-8 replaced, at most three times as long).

func within(t *testing.T, in []byte, r Raw) {
	t.Helper()
	if len(r) > 3*len(in) {
		t.Fatalf("Raw of %d bytes from an input of %d", len(r), len(in))
	}
}

func FuzzDecodeChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true}`))
	f.Add([]byte(`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}],"usage":null}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d Decoder
		var r ChatRequest
		if r.Decode(&d, in) == nil {
			for _, m := range r.Messages {
				within(t, in, m.Content)
			}
		}
		var c ChatChunk
		if c.Decode(&d, in) == nil {
			within(t, in, c.Usage)
		}
		var p ChatResponse
		_ = p.Decode(&d, in)
		var parts []ChatContentPart
		_ = d.Decode(in, &parts)
	})
}

func FuzzDecodeAnthropic(f *testing.F) {
	f.Add([]byte(`{"model":"c","max_tokens":1,"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"r"}]}]}]}`))
	f.Add([]byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d Decoder
		var r AnthropicRequest
		if r.Decode(&d, in) == nil {
			within(t, in, r.System)
		}
		var e AnthropicStreamEvent
		_ = e.Decode(&d, in)
		var p AnthropicResponse
		_ = p.Decode(&d, in)
		var blocks []AnthropicBlock
		_ = d.Decode(in, &blocks)
	})
}

func FuzzDecodeResponses(f *testing.F) {
	f.Add([]byte(`{"model":"g","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"input_tokens":1}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d Decoder
		var r ResponsesRequest
		if r.Decode(&d, in) == nil {
			within(t, in, r.Input)
		}
		var e ResponsesStreamEvent
		_ = e.Decode(&d, in)
		var items []ResponsesItem
		_ = d.Decode(in, &items)
	})
}

func FuzzDecodeGemini(f *testing.F) {
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"x"},{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d Decoder
		var r GeminiRequest
		_ = r.Decode(&d, in)
		var p GeminiResponse
		_ = p.Decode(&d, in)
		var e GeminiErrorBody
		_ = d.Decode(in, &e)
	})
}

func FuzzDecodeBedrock(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"text":"x"},{"toolResult":{"toolUseId":"t","content":[{"text":"r"}]}}]}]}`))
	f.Add([]byte(`{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"s"}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d Decoder
		var r BedrockRequest
		_ = r.Decode(&d, in)
		var p BedrockResponse
		_ = p.Decode(&d, in)
		var e BedrockStreamEvent
		_ = e.Decode(&d, in)
	})
}

// FuzzSetMember checks Members and SetMember against encoding/json: valid
// objects stay valid with the member set, and nothing else changes.
func FuzzSetMember(f *testing.F) {
	f.Add([]byte(`{"model":"a","x":[1,{"model":2}]}`), "model")
	f.Add([]byte(` {"a" : "\u0061" , "b":null} `), "a")
	f.Fuzz(func(t *testing.T, obj []byte, name string) {
		if !utf8.ValidString(name) {
			return // AppendString writes U+FFFD for it: another name
		}
		out, err := SetMember(nil, obj, name, []byte(`"v"`))
		var before map[string]any
		stdErr := json.Unmarshal(obj, &before)
		if err != nil {
			if stdErr == nil && bytes.Count(obj, []byte("[")) < MaxDepth/2 && bytes.Count(obj, []byte("{")) < MaxDepth/2 {
				t.Fatalf("SetMember refused an object encoding/json reads: %v", err)
			}
			return
		}
		if len(out) > len(obj)+len(name)*6+16 {
			t.Fatalf("output of %d bytes from %d", len(out), len(obj))
		}
		if stdErr != nil {
			return // we are more lenient (numbers, UTF-8): nothing to compare
		}
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("output not JSON: %v\n%s", err, out)
		}
		if after[name] != "v" {
			t.Fatalf("member not set: %s", out)
		}
		delete(before, name)
		delete(after, name)
		if len(before) != len(after) {
			t.Fatalf("members changed: %v -> %v", before, after)
		}
	})
}

// FuzzUnquote checks AppendUnquoted and AppendString against encoding/json.
func FuzzUnquote(f *testing.F) {
	f.Add([]byte(`"a\u00e9\ud83c\udf70\n"`))
	f.Add([]byte(`"\ud800"`))
	f.Fuzz(func(t *testing.T, tok []byte) {
		var std string
		stdErr := json.Unmarshal(tok, &std)
		got, err := AppendUnquoted(nil, tok)
		if stdErr == nil && utf8.Valid(tok) && bytes.HasPrefix(tok, []byte(`"`)) && len(bytes.TrimSpace(tok)) == len(tok) {
			if err != nil || string(got) != std {
				t.Fatalf("unquote %s: %q %v, encoding/json %q", tok, got, err, std)
			}
		}
		q := AppendString(nil, tok)
		var back string
		if err := json.Unmarshal(q, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", tok, q, err)
		}
	})
}

// FuzzEventStream feeds arbitrary bytes in arbitrary pieces: no panic, no
// message larger than the bound, and every whole frame decoded the same way
// (or refused) by decodeFrame and by the AWS SDK's decoder.
func FuzzEventStream(f *testing.F) {
	f.Add(AppendEventMessage(nil, []byte(`{"a":1}`), ":event-type", "x"), uint8(3))
	f.Add(append(AppendEventMessage(nil, nil, ":message-type", "exception"), 0, 0, 0, 20), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		s := EventStream{Max: 4096}
		n := int(step%64) + 1
		for i := 0; i < len(in); i += n {
			_, _ = s.Write(in[i:min(i+n, len(in))])
			for {
				m, ok, err := s.Next()
				if err != nil || !ok {
					break
				}
				if len(m.Payload) > 4096 {
					t.Fatalf("payload of %d bytes past the bound", len(m.Payload))
				}
			}
		}
		// Differential: the first frame the prelude delimits.
		if len(in) < eventMinLen {
			return
		}
		total := int(binary.BigEndian.Uint32(in))
		headers := int(binary.BigEndian.Uint32(in[4:]))
		if total < eventMinLen || total > len(in) || headers > total-eventMinLen {
			return
		}
		frame := in[:total]
		compareDecoders(t, frame)
		// And with the CRCs made right, so the headers are read too.
		fixed := append([]byte(nil), frame...)
		binary.BigEndian.PutUint32(fixed[8:], crc32.ChecksumIEEE(fixed[:8]))
		binary.BigEndian.PutUint32(fixed[total-4:], crc32.ChecksumIEEE(fixed[:total-4]))
		compareDecoders(t, fixed)
	})
}

func compareDecoders(t *testing.T, frame []byte) {
	var ours, sdk EventMessage
	errOurs := decodeFrame(frame, &ours)
	var ss EventStream
	errSDK := ss.decodeSDK(frame, &sdk)
	if (errOurs == nil) != (errSDK == nil) {
		t.Fatalf("decodeFrame: %v, SDK: %v", errOurs, errSDK)
	}
	if errOurs == nil && (ours.MessageType != sdk.MessageType || ours.EventType != sdk.EventType ||
		ours.ExceptionType != sdk.ExceptionType || ours.ErrorCode != sdk.ErrorCode ||
		ours.ErrorMessage != sdk.ErrorMessage || !bytes.Equal(ours.Payload, sdk.Payload)) {
		t.Fatalf("decodeFrame %+v, SDK %+v", ours, sdk)
	}
}

// FuzzValidValueEnd: on an object ValidObject accepts, ValidValueEnd (the
// trusted skipper) ends every member's value where the checking walk does;
// on any other text it reads nothing out of bounds.
func FuzzValidValueEnd(f *testing.F) {
	f.Add([]byte(`{"model":"a","x":[1,{"model":"q\"}"}],"s":"\\\\","n":-1.5e3,"t":true}`))
	f.Add([]byte(` { "a" : { "b" : [ "]" , "}" ] } , "c" : "\"" } `))
	f.Add([]byte(`{"a":"\\"}`))
	f.Add([]byte(`{"a":"x\`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !ValidObject(obj) {
			for i := range obj {
				if end := ValidValueEnd(obj, i); end > len(obj) {
					t.Fatalf("ValidValueEnd(%q, %d) = %d, past the end", obj, i, end)
				}
			}
			return
		}
		var m Members
		m.Reset(obj)
		for m.Next() {
			start := m.ValueEnd() - len(m.Value())
			if end := ValidValueEnd(obj, start); end != m.ValueEnd() {
				t.Fatalf("on %q: ValidValueEnd at %d = %d, the walk ends the value %q at %d", obj, start, end, m.Value(), m.ValueEnd())
			}
		}
		if m.Err() != nil {
			t.Fatalf("%v on %q", m.Err(), obj)
		}
	})
}

// FuzzLastMember: on an object ValidObject accepts, LastMember finds what
// the checking walk finds (the last member of the name); on any other text
// it answers without reading out of bounds.
func FuzzLastMember(f *testing.F) {
	f.Add([]byte(`{"id":"x","choices":[{"m":{"usage":1}}],"usage":{"a":1},"z":"}"}`), "usage")
	f.Add([]byte(`{"usage":1,"usage":2}`), "usage")
	f.Add([]byte(`{"us\u0061ge":3}`), "usage")
	f.Add([]byte(`{"a":[1,2}`), "a")
	f.Add([]byte(`{}`), "a")
	f.Fuzz(func(t *testing.T, obj []byte, name string) {
		v, ok := LastMember(obj, name)
		if !ValidObject(obj) {
			return
		}
		var want Raw
		var m Members
		m.Reset(obj)
		for m.Next() {
			if m.NameIs(name) {
				want = m.Value()
			}
		}
		if !ok || !bytes.Equal(v, want) || (v == nil) != (want == nil) {
			t.Fatalf("LastMember(%q, %q) = %q, %v; the walk finds %q", obj, name, v, ok, want)
		}
	})
}

// FuzzHasDuplicateMembers: the scan never panics, and on valid JSON (and
// UTF-8) it
// agrees with a decoder that keeps every member (encoding/json's Decoder
// tokens, objects' names compared per object).
func FuzzHasDuplicateMembers(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1},"b":[{"c":1,"c":2}]}`, `[1,"x",{}]`, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := HasDuplicateMembers(b)
		if !json.Valid(b) || !utf8.Valid(b) {
			// (encoding/json reads invalid UTF-8 as U+FFFD; the mask repairs
			// a body so before it looks.)
			return
		}
		if want := stdHasDuplicate(b); got != want {
			t.Fatalf("%q: %v, encoding/json says %v", b, got, want)
		}
	})
}

// stdHasDuplicate is HasDuplicateMembers by encoding/json's tokens.
func stdHasDuplicate(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj   bool
		names map[string]bool
		key   bool // the next string token is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: true, names: map[string]bool{}, key: true})
				continue
			case '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return false
				}
				continue
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.names[v] {
					return true
				}
				top.names[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
		if len(stack) == 0 {
			return false
		}
	}
}
