package convert

import (
	"strconv"
	"unsafe"

	"github.com/relaygate/gateway/codec/llm"
)

// Helpers of the hand-written JSON writers.

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// appendArgsObject writes a tool use's input as an object: input as it is,
// or args (OpenAI's string of JSON) decoded. Arguments that are empty or not
// a JSON object become {} (Anthropic, Bedrock and Gemini require an object;
// a model's malformed call in the history must not fail the request).
func appendArgsObject(dst []byte, b *block) []byte {
	if b.input.Present() {
		return append(dst, b.input...)
	}
	start := len(dst)
	if b.args.IsString() {
		var err error
		dst, err = llm.AppendUnquoted(dst, b.args)
		if err == nil && llm.ValidObject(dst[start:]) {
			return dst
		}
	}
	return append(dst[:start], "{}"...)
}

// appendArgsString writes a tool use's input as OpenAI's arguments: a string
// token whose text is the input's JSON.
func appendArgsString(dst []byte, b *block) []byte {
	if b.args.IsString() && len(b.args) > 2 {
		return append(dst, b.args...)
	}
	if !b.input.Present() {
		return append(dst, `"{}"`...)
	}
	return llm.AppendQuoted(dst, b.input)
}

// appendStringArray writes a string token or an array as an array.
func appendStringArray(dst []byte, v llm.Raw) []byte {
	if v.IsString() {
		dst = append(dst, '[')
		dst = append(dst, v...)
		return append(dst, ']')
	}
	return append(dst, v...)
}

// appendConcat writes text tokens as one string token.
func appendConcat(dst []byte, blocks []block, k kind) []byte {
	dst = append(dst, '"')
	for i := range blocks {
		if blocks[i].kind == k {
			dst = append(dst, blocks[i].text.Inner()...)
		}
	}
	return append(dst, '"')
}

func countKind(blocks []block, k kind) int {
	n := 0
	for i := range blocks {
		if blocks[i].kind == k {
			n++
		}
	}
	return n
}

// appendDataURL writes an image as a data URL string token (or its URL).
func appendDataURL(dst []byte, b *block) []byte {
	if b.url != nil {
		return append(dst, b.url...)
	}
	dst = append(dst, `"data:`...)
	dst = appendEscapedText(dst, b.media)
	dst = append(dst, ";base64,"...)
	dst = appendEscapedText(dst, b.data)
	return append(dst, '"')
}

// appendEscapedText writes text escaped, without quotes.
func appendEscapedText(dst, text []byte) []byte {
	s := llm.AppendString(dst, text)
	// AppendString quoted it: drop the quotes around what it appended.
	n := len(dst)
	copy(s[n:], s[n+1:len(s)-1])
	return s[:len(s)-2]
}

// statusErrorType is the error type of an HTTP status in the vocabulary both
// Anthropic and OpenAI clients know. A 404 is Anthropic's not_found_error;
// OpenAI has no such type and answers an unknown path or model with
// invalid_request_error.
func statusErrorType(status int, f Format) string {
	switch status {
	case 400, 422:
		return "invalid_request_error"
	case 404:
		if f == Messages {
			return "not_found_error"
		}
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 413:
		if f == Messages {
			return "request_too_large"
		}
		return "invalid_request_error"
	case 429:
		return "rate_limit_error"
	case 529:
		if f == Messages {
			return "overloaded_error"
		}
	}
	if f == Messages {
		return "api_error"
	}
	return "server_error"
}

// comma writes the separator before the n-th item of a list.
func comma(dst []byte, n *int) []byte {
	if *n > 0 {
		dst = append(dst, ',')
	}
	*n++
	return dst
}

// bytesOf views s as bytes, for reading only.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf is b as a string without a copy: b must not change while the
// string is in use.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
