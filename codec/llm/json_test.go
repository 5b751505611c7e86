package llm

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	cases := []struct{ desc, in, want string }{
		{desc: "plain", in: "hello", want: `"hello"`},
		{desc: "quote and backslash", in: `a"b\c`, want: `"a\"b\\c"`},
		{desc: "controls", in: "\n\r\t\x00\x1f", want: `"\n\r\t\u0000\u001f"`},
		{desc: "utf-8 kept", in: "été 🍰", want: `"été 🍰"`},
		{desc: "invalid utf-8 replaced", in: "a\xffb", want: `"a\ufffdb"`},
		{desc: "line separators escaped", in: "a\u2028b\u2029", want: `"a\u2028b\u2029"`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			got := string(AppendString(nil, tc.in))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if b := string(AppendString(nil, []byte(tc.in))); b != got {
				t.Errorf("[]byte form differs: %s", b)
			}
			var back string
			if err := json.Unmarshal([]byte(got), &back); err != nil || (utf8.ValidString(tc.in) && back != tc.in) {
				t.Errorf("does not read back: %q %v", back, err)
			}
		})
	}
}

func TestAppendUnquoted(t *testing.T) {
	cases := []struct {
		desc, in, want string
		err            bool
	}{
		{desc: "plain", in: `"abc"`, want: "abc"},
		{desc: "escapes", in: `"a\"b\\c\/d\n\t\r\b\f"`, want: "a\"b\\c/d\n\t\r\b\f"},
		{desc: "unicode", in: `"\u00e9\ud83c\udf70"`, want: "é🍰"},
		{desc: "lone surrogate", in: `"\ud83c x"`, want: "\ufffd x"},
		{desc: "not a string", in: `12`, err: true},
		{desc: "bad escape", in: `"\q"`, err: true},
		{desc: "short unicode", in: `"\u12"`, err: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := AppendUnquoted(nil, []byte(tc.in))
			if (err != nil) != tc.err || (!tc.err && string(got) != tc.want) {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestRawHelpers(t *testing.T) {
	cases := []struct {
		desc                                   string
		raw                                    Raw
		present, isString, isArray, isObj, blk bool
	}{
		{desc: "absent", raw: nil},
		{desc: "null", raw: Raw("null")},
		{desc: "string", raw: Raw(`"x"`), present: true, isString: true},
		{desc: "blank string", raw: Raw(`" \n\t"`), present: true, isString: true, blk: true},
		{desc: "empty string", raw: Raw(`""`), present: true, isString: true, blk: true},
		{desc: "array", raw: Raw(`[1]`), present: true, isArray: true},
		{desc: "object", raw: Raw(`{}`), present: true, isObj: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			r := tc.raw
			if r.Present() != tc.present || r.IsString() != tc.isString || r.IsArray() != tc.isArray || r.IsObject() != tc.isObj || (tc.isString && r.Blank() != tc.blk) {
				t.Errorf("%s: present %v string %v array %v object %v blank %v", r, r.Present(), r.IsString(), r.IsArray(), r.IsObject(), r.Blank())
			}
		})
	}
}

func TestMembersAndSetMember(t *testing.T) {
	cases := []struct {
		desc, obj, name, value, want string
		remove                       bool
		err                          bool
	}{
		{desc: "replace", obj: `{"a":1, "model" : "x","b":[{"model":2}]}`, name: "model", value: `"y"`, want: `{"a":1,"model":"y","b":[{"model":2}]}`},
		{desc: "append", obj: `{"a":1}`, name: "model", value: `"y"`, want: `{"a":1,"model":"y"}`},
		{desc: "empty object", obj: ` { } `, name: "model", value: `"y"`, want: `{"model":"y"}`},
		{desc: "duplicates dropped", obj: `{"model":1,"model":2,"c":3}`, name: "model", value: `0`, want: `{"model":0,"c":3}`},
		{desc: "escaped name matches", obj: `{"mod\u0065l":1}`, name: "model", value: `2`, want: `{"model":2}`},
		{desc: "remove", obj: `{"a":1,"model":2}`, name: "model", remove: true, want: `{"a":1}`},
		{desc: "not an object", obj: `[1]`, name: "a", value: `1`, err: true},
		{desc: "truncated", obj: `{"a":`, name: "a", value: `1`, err: true},
		{desc: "trailing garbage", obj: `{"a":1} x`, name: "a", value: `1`, err: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			var value []byte
			if !tc.remove {
				value = []byte(tc.value)
			}
			got, err := SetMember([]byte("keep"), []byte(tc.obj), tc.name, value)
			if tc.err {
				if err == nil || string(got) != "keep" {
					t.Errorf("got %s, %v; want an error and dst untouched", got, err)
				}
				return
			}
			if err != nil || string(got) != "keep"+tc.want {
				t.Errorf("got %s, %v; want keep%s", got, err, tc.want)
			}
		})
	}
}

func TestValid(t *testing.T) {
	for _, s := range []string{`{}`, ` [1, "a", {"b": null}] `, `"x"`, `-1.5e3`, `true`} {
		if !Valid([]byte(s)) {
			t.Errorf("%s: not valid", s)
		}
	}
	for _, s := range []string{``, `{`, `{"a"}`, `[1,]`, `"\x"`, `{} {}`, `tru`} {
		if Valid([]byte(s)) {
			t.Errorf("%s: valid", s)
		}
	}
	if ValidObject([]byte(`[1]`)) || !ValidObject([]byte(` {"a":1}`)) {
		t.Error("ValidObject")
	}
}

func TestDecodeAliasesAndResets(t *testing.T) {
	var d Decoder
	var r ChatRequest
	a := []byte(`{"model":"m1","messages":[{"role":"user","content":"hi","name":"n"},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"r"}]}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":7,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"unknown":{"deep":[1,2]}}`)
	if err := r.Decode(&d, a); err != nil {
		t.Fatal(err)
	}
	if r.Model != "m1" || !r.Stream || !r.StreamOptions.IncludeUsage || string(r.MaxTokens) != "7" || len(r.Messages) != 2 ||
		string(r.Messages[0].Content) != `"hi"` || r.Messages[1].ToolCallID != "c1" || string(r.Tools[0].Function.Parameters) != `{"type":"object"}` {
		t.Fatalf("decoded %+v", r)
	}
	if c := r.Messages[0].Content; &c[0] != &a[strings.Index(string(a), `"hi"`)] {
		t.Error("Raw does not alias the body")
	}
	b := []byte(`{"model":"m2","messages":[{"role":"assistant"}]}`)
	if err := r.Decode(&d, b); err != nil {
		t.Fatal(err)
	}
	if r.Stream || r.MaxTokens != nil || len(r.Tools) != 0 || r.Messages[0].Name != "" || r.Messages[0].Content != nil {
		t.Errorf("stale members after a second decode: %+v", r)
	}
	if err := r.Decode(&d, []byte(`{"model":1}`)); err == nil {
		t.Error("type mismatch accepted")
	}
	if err := r.Decode(&d, []byte(`{"model":"a"} x`)); err == nil {
		t.Error("trailing bytes accepted")
	}
	if err := r.Decode(&d, []byte(`{"Model":"a"}`)); err != nil || r.Model != "" {
		t.Errorf("names must match case-sensitively: %q %v", r.Model, err)
	}
}

func TestDecodeEachFormat(t *testing.T) {
	cases := []struct {
		desc  string
		body  string
		v     interface{ Reset() }
		check func(any) bool
	}{
		{desc: "anthropic request", body: `{"model":"c","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool","name":"t"},"thinking":{"type":"enabled","budget_tokens":1024}}`,
			v: &AnthropicRequest{}, check: func(v any) bool {
				r := v.(*AnthropicRequest)
				return string(r.MaxTokens) == "5" && r.System.IsArray() && r.ToolChoice.Name == "t" && r.Thinking.BudgetTokens == 1024
			}},
		{desc: "anthropic stream event", body: `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`,
			v: &AnthropicStreamEvent{}, check: func(v any) bool {
				e := v.(*AnthropicStreamEvent)
				return e.Index == 2 && string(e.Delta.PartialJSON) == `"{\"a\""`
			}},
		{desc: "responses request", body: `{"model":"g","input":[{"role":"user","content":"x"}],"max_output_tokens":9,"reasoning":{"effort":"low"}}`,
			v: &ResponsesRequest{}, check: func(v any) bool {
				r := v.(*ResponsesRequest)
				return string(r.MaxOutputTokens) == "9" && r.Input.IsArray() && r.Reasoning.Effort == "low"
			}},
		{desc: "gemini response", body: `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"thoughtsTokenCount":2}}`,
			v: &GeminiResponse{}, check: func(v any) bool {
				r := v.(*GeminiResponse)
				return r.Candidates[0].Content.Parts[0].FunctionCall.Name == "f" && r.UsageMetadata.ThoughtsTokenCount == 2
			}},
		{desc: "bedrock response", body: `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"n","input":{"a":1}}}]}},"stopReason":"tool_use","usage":{"inputTokens":1,"cacheReadInputTokens":4}}`,
			v: &BedrockResponse{}, check: func(v any) bool {
				r := v.(*BedrockResponse)
				return r.StopReason == "tool_use" && r.Output.Message.Content[0].ToolUse.Name == "n" && r.Usage.CacheReadInputTokens == 4
			}},
		{desc: "bedrock stream event", body: `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"a\":"}},"p":"xyz"}`,
			v: &BedrockStreamEvent{}, check: func(v any) bool {
				e := v.(*BedrockStreamEvent)
				return e.ContentBlockIndex == 1 && e.Delta.ToolUse.Input.IsString()
			}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tc.v.Reset()
			if err := Unmarshal([]byte(tc.body), tc.v); err != nil {
				t.Fatal(err)
			}
			if !tc.check(tc.v) {
				t.Errorf("decoded %+v", tc.v)
			}
		})
	}
}

// TestUnescapeAt: each JSON escape, surrogate pairs and lone halves, and
// the escapes JSON does not have.
func TestUnescapeAt(t *testing.T) {
	tests := []struct {
		in   string
		r    rune
		next int
		ok   bool
	}{
		{`\n`, '\n', 2, true},
		{`\/x`, '/', 2, true},
		{`\"`, '"', 2, true},
		{`\u00e9`, 'é', 6, true},
		{`\ud83d\ude00!`, '😀', 12, true},
		{`\ud83dx`, '\uFFFD', 6, true},      // a lone high half
		{`\ud83d\u0041`, '\uFFFD', 6, true}, // a high half before no low one
		{`\ude00`, '\uFFFD', 6, true},       // a lone low half
		{`\u12`, '\uFFFD', 2, false},        // cut short
		{`\uzzzz`, '\uFFFD', 2, false},      // not hex
		{`\x`, '\uFFFD', 2, false},          // not a JSON escape
		{`\`, '\uFFFD', 1, false},           // nothing after the backslash
	}
	for _, tc := range tests {
		r, next, ok := UnescapeAt([]byte(tc.in), 0)
		if r != tc.r || next != tc.next || ok != tc.ok {
			t.Errorf("UnescapeAt(%q) = %q, %d, %v; want %q, %d, %v", tc.in, r, next, ok, tc.r, tc.next, tc.ok)
		}
	}
}

// appendEscapedByByte is appendEscaped as it was before it skipped plain
// words: one byte a turn. FuzzAppendString holds the two together.
func appendEscapedByByte(dst []byte, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// FuzzAppendString: the word-skipping escaper writes what the byte-a-turn
// one does, for strings and byte slices.
func FuzzAppendString(f *testing.F) {
	f.Add([]byte("hello, a plain prompt of more than eight bytes"))
	f.Add([]byte("12345678\"2345678\\\n\x00é🍰\xff\u2028 tail"))
	f.Add([]byte("abcdefg\x80abcdefgh"))
	f.Fuzz(func(t *testing.T, in []byte) {
		want := string(appendEscapedByByte([]byte("x"), in))
		if got := string(appendEscaped([]byte("x"), in)); got != want {
			t.Fatalf("appendEscaped(%q) = %q, want %q", in, got, want)
		}
		if got := string(appendEscaped([]byte("x"), string(in))); got != want {
			t.Fatalf("appendEscaped(string %q) = %q, want %q", in, got, want)
		}
	})
}

// BenchmarkAppendString escapes a 685-byte prompt (the bench request's
// user message, one e-mail address masked).
func BenchmarkAppendString(b *testing.B) {
	text := []byte(strings.Repeat("Hello! I ordered three books last Tuesday (order 48151623) and the tracking page says ", 8)[:685])
	dst := make([]byte, 0, 1024)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		dst = AppendString(dst[:0], text)
	}
}

// TestMembersNameIs: names compare by their decoded text, escapes and all;
// a raw name no longer than the one asked for compares by its bytes.
func TestMembersNameIs(t *testing.T) {
	tests := []struct {
		obj, name string
		want      bool
	}{
		{`{"model":1}`, "model", true},
		{`{"model":1}`, "mode", false},
		{`{"mode":1}`, "model", false},
		{`{"m\u006fdel":1}`, "model", true},
		{`{"m\u006fdel":1}`, "m\\u006fdel", false},
		{`{"\"":1}`, `"`, true},
		{`{"a\\b":1}`, `a\b`, true},
		{`{"a\\b":1}`, `a\\b`, false},
		{`{"\ud83c\udf70":1}`, "🍰", true},
		{`{"\u00e9t\u00e9":1}`, "été", true},
		{`{"\u00e9":1}`, "\\u00", false},
		{`{"\q":1}`, "q", false},
	}
	for _, tc := range tests {
		var m Members
		m.Reset([]byte(tc.obj))
		if !m.Next() {
			if tc.want {
				t.Fatalf("%s: no member (%v)", tc.obj, m.Err())
			}
			continue
		}
		if got := m.NameIs(tc.name); got != tc.want {
			t.Errorf("%s NameIs(%q) = %v, want %v", tc.obj, tc.name, got, tc.want)
		}
	}
}

// FuzzNameIs: NameIs answers as comparing the decoded name would, and
// KeyText returns the decoded name.
func FuzzNameIs(f *testing.F) {
	f.Add(`"m\u006fdel"`, "model")
	f.Add(`"m\u006fdel"`, `m\u006fdel`)
	f.Add(`"a\\b"`, `a\b`)
	f.Add(`"\ud83c\udf70"`, "🍰")
	f.Fuzz(func(t *testing.T, raw, name string) {
		var m Members
		m.Reset([]byte("{" + raw + ":1}"))
		if !m.Next() {
			return
		}
		text, err := AppendUnquoted(nil, m.Name())
		want := err == nil && string(text) == name
		if got := m.NameIs(name); got != want {
			t.Fatalf("name %s: NameIs(%q) = %v, decoded %q", m.Name(), name, got, text)
		}
		key := KeyText(nil, m.Name())
		if (err == nil) != (key != nil) || string(key) != string(text) {
			t.Fatalf("name %s: KeyText = %q, decoded %q (%v)", m.Name(), key, text, err)
		}
	})
}

func TestLastMember(t *testing.T) {
	for _, c := range []struct {
		desc, obj, name, want string
		ok                    bool
	}{
		{"top level", `{"id":"x","usage":{"n":1}}`, "usage", `{"n":1}`, true},
		{"nested names do not count", `{"choices":[{"usage":1}],"o":{"usage":2}}`, "usage", ``, true},
		{"the last of two", `{"usage":1, "usage" : 2 }`, "usage", `2`, true},
		{"an escaped name", `{"us\u0061ge":3}`, "usage", `3`, true},
		{"brackets in strings", `{"a":"}]","usage":[1,"[",{"b":"{"}]}`, "usage", `[1,"[",{"b":"{"}]`, true},
		{"spaces around", " \n{ \"usage\" :\tnull } \r\n", "usage", `null`, true},
		{"empty object", `{}`, "usage", ``, true},
		{"not an object", `[1]`, "usage", ``, false},
		{"unclosed container", `{"usage":{"n":1}`, "usage", ``, false},
		{"unclosed string", `{"usage":"abc}`, "usage", ``, false},
		{"no colon", `{"usage" 1}`, "usage", ``, false},
		{"no value", `{"usage":}`, "usage", ``, false},
		{"a name that is not a string", `{usage:1}`, "usage", ``, false},
		{"text after the object", `{"usage":1} x`, "usage", ``, false},
		{"a missing comma", `{"a":1 "usage":2}`, "usage", ``, false},
		{"truncated", `{"a":1,`, "usage", ``, false},
		{"empty", ``, "usage", ``, false},
	} {
		t.Run(c.desc, func(t *testing.T) {
			v, ok := LastMember([]byte(c.obj), c.name)
			if ok != c.ok || string(v) != c.want {
				t.Fatalf("LastMember(%q, %q) = %q, %v; want %q, %v", c.obj, c.name, v, ok, c.want, c.ok)
			}
		})
	}
}

// TestHasDuplicateMembers: a member name twice in one object, at any depth
// and however escaped, is found; the same name in sibling or nested objects
// is not a duplicate; text that is not JSON is left to the decoder.
func TestHasDuplicateMembers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"a":1,"b":2}`, false},
		{`{"a":1,"a":2}`, true},
		{`{"choices":[{"message":{"content":"x"}}],"choices":[]}`, true},
		{`{"choices":[{"message":{"content":"x","content":"y"}}]}`, true},
		{`{"a":1,"\u0061":2}`, true},
		{`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, false},
		{`[{"x":1},{"x":1,"x":2}]`, true},
		{` {"a" : [ 1 , "a" , {"b":null} ] } `, false},
		{`{}`, false},
		{`"s"`, false},
		{`{"a":1`, false},
		{`{"a":1} x`, false},
		{`[DONE]`, false},
		{`{"a":1,"a":2`, true},
		{`{"a":"\ud800"}`, false},
	} {
		if got := HasDuplicateMembers([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.in, got, tc.want)
		}
	}
}
