package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// describe is a comparable description of a message.
func describe(m Message) string {
	switch m := m.(type) {
	case *Request:
		return fmt.Sprintf("request id=%q method=%q params=%s", IDKey(m.ID), m.Method, m.Params)
	case *Response:
		if m.Error != nil {
			e := wireError(m.Error)
			return fmt.Sprintf("response id=%q error=%d %q data=%s", IDKey(m.ID), e.Code, e.Message, e.Data)
		}
		return fmt.Sprintf("response id=%q result=%s", IDKey(m.ID), m.Result)
	}
	return fmt.Sprintf("%T", m)
}

func describeAll(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = describe(m)
	}
	return out
}

func mustID(t testing.TB, v any) ID {
	t.Helper()
	id, err := sdk.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDecode(t *testing.T) {
	req := func(id, method, params string) string {
		return fmt.Sprintf("request id=%q method=%q params=%s", id, method, params)
	}
	res := func(id, result string) string { return fmt.Sprintf("response id=%q result=%s", id, result) }
	errRes := func(id string, code int64, msg, data string) string {
		return fmt.Sprintf("response id=%q error=%d %q data=%s", id, code, msg, data)
	}
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	var long strings.Builder
	long.WriteString("[")
	for i := 0; i <= MaxBatch; i++ {
		if i > 0 {
			long.WriteString(",")
		}
		long.WriteString(`{"jsonrpc":"2.0","method":"ping"}`)
	}
	long.WriteString("]")

	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		batch   bool
		code    int64  // expected DecodeError code, 0 for success
		errText string // part of the error message
	}{
		// Requests.
		{name: "call", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
			want: []string{req("n:1", "tools/call", `{"name":"echo","arguments":{"message":"hi"}}`)}},
		{name: "string id", in: `{"jsonrpc":"2.0","id":"1","method":"ping"}`, want: []string{req("s:1", "ping", "")}},
		{name: "empty string id", in: `{"jsonrpc":"2.0","id":"","method":"ping"}`, want: []string{req("s:", "ping", "")}},
		{name: "zero and negative ids", in: `[{"jsonrpc":"2.0","id":0,"method":"a"},{"jsonrpc":"2.0","id":-7,"method":"b"},{"jsonrpc":"2.0","id":-0,"method":"c"}]`, batch: true,
			want: []string{req("n:0", "a", ""), req("n:-7", "b", ""), req("n:0", "c", "")}},
		{name: "largest ids", in: `[{"jsonrpc":"2.0","id":9007199254740992,"method":"a"},{"jsonrpc":"2.0","id":-9007199254740992,"method":"b"}]`, batch: true,
			want: []string{req("n:9007199254740992", "a", ""), req("n:-9007199254740992", "b", "")}},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: []string{req("", "notifications/initialized", "")}},
		{name: "notification with params", in: `{"method":"notifications/cancelled","params":{"requestId":3,"reason":"x"},"jsonrpc":"2.0"}`,
			want: []string{req("", "notifications/cancelled", `{"requestId":3,"reason":"x"}`)}},
		{name: "array params", in: `{"jsonrpc":"2.0","id":2,"method":"sum","params":[1,2]}`, want: []string{req("n:2", "sum", "[1,2]")}},
		{name: "null params are absent", in: `{"jsonrpc":"2.0","id":2,"method":"ping","params":null}`, want: []string{req("n:2", "ping", "")}},
		{name: "deepest params", in: `{"jsonrpc":"2.0","id":2,"method":"m","params":` + nest(MaxDepth-1) + `}`, want: []string{req("n:2", "m", nest(MaxDepth-1))}},
		{name: "deepest batch", in: `[{"jsonrpc":"2.0","id":2,"method":"m","params":` + nest(MaxDepth-1) + `}]`, batch: true, want: []string{req("n:2", "m", nest(MaxDepth-1))}},
		{name: "params keep their bytes", in: `{"jsonrpc":"2.0","id":2,"method":"m","params":{ "a" : [ 1 , 2 ] }}`, want: []string{req("n:2", "m", `{ "a" : [ 1 , 2 ] }`)}},
		{name: "whitespace around", in: " \t\r\n{\"jsonrpc\" : \"2.0\" , \"id\" : 5 , \"method\" : \"ping\"}\n\n ", want: []string{req("n:5", "ping", "")}},
		{name: "unknown members ignored", in: `{"jsonrpc":"2.0","id":1,"method":"ping","extra":{"nested":[true,false,null]},"JSONRPC":1}`, want: []string{req("n:1", "ping", "")}},
		{name: "escapes in keys and values", in: `{"\u006asonrpc":"2.\u0030","i\u0064":"a\"b","method":"tools\/call"}`, want: []string{req("s:a\"b", "tools/call", "")}},
		{name: "unicode method", in: `{"jsonrpc":"2.0","id":1,"method":"héllo/wörld"}`, want: []string{req("n:1", "héllo/wörld", "")}},

		// Responses.
		{name: "result", in: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, want: []string{res("n:1", `{"tools":[]}`)}},
		{name: "null result", in: `{"jsonrpc":"2.0","id":"a","result":null}`, want: []string{res("s:a", "null")}},
		{name: "scalar result", in: `{"jsonrpc":"2.0","id":1,"result":42}`, want: []string{res("n:1", "42")}},
		{name: "error", in: `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, want: []string{errRes("n:1", -32601, "Method not found", "")}},
		{name: "error with data", in: `{"jsonrpc":"2.0","id":1,"error":{"code":7,"message":"m","data":{"why":[1]},"other":1}}`, want: []string{errRes("n:1", 7, "m", `{"why":[1]}`)}},
		{name: "null error beside result", in: `{"jsonrpc":"2.0","id":1,"result":{},"error":null}`, want: []string{res("n:1", "{}")}},
		{name: "null result beside error", in: `{"jsonrpc":"2.0","id":1,"result":null,"error":{"code":1,"message":"x"}}`, want: []string{errRes("n:1", 1, "x", "")}},

		// Batches.
		{name: "batch", in: `[{"jsonrpc":"2.0","id":1,"method":"ping"}, {"jsonrpc":"2.0","method":"notifications/initialized"} ,{"jsonrpc":"2.0","id":"x","result":{}}]`, batch: true,
			want: []string{req("n:1", "ping", ""), req("", "notifications/initialized", ""), res("s:x", "{}")}},
		{name: "batch of one", in: ` [ {"jsonrpc":"2.0","id":1,"method":"ping"} ] `, batch: true, want: []string{req("n:1", "ping", "")}},

		// Not JSON: parse errors.
		{name: "empty", in: ``, code: CodeParseError},
		{name: "only whitespace", in: " \n\t", code: CodeParseError},
		{name: "truncated", in: `{"jsonrpc":"2.0","id":1,"method":"pi`, code: CodeParseError},
		{name: "trailing comma", in: `{"jsonrpc":"2.0","method":"ping",}`, code: CodeParseError},
		{name: "trailing data", in: `{"jsonrpc":"2.0","method":"ping"} x`, code: CodeParseError},
		{name: "two messages", in: `{"jsonrpc":"2.0","method":"ping"}{"jsonrpc":"2.0","method":"ping"}`, code: CodeParseError},
		{name: "single quotes", in: `{'jsonrpc':'2.0'}`, code: CodeParseError},
		{name: "bad escape", in: `{"jsonrpc":"2.0","method":"a\x"}`, code: CodeParseError},
		{name: "bad unicode escape", in: `{"jsonrpc":"2.0","method":"\u12G4"}`, code: CodeParseError},
		{name: "control character in string", in: "{\"jsonrpc\":\"2.0\",\"method\":\"a\x01\"}", code: CodeParseError},
		{name: "invalid UTF-8", in: "{\"jsonrpc\":\"2.0\",\"method\":\"a\xff\"}", code: CodeParseError},
		{name: "bad number", in: `{"jsonrpc":"2.0","id":01,"method":"a"}`, code: CodeParseError},
		{name: "bad literal", in: `{"jsonrpc":"2.0","id":1,"method":"a","params":[tru]}`, code: CodeParseError},
		{name: "unclosed batch", in: `[{"jsonrpc":"2.0","method":"ping"},`, code: CodeParseError},
		{name: "syntax error after an invalid element", in: `[1, {"jsonrpc":"2.0" "method":"a"}]`, code: CodeParseError},
		{name: "syntax error after an invalid member", in: `{"jsonrpc":"1.0","method":}`, code: CodeParseError},
		{name: "BOM", in: "\uFEFF{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", code: CodeParseError},

		// JSON but not JSON-RPC: invalid requests.
		{name: "empty batch", in: `[]`, code: CodeInvalidRequest, errText: "empty batch"},
		{name: "empty batch with space", in: `[ ]`, code: CodeInvalidRequest, errText: "empty batch"},
		{name: "number", in: `1`, code: CodeInvalidRequest},
		{name: "string", in: `"x"`, code: CodeInvalidRequest},
		{name: "null", in: `null`, code: CodeInvalidRequest},
		{name: "empty object", in: `{}`, code: CodeInvalidRequest, errText: `"jsonrpc"`},
		{name: "no version", in: `{"id":1,"method":"ping"}`, code: CodeInvalidRequest, errText: `"jsonrpc" must be "2.0"`},
		{name: "version 1.0", in: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, code: CodeInvalidRequest, errText: `"jsonrpc" must be "2.0"`},
		{name: "version as number", in: `{"jsonrpc":2.0,"id":1,"method":"ping"}`, code: CodeInvalidRequest, errText: `"jsonrpc" must be "2.0"`},
		{name: "method not a string", in: `{"jsonrpc":"2.0","id":1,"method":1}`, code: CodeInvalidRequest, errText: `"method" must be a string`},
		{name: "empty method", in: `{"jsonrpc":"2.0","id":1,"method":""}`, code: CodeInvalidRequest, errText: `"method" must not be empty`},
		{name: "null id", in: `{"jsonrpc":"2.0","id":null,"method":"ping"}`, code: CodeInvalidRequest, errText: `"id" must not be null`},
		{name: "fractional id", in: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, code: CodeInvalidRequest, errText: `"id"`},
		{name: "exponent id", in: `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, code: CodeInvalidRequest, errText: `"id"`},
		{name: "id too large", in: `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, code: CodeInvalidRequest, errText: `"id"`},
		{name: "id beyond int64", in: `{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}`, code: CodeInvalidRequest, errText: `"id"`},
		{name: "bool id", in: `{"jsonrpc":"2.0","id":true,"method":"ping"}`, code: CodeInvalidRequest, errText: `"id"`},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, code: CodeInvalidRequest, errText: `"id"`},
		{name: "string params", in: `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, code: CodeInvalidRequest, errText: `"params"`},
		{name: "request with result", in: `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, code: CodeInvalidRequest, errText: `"result"`},
		{name: "request with error", in: `{"jsonrpc":"2.0","id":1,"method":"ping","error":{"code":1,"message":"x"}}`, code: CodeInvalidRequest},
		{name: "neither request nor response", in: `{"jsonrpc":"2.0","result":{}}`, code: CodeInvalidRequest, errText: `"method"`},
		{name: "response with null id", in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, code: CodeInvalidRequest},
		{name: "response without result or error", in: `{"jsonrpc":"2.0","id":1}`, code: CodeInvalidRequest},
		{name: "response with both", in: `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, code: CodeInvalidRequest, errText: "both"},
		{name: "response with params", in: `{"jsonrpc":"2.0","id":1,"result":{},"params":{}}`, code: CodeInvalidRequest},
		{name: "error not an object", in: `{"jsonrpc":"2.0","id":1,"error":"bad"}`, code: CodeInvalidRequest, errText: `"error" must be an object`},
		{name: "error without code", in: `{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}`, code: CodeInvalidRequest},
		{name: "error with fractional code", in: `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`, code: CodeInvalidRequest},
		{name: "error message not a string", in: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":2}}`, code: CodeInvalidRequest},
		{name: "duplicate error member", in: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"code":2,"message":"x"}}`, code: CodeInvalidRequest, errText: "duplicate"},
		{name: "duplicate method", in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, code: CodeInvalidRequest, errText: "duplicate"},
		{name: "duplicate id through an escape", in: `{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"ping"}`, code: CodeInvalidRequest, errText: "duplicate"},
		{name: "invalid batch element", in: `[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","id":1}]`, code: CodeInvalidRequest, errText: "batch element 1"},
		{name: "non-object batch element", in: `[{"jsonrpc":"2.0","method":"ping"},2]`, code: CodeInvalidRequest, errText: "batch element 1"},
		{name: "nested batch", in: `[[{"jsonrpc":"2.0","method":"ping"}]]`, code: CodeInvalidRequest, errText: "batch element 0"},
		{name: "batch too long", in: long.String(), code: CodeInvalidRequest, errText: "batch longer"},
		{name: "too deep", in: `{"jsonrpc":"2.0","method":"a","params":` + nest(MaxDepth) + `}`, code: CodeInvalidRequest, errText: "nested deeper"},
		{name: "too deep error data", in: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","data":` + nest(MaxDepth-1) + `}}`, code: CodeInvalidRequest, errText: "nested deeper"},
		{name: "too large", in: `{"jsonrpc":"2.0","method":"ping"}`, max: 10, code: CodeInvalidRequest, errText: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, batch, err := Decode([]byte(tt.in), tt.max)
			if tt.code != 0 {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("error %v (%T), want a DecodeError with code %d; messages %v", err, err, tt.code, describeAll(msgs))
				}
				if de.Code != tt.code || !strings.Contains(de.Msg, tt.errText) {
					t.Fatalf("error %d %q, want %d containing %q", de.Code, de.Msg, tt.code, tt.errText)
				}
				if msgs != nil {
					t.Fatalf("messages %v beside an error", describeAll(msgs))
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if batch != tt.batch {
				t.Fatalf("batch = %v, want %v", batch, tt.batch)
			}
			got := describeAll(msgs)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			// Whatever decodes encodes the way the SDK does and decodes
			// back to the same message, with the SDK's decoder too.
			for _, m := range msgs {
				roundTrip(t, m)
			}
		})
	}
}

// roundTrip checks that m encodes and decodes to itself, with this package
// and with the SDK.
func roundTrip(t testing.TB, m Message) {
	t.Helper()
	enc, err := Encode(m)
	if err != nil {
		t.Fatalf("Encode(%s): %v", describe(m), err)
	}
	back, batch, err := Decode(enc, len(enc))
	if err != nil || batch || len(back) != 1 {
		t.Fatalf("Decode(Encode(%s)) = %s: %d messages, batch %v, %v", describe(m), enc, len(back), batch, err)
	}
	if describe(back[0]) != describe(m) {
		t.Fatalf("round trip through %s:\n got %s\nwant %s", enc, describe(back[0]), describe(m))
	}
	viaSDK, err := sdk.DecodeMessage(enc)
	if err != nil {
		t.Fatalf("SDK DecodeMessage(%s): %v", enc, err)
	}
	if describe(viaSDK) != describe(m) {
		t.Fatalf("SDK decodes %s as %s, want %s", enc, describe(viaSDK), describe(m))
	}
}

func TestDecodeDoesNotAliasBody(t *testing.T) {
	body := []byte(`[{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}},{"jsonrpc":"2.0","id":2,"result":[2]},{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x","data":"d"}}]`)
	msgs, _, err := Decode(body, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(describeAll(msgs), "\n")
	for i := range body {
		body[i] = 'x'
	}
	if got := strings.Join(describeAll(msgs), "\n"); got != want {
		t.Fatalf("messages changed with the body:\n%s\nwas\n%s", got, want)
	}
	// The raw members do not share spare capacity either.
	p := msgs[0].(*Request).Params
	if cap(p) != len(p) {
		t.Fatalf("params have capacity %d beyond their length %d", cap(p), len(p))
	}
}

func TestDecodeMaxBytes(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","method":"ping"}`)
	if _, _, err := Decode(body, len(body)); err != nil {
		t.Fatalf("a body of exactly the bound: %v", err)
	}
	if _, _, err := Decode(body, len(body)-1); err != ErrTooLarge {
		t.Fatalf("a body one byte over the bound: %v, want ErrTooLarge", err)
	}
	big := []byte(`{"jsonrpc":"2.0","method":"ping","params":{"x":"` + strings.Repeat("a", DefaultMaxBytes) + `"}}`)
	if _, _, err := Decode(big, 0); err != ErrTooLarge {
		t.Fatalf("a body over the default bound: %v, want ErrTooLarge", err)
	}
}

func TestDecodeErrorText(t *testing.T) {
	_, _, err := Decode([]byte(`{`), 0)
	if got, want := err.Error(), "jsonrpc: parse error: body is not valid JSON (-32700)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		want string
		err  bool
	}{
		{name: "call", msg: &Request{ID: mustID(t, float64(1)), Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)},
			want: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`},
		{name: "string id", msg: &Request{ID: mustID(t, "a\"b"), Method: "ping"}, want: `{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`},
		{name: "notification", msg: &Request{Method: "notifications/initialized"}, want: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{name: "result", msg: &Response{ID: mustID(t, float64(2)), Result: json.RawMessage(`{"tools":[]}`)}, want: `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`},
		{name: "nil result", msg: &Response{ID: mustID(t, float64(2))}, want: `{"jsonrpc":"2.0","id":2,"result":null}`},
		{name: "error wins over result", msg: &Response{ID: mustID(t, float64(2)), Result: json.RawMessage(`{}`), Error: &Error{Code: 1, Message: "x"}},
			want: `{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"x"}}`},
		{name: "error with data", msg: &Response{ID: mustID(t, "r"), Error: &Error{Code: -32602, Message: "bad", Data: json.RawMessage(`[1]`)}},
			want: `{"jsonrpc":"2.0","id":"r","error":{"code":-32602,"message":"bad","data":[1]}}`},
		{name: "invalid id is null", msg: ErrorResponse(ID{}, CodeParseError, "parse error"), want: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{name: "plain error", msg: &Response{ID: mustID(t, float64(3)), Error: errors.New("boom")}, want: `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"boom"}}`},
		{name: "wrapped wire error", msg: &Response{ID: mustID(t, float64(3)), Error: wrapped{&Error{Code: -32601, Message: "nope"}}},
			want: `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"wrapped: nope"}}`},
		{name: "escapes", msg: &Request{Method: "a\"\\\n\r\t\b\f\x01\x1f<>&\u2028\u2029é\xff"},
			want: `{"jsonrpc":"2.0","method":"a\"\\\n\r\t\b\f\u0001\u001f<>&\u2028\u2029é\ufffd"}`},
		{name: "invalid params", msg: &Request{Method: "m", Params: json.RawMessage(`{`)}, err: true},
		{name: "invalid result", msg: &Response{ID: mustID(t, float64(1)), Result: json.RawMessage(`x`)}, err: true},
		{name: "invalid data", msg: &Response{ID: mustID(t, float64(1)), Error: &Error{Data: json.RawMessage(`[`)}}, err: true},
		{name: "nil request", msg: (*Request)(nil), err: true},
		{name: "nil response", msg: (*Response)(nil), err: true},
		{name: "nil message", msg: nil, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("prefix:")
			got, err := AppendEncode(prefix, tt.msg)
			if tt.err {
				if err == nil {
					t.Fatalf("no error, encoded %s", got)
				}
				if string(got) != "prefix:" {
					t.Fatalf("dst changed to %q on an error", got)
				}
				if _, err := Encode(tt.msg); err == nil {
					t.Fatal("Encode: no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix:"+tt.want {
				t.Fatalf("got  %s\nwant prefix:%s", got, tt.want)
			}
			if !json.Valid(got[len("prefix:"):]) {
				t.Fatalf("not JSON: %s", got)
			}
			// The SDK writes the same bytes where it writes a valid message.
			if tt.name != "nil result" && tt.name != "error wins over result" && tt.name != "invalid id is null" && tt.name != "plain error" {
				sdkEnc, err := sdk.EncodeMessage(tt.msg)
				if err != nil {
					t.Fatal(err)
				}
				if string(sdkEnc) != tt.want {
					t.Fatalf("SDK encodes %s, we %s", sdkEnc, tt.want)
				}
			}
		})
	}
}

func TestIDKey(t *testing.T) {
	tests := []struct {
		id   ID
		want string
	}{
		{mustID(t, float64(1)), "n:1"},
		{mustID(t, "1"), "s:1"},
		{mustID(t, float64(-42)), "n:-42"},
		{mustID(t, ""), "s:"},
		{ID{}, ""},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if got := IDKey(tt.id); got != tt.want {
			t.Errorf("IDKey(%#v) = %q, want %q", tt.id.Raw(), got, tt.want)
		}
		if seen[tt.want] {
			t.Errorf("key %q twice", tt.want)
		}
		seen[tt.want] = true
	}
	// Decoded ids key the same as made ones.
	msgs, _, err := Decode([]byte(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":"1","method":"a"}]`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := IDKey(msgs[0].(*Request).ID), IDKey(msgs[1].(*Request).ID); a != "n:1" || b != "s:1" {
		t.Fatalf("decoded keys %q %q", a, b)
	}
}

// TestErrorResponseGolden fixes the wire form of the error responses the
// gateway writes.
func TestErrorResponseGolden(t *testing.T) {
	cases := []struct {
		name string
		id   ID
		code int64
		msg  string
	}{
		{"parse error, null id", ID{}, CodeParseError, "parse error: body is not valid JSON"},
		{"invalid request", ID{}, CodeInvalidRequest, `"jsonrpc" must be "2.0"`},
		{"method not found, number id", mustID(t, float64(7)), CodeMethodNotFound, "Method not found: tools/unknown"},
		{"unknown tool, string id", mustID(t, "req-1"), CodeInvalidParams, "Unknown tool: github_delete_repo"},
		{"internal error, negative id", mustID(t, float64(-1)), CodeInternalError, "target a: connection refused"},
		{"message needing escapes", mustID(t, "\"quoted\"\n"), CodeInternalError, "line1\nline2\t\"q\" \\ <html> & é \u2028 \x00"},
		{"server defined code", mustID(t, float64(9007199254740992)), -32001, "session not found"},
	}
	var out bytes.Buffer
	for _, c := range cases {
		enc, err := Encode(ErrorResponse(c.id, c.code, c.msg))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "# %s\n%s\n", c.name, enc)
		if !json.Valid(enc) {
			t.Fatalf("not JSON: %s", enc)
		}
		if c.id.IsValid() { // Decode refuses a response with a null id
			roundTrip(t, ErrorResponse(c.id, c.code, c.msg))
		}
	}
	path := filepath.Join("testdata", "error_responses.golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("error responses differ from %s (run with -update if intended):\n%s", path, out.Bytes())
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"x"}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"é\n"}]}}`,
		`{"jsonrpc":"2.0","id":-3,"error":{"code":-32602,"message":"Unknown tool: x","data":null}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n","params":[1,2.5e3,true,null]}]`,
		`{"\u006asonrpc":"2.0","id":"\ud83d\ude00","method":"a\/b"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"a"}`,
		`[]`, `{`, `1`, `{"jsonrpc":"2.0","id":1,"result":{},"error":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, batch, err := Decode(body, 1<<16)
		if err != nil {
			de, ok := err.(*DecodeError)
			if !ok || de.Code != CodeParseError && de.Code != CodeInvalidRequest || de.Msg == "" {
				t.Fatalf("error %#v", err)
			}
			if msgs != nil || batch {
				t.Fatal("messages beside an error")
			}
			// A body encoding/json rejects is never anything but a parse
			// error (and one it accepts never is).
			deep := strings.Contains(de.Msg, "nested deeper") // encoding/json's own bound is 10000
			if !json.Valid(body) != (de.Code == CodeParseError) && len(body) <= 1<<16 && utf8.Valid(body) && !deep {
				t.Fatalf("code %d for a body json.Valid says is %v: %q", de.Code, json.Valid(body), body)
			}
			return
		}
		if len(msgs) == 0 {
			t.Fatal("no messages and no error")
		}
		if !json.Valid(body) {
			t.Fatalf("decoded a body that is not JSON: %q", body)
		}
		if !batch && len(msgs) != 1 {
			t.Fatalf("%d messages outside a batch", len(msgs))
		}
		for _, m := range msgs {
			roundTrip(t, m)
		}
	})
}

func BenchmarkDecodeToolsCall(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"github_search_issues","arguments":{"query":"is:open label:bug","repo":"relaygate/gateway","limit":20},"_meta":{"progressToken":"p-42"}}}`)
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			msgs, _, err := Decode(body, 0)
			if err != nil || len(msgs) != 1 {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := sdk.DecodeMessage(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncodeResponse(b *testing.B) {
	msg := &Response{ID: mustID(b, float64(42)), Result: json.RawMessage(`{"content":[{"type":"text","text":"hello from the target"}],"isError":false}`)}
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			var err error
			if buf, err = AppendEncode(buf[:0], msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sdk.EncodeMessage(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
