// Package jsonrpc owns the JSON-RPC 2.0 wire format as the gateway reads it
// from clients and writes it back: a bounded, strict decoder of single
// messages and batches that classifies failures into the protocol's error
// codes (-32700 parse error, -32600 invalid request), an encoder, error
// responses and id map keys. Messages are the official MCP SDK's types
// (github.com/modelcontextprotocol/go-sdk/jsonrpc), so decoded messages go
// straight to the SDK's connections and back.
//
// The decoder is stricter than the SDK's DecodeMessage where the SDK is
// lossy or ambiguous: ids are strings or integers of at most 2^53 in
// magnitude (never null, never fractional), a message is either a request or
// a response (never both), member names are matched case-sensitively and at
// most once, and the body must be UTF-8.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/relaygate/gateway/codec/hexdigit"
)

// The SDK's message types, so that callers need only this package.
type (
	ID       = sdk.ID
	Message  = sdk.Message
	Request  = sdk.Request
	Response = sdk.Response
	Error    = sdk.Error
)

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     int64 = sdk.CodeParseError
	CodeInvalidRequest int64 = sdk.CodeInvalidRequest
	CodeMethodNotFound int64 = sdk.CodeMethodNotFound
	CodeInvalidParams  int64 = sdk.CodeInvalidParams
	CodeInternalError  int64 = sdk.CodeInternalError
)

// Bounds of Decode.
const (
	// DefaultMaxBytes bounds a body when Decode is given no bound.
	DefaultMaxBytes = 4 << 20
	// MaxBatch is the largest batch Decode accepts.
	MaxBatch = 1000
	// MaxDepth bounds the nesting of arrays and objects in a message (the
	// SDK's own decoder refuses more than 1000 levels).
	MaxDepth = 1000
)

// DecodeError is why Decode refused a body. Code is CodeParseError when the
// body is not JSON and CodeInvalidRequest when it is JSON but not a JSON-RPC
// message (or batch of them); Msg is safe to send to the client. The answer
// to either is ErrorResponse(ID{}, e.Code, e.Msg): JSON-RPC answers a message
// whose id could not be read with a null id.
type DecodeError struct {
	Code int64
	Msg  string
}

func (e *DecodeError) Error() string {
	return "jsonrpc: " + e.Msg + " (" + strconv.FormatInt(e.Code, 10) + ")"
}

// ErrTooLarge is the error Decode returns for a body longer than its bound
// (compare with ==; an HTTP caller answers 413).
var ErrTooLarge = &DecodeError{Code: CodeInvalidRequest, Msg: "message too large"}

var errTooDeep = invalid("message nested deeper than " + strconv.Itoa(MaxDepth) + " levels")

var errParse = &DecodeError{Code: CodeParseError, Msg: "parse error: body is not valid JSON"}

func invalid(msg string) *DecodeError { return &DecodeError{Code: CodeInvalidRequest, Msg: msg} }

// Decode reads body as one JSON-RPC message or a batch (a JSON array of
// messages; batch reports which). Batches were part of MCP 2025-03-26 and
// removed in 2025-06-18: Decode reads them and the caller decides. An error
// is a *DecodeError; a body longer than maxBytes (DefaultMaxBytes when
// maxBytes <= 0) is ErrTooLarge. A batch with one invalid element is refused
// as a whole, the error naming the element.
//
// Whitespace around the message is allowed. A request is a call when it has
// an id and a notification when it has none; "params", when present and not
// null, must be an object or an array. A response has an id and exactly one
// of "result" and "error" (a null "error" counts as absent, so does a null
// "result" beside an error). Members other than the JSON-RPC ones are
// ignored.
//
// The messages do not alias body: Params, Result and error Data point into
// one copy of it, made only when a message has any of them.
func Decode(body []byte, maxBytes int) (msgs []Message, batch bool, err error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(body) > maxBytes {
		return nil, false, ErrTooLarge
	}
	if !utf8.Valid(body) {
		return nil, false, errParse
	}
	d := decoder{data: body}
	d.ws()
	if d.pos == len(d.data) {
		return nil, false, errParse
	}
	switch d.data[d.pos] {
	case '[':
		batch = true
		msgs = d.batch()
	case '{':
		m := d.message()
		if m != nil {
			msgs = []Message{m}
		}
	default:
		if d.value() {
			d.fail(invalid("not a JSON-RPC message: expected an object"))
		}
	}
	if !d.bad {
		d.ws()
		if d.pos != len(d.data) {
			d.bad = true
		}
	}
	if d.bad {
		return nil, false, errParse
	}
	if d.err != nil {
		return nil, false, d.err
	}
	if d.raw {
		// Give the raw members their own memory, in one copy of the body.
		own := bytes.Clone(body)
		for _, m := range msgs {
			rebase(m, body, own)
		}
	}
	return msgs, batch, nil
}

// rebase points the raw members of m, slices of from, into the same range of
// to.
func rebase(m Message, from, to []byte) {
	move := func(r json.RawMessage) json.RawMessage {
		if r == nil {
			return nil
		}
		off := cap(from) - cap(r) // r is a slice of from up to its end
		return json.RawMessage(to[off : off+len(r) : off+len(r)])
	}
	switch m := m.(type) {
	case *Request:
		m.Params = move(m.Params)
	case *Response:
		m.Result = move(m.Result)
		if e, ok := m.Error.(*Error); ok {
			e.Data = move(e.Data)
		}
	}
}

// decoder is one pass over a body: it checks the JSON syntax of all of it
// and builds the messages, remembering the first semantic problem so that a
// body that is not JSON is always a parse error, whatever else is wrong.
type decoder struct {
	data []byte
	pos  int
	bad  bool         // a syntax error: the body is not JSON
	err  *DecodeError // the first JSON-RPC error
	raw  bool         // a message holds a raw member (slices of data)
	// level is the nesting of the object being read, the message object
	// being level 1.
	level int
}

func (d *decoder) fail(e *DecodeError) {
	if d.err == nil {
		d.err = e
	}
}

func (d *decoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// batch reads an array of messages.
func (d *decoder) batch() []Message {
	if d.enter(']') {
		d.fail(invalid("empty batch"))
		return nil
	}
	var msgs []Message
	for n := 0; ; n++ {
		d.ws()
		if d.pos == len(d.data) {
			d.bad = true
			return nil
		}
		outer := d.err
		if d.data[d.pos] == '{' {
			d.err = nil
			m := d.message()
			if d.err != nil && outer == nil {
				outer = invalid("batch element " + strconv.Itoa(n) + ": " + d.err.Msg)
			}
			d.err = outer
			if m != nil && d.err == nil {
				msgs = append(msgs, m)
			}
		} else {
			if !d.value() {
				return nil
			}
			d.fail(invalid("batch element " + strconv.Itoa(n) + ": not a JSON-RPC message: expected an object"))
		}
		if d.bad {
			return nil
		}
		if n == MaxBatch {
			d.fail(invalid("batch longer than " + strconv.Itoa(MaxBatch) + " messages"))
		}
		if !d.elementFollows(']') {
			if d.bad {
				return nil
			}
			return msgs
		}
	}
}

// member flags of a message object.
const (
	hasVersion = 1 << iota
	hasID
	hasMethod
	hasParams
	hasResult
	hasError
)

// message reads one message object; it returns nil after a syntax error or
// when the object is not a valid message (d.err says why).
func (d *decoder) message() Message {
	var (
		seen         int
		id           ID
		idNull       bool
		method       string
		params       []byte
		result       []byte
		werr         *Error
		errNull      bool
		resultIsNull bool
	)
	ok := d.object(func(key []byte) bool {
		var bit int
		switch string(key) {
		case "jsonrpc":
			bit = hasVersion
		case "id":
			bit = hasID
		case "method":
			bit = hasMethod
		case "params":
			bit = hasParams
		case "result":
			bit = hasResult
		case "error":
			bit = hasError
		default:
			return d.value()
		}
		if seen&bit != 0 {
			d.fail(invalid("duplicate member " + strconv.Quote(string(key))))
		}
		seen |= bit
		switch bit {
		case hasVersion:
			s, isString, ok := d.str()
			if ok && (!isString || s != "2.0") {
				d.fail(invalid(`"jsonrpc" must be "2.0"`))
			}
			return ok
		case hasID:
			var ok bool
			id, idNull, ok = d.id()
			return ok
		case hasMethod:
			s, isString, ok := d.str()
			if ok {
				if !isString {
					d.fail(invalid(`"method" must be a string`))
				} else if s == "" {
					d.fail(invalid(`"method" must not be empty`))
				}
				method = s
			}
			return ok
		case hasParams:
			v, ok := d.rawValue()
			if !ok {
				return false
			}
			switch v[0] {
			case '{', '[':
				params = v
			case 'n':
				seen &^= hasParams // null params: absent
			default:
				d.fail(invalid(`"params" must be an object or an array`))
			}
			return true
		case hasResult:
			v, ok := d.rawValue()
			if !ok {
				return false
			}
			result = v
			resultIsNull = v[0] == 'n'
			return true
		default: // hasError
			var ok bool
			werr, errNull, ok = d.errorObject()
			return ok
		}
	})
	if !ok || d.err != nil {
		return nil
	}
	if seen&hasVersion == 0 {
		d.fail(invalid(`"jsonrpc" must be "2.0"`))
		return nil
	}
	if errNull {
		seen &^= hasError
	}
	if seen&hasID != 0 && idNull {
		d.fail(invalid(`"id" must not be null`))
		return nil
	}
	if seen&hasMethod != 0 {
		if seen&(hasResult|hasError) != 0 {
			d.fail(invalid(`a request must not have "result" or "error"`))
			return nil
		}
		if params != nil {
			d.raw = true
		}
		return &Request{ID: id, Method: method, Params: params}
	}
	if seen&hasID == 0 {
		d.fail(invalid(`a message must have "method" (a request) or "id" (a response)`))
		return nil
	}
	if seen&hasParams != 0 {
		d.fail(invalid(`a response must not have "params"`))
		return nil
	}
	if seen&hasError != 0 && seen&hasResult != 0 && resultIsNull {
		seen &^= hasResult
	}
	switch seen & (hasResult | hasError) {
	case hasResult:
		d.raw = true
		return &Response{ID: id, Result: result}
	case hasError:
		if werr.Data != nil {
			d.raw = true
		}
		return &Response{ID: id, Error: werr}
	case 0:
		d.fail(invalid(`a response must have "result" or "error"`))
	default:
		d.fail(invalid(`a response must not have both "result" and "error"`))
	}
	return nil
}

// errorObject reads the value of "error": null or an error object.
func (d *decoder) errorObject() (e *Error, isNull, ok bool) {
	if d.pos == len(d.data) {
		d.bad = true
		return nil, false, false
	}
	if d.data[d.pos] != '{' {
		isNull = d.data[d.pos] == 'n'
		if !d.value() {
			return nil, false, false
		}
		if !isNull {
			d.fail(invalid(`"error" must be an object`))
		}
		return nil, isNull, true
	}
	e = &Error{}
	var seen int
	const (
		hasCode = 1 << iota
		hasMessage
		hasData
	)
	ok = d.object(func(key []byte) bool {
		var bit int
		switch string(key) {
		case "code":
			bit = hasCode
		case "message":
			bit = hasMessage
		case "data":
			bit = hasData
		default:
			return d.value()
		}
		if seen&bit != 0 {
			d.fail(invalid(`duplicate member "error.` + string(key) + `"`))
		}
		seen |= bit
		switch bit {
		case hasCode:
			v, ok := d.rawValue()
			if !ok {
				return false
			}
			n, isInt := integer(v)
			if !isInt {
				d.fail(invalid(`"error.code" must be an integer`))
			}
			e.Code = n
		case hasMessage:
			s, isString, ok := d.str()
			if !ok {
				return false
			}
			if !isString {
				d.fail(invalid(`"error.message" must be a string`))
			}
			e.Message = s
		default:
			v, ok := d.rawValue()
			if !ok {
				return false
			}
			e.Data = v
		}
		return true
	})
	if ok && seen&(hasCode|hasMessage) != hasCode|hasMessage {
		d.fail(invalid(`"error" must have "code" and "message"`))
	}
	return e, false, ok
}

// id reads the value of "id".
func (d *decoder) id() (id ID, isNull, ok bool) {
	if d.pos == len(d.data) {
		d.bad = true
		return ID{}, false, false
	}
	switch c := d.data[d.pos]; {
	case c == '"':
		s, _, ok := d.str()
		id, _ := sdk.MakeID(s)
		return id, false, ok
	case c == 'n':
		return ID{}, true, d.value()
	case c == '-' || c >= '0' && c <= '9':
		v, ok := d.rawValue()
		if !ok {
			return ID{}, false, false
		}
		n, isInt := integer(v)
		if !isInt || n > maxSafeInt || n < -maxSafeInt {
			d.fail(invalid(`"id" must be a string or an integer of at most 2^53`))
			return ID{}, false, true
		}
		// The SDK makes integer ids only from float64, exact up to 2^53.
		id, _ := sdk.MakeID(float64(n))
		return id, false, true
	default:
		if d.value() {
			d.fail(invalid(`"id" must be a string or an integer`))
			return ID{}, false, true
		}
		return ID{}, false, false
	}
}

// integer parses a JSON number that is an integer literal within int64.
func integer(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	// Accumulate the negative value, whose range includes math.MinInt64.
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		dig := int64(c - '0')
		if n < (minInt64+dig)/10 { // n*10-dig < minInt64 (division rounds up here)
			return 0, false
		}
		n = n*10 - dig
	}
	if !neg {
		if n == minInt64 {
			return 0, false
		}
		n = -n
	}
	return n, true
}

const (
	minInt64   = -1 << 63
	maxSafeInt = 1 << 53 // the integers a float64 (and JavaScript) holds exactly
)

// object reads an object, calling member with each key and the position at
// its value, which member must consume (returning false on a syntax error).
func (d *decoder) object(member func(key []byte) bool) bool {
	d.level++
	defer func() { d.level-- }()
	if d.level > MaxDepth {
		d.fail(errTooDeep)
	}
	if d.enter('}') {
		return true
	}
	for {
		d.ws()
		key, ok := d.key()
		if !ok || !d.colon() {
			return false
		}
		d.ws()
		if !member(key) {
			d.bad = true
			return false
		}
		if !d.elementFollows('}') {
			return !d.bad
		}
	}
}

// elementFollows reads what ends an element of an array or object: a comma,
// then true (another element follows), or closer, then false. Anything else
// marks the input bad and returns false.
func (d *decoder) elementFollows(closer byte) bool {
	d.ws()
	if d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ',':
			d.pos++
			return true
		case closer:
			d.pos++
			return false
		}
	}
	d.bad = true
	return false
}

// enter moves past the '[' or '{' at d.pos and the whitespace after it. It
// reports whether the container is empty, moving past closer too: batch,
// object and value all open containers through it, so that they agree on
// what an empty one is.
func (d *decoder) enter(closer byte) (empty bool) {
	d.pos++
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == closer {
		d.pos++
		return true
	}
	return false
}

// colon reads the ':' that separates an object member's name from its value
// and the whitespace before it; anything else marks the input bad and
// returns false. object and value share it, so that message members and
// the members of other objects are split the same way.
func (d *decoder) colon() bool {
	d.ws()
	if d.pos >= len(d.data) || d.data[d.pos] != ':' {
		d.bad = true
		return false
	}
	d.pos++
	return true
}

// key reads an object key, unescaped.
func (d *decoder) key() ([]byte, bool) {
	start := d.pos
	end, escaped, ok := d.scanString()
	if !ok {
		return nil, false
	}
	if !escaped {
		return d.data[start+1 : end-1], true
	}
	s, ok := d.unescape(d.data[start:end])
	if !ok {
		return nil, false
	}
	return []byte(s), true
}

// str reads a value that should be a string: isString is false (and the
// value skipped) when it is another JSON value.
func (d *decoder) str() (s string, isString, ok bool) {
	if d.pos == len(d.data) {
		d.bad = true
		return "", false, false
	}
	if d.data[d.pos] != '"' {
		return "", false, d.value()
	}
	start := d.pos
	end, escaped, ok := d.scanString()
	if !ok {
		return "", false, false
	}
	if !escaped {
		return intern(d.data[start+1 : end-1]), true, true
	}
	u, ok := d.unescape(d.data[start:end])
	if !ok {
		return "", false, false
	}
	return u, true, true
}

// unescape decodes quoted, a whole string that scanString found to hold
// escapes: the rare path of key and str, written once for both. It is kept
// out of line because key and str read every member name and string value
// of a message, and the json.Unmarshal call would otherwise make both of
// them larger for a path that escapes-free input never takes.
//
//go:noinline
func (d *decoder) unescape(quoted []byte) (string, bool) {
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		d.bad = true
		return "", false
	}
	return s, true
}

// intern returns the common MCP methods and the JSON-RPC version without
// allocating.
func intern(b []byte) string {
	switch string(b) {
	case "2.0":
		return "2.0"
	case "initialize":
		return "initialize"
	case "notifications/initialized":
		return "notifications/initialized"
	case "ping":
		return "ping"
	case "tools/list":
		return "tools/list"
	case "tools/call":
		return "tools/call"
	case "prompts/list":
		return "prompts/list"
	case "prompts/get":
		return "prompts/get"
	case "resources/list":
		return "resources/list"
	case "resources/read":
		return "resources/read"
	case "resources/templates/list":
		return "resources/templates/list"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/progress":
		return "notifications/progress"
	}
	return string(b)
}

// scanString checks the string at d.pos and returns the position after it
// and whether it holds escapes.
func (d *decoder) scanString() (end int, escaped, ok bool) {
	data := d.data
	i := d.pos
	if i >= len(data) || data[i] != '"' {
		d.bad = true
		return 0, false, false
	}
	i++
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				d.bad = true
				return 0, false, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					d.bad = true
					return 0, false, false
				}
				for _, h := range data[i+2 : i+6] {
					if !hexdigit.Is(h) {
						d.bad = true
						return 0, false, false
					}
				}
				i += 6
			default:
				d.bad = true
				return 0, false, false
			}
		case c < 0x20:
			d.bad = true
			return 0, false, false
		default:
			i++
		}
	}
	d.bad = true
	return 0, false, false
}

// value checks the JSON value at d.pos and moves past it; it returns false
// (and sets d.bad) on a syntax error. It nests without recursion; a value
// nested deeper than MaxDepth (counting the message object as level 1) is a
// JSON-RPC error, not a syntax error.
func (d *decoder) value() bool {
	// stack holds one bit per open container: 1 for an object.
	var stack []uint64
	var small [4]uint64
	stack = small[:0]
	depth := 0
	push := func(obj bool) {
		if depth%64 == 0 {
			stack = append(stack, 0)
		}
		if obj {
			stack[depth/64] |= 1 << (depth % 64)
		} else {
			stack[depth/64] &^= 1 << (depth % 64)
		}
		depth++
	}
	// open counts a container (even an empty one) against MaxDepth.
	open := func() {
		if d.level+depth+1 > MaxDepth {
			d.fail(errTooDeep)
		}
	}
	inObject := func() bool {
		return stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
	}
	fail := func() bool {
		d.bad = true
		return false
	}
	data := d.data
	for {
		// A value starts here.
		d.ws()
		if d.pos >= len(data) {
			return fail()
		}
		switch c := data[d.pos]; {
		case c == '{':
			open()
			if d.enter('}') {
				break
			}
			push(true)
			if _, _, ok := d.scanString(); !ok || !d.colon() {
				return false
			}
			continue
		case c == '[':
			open()
			if d.enter(']') {
				break
			}
			push(false)
			continue
		case c == '"':
			if _, _, ok := d.scanString(); !ok {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if !d.number() {
				return fail()
			}
		case c == 't':
			if !d.literal("true") {
				return fail()
			}
		case c == 'f':
			if !d.literal("false") {
				return fail()
			}
		case c == 'n':
			if !d.literal("null") {
				return fail()
			}
		default:
			return fail()
		}
		// A value ended: close containers or go to the next element.
		for {
			if depth == 0 {
				return true
			}
			d.ws()
			if d.pos >= len(data) {
				return fail()
			}
			c := data[d.pos]
			if c == ',' {
				d.pos++
				if inObject() {
					d.ws()
					if _, _, ok := d.scanString(); !ok || !d.colon() {
						return false
					}
				}
				break
			}
			if inObject() && c == '}' || !inObject() && c == ']' {
				d.pos++
				depth--
				continue
			}
			return fail()
		}
	}
}

// rawValue checks the JSON value at d.pos, moves past it and returns it as
// written, or false (with d.bad set) on a syntax error. The value is never
// empty, and it is a slice of d.data that runs to the end of d.data's
// capacity, as rebase needs. The members kept raw (params, result, error
// data) and the numbers read as integers all go through it.
func (d *decoder) rawValue() ([]byte, bool) {
	start := d.pos
	if !d.value() {
		return nil, false
	}
	return d.data[start:d.pos], true
}

func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return false
	}
	d.pos += len(lit)
	return true
}

// number checks a JSON number at d.pos and moves past it.
func (d *decoder) number() bool {
	data, i := d.data, d.pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return false
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return false
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	d.pos = i
	return true
}
