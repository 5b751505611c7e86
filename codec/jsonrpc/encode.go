package jsonrpc

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// ErrorResponse is the response to id with an error of code and msg. An
// invalid (zero) id is written as null, as JSON-RPC answers a message whose
// id could not be read.
func ErrorResponse(id ID, code int64, msg string) *Response {
	return &Response{ID: id, Error: &Error{Code: code, Message: msg}}
}

// IDKey is a map key for id that tells the number 1 from the string "1":
// "n:1" and "s:1"; it is "" for the invalid (zero) id.
func IDKey(id ID) string {
	switch v := id.Raw().(type) {
	case int64:
		return "n:" + strconv.FormatInt(v, 10)
	case string:
		return "s:" + v
	}
	return ""
}

// Encode returns the wire form of msg; see AppendEncode.
func Encode(msg Message) ([]byte, error) {
	return AppendEncode(make([]byte, 0, 128), msg)
}

// AppendEncode appends the wire form of msg to dst. It writes what the SDK's
// EncodeMessage writes (members in the same order, no HTML escaping), except
// that it always writes a valid JSON-RPC message: a response with an invalid
// id gets "id":null, a response with an error has no "result", one with
// neither has "result":null, and an error that is not a *Error has the code
// of a wrapped *Error or else CodeInternalError. Params, Result and Data must
// be valid JSON; on an error dst is returned as it was.
func AppendEncode(dst []byte, msg Message) ([]byte, error) {
	out, err := appendMessage(dst, msg)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendMessage(dst []byte, msg Message) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	switch m := msg.(type) {
	case *Request:
		if m == nil {
			return dst, errNilMessage
		}
		if m.ID.IsValid() {
			dst = append(dst, `,"id":`...)
			dst = appendID(dst, m.ID)
		}
		dst = append(dst, `,"method":`...)
		dst = appendString(dst, m.Method)
		if m.Params != nil {
			if !json.Valid(m.Params) {
				return dst, errors.New("jsonrpc: params are not valid JSON")
			}
			dst = append(dst, `,"params":`...)
			dst = append(dst, m.Params...)
		}
	case *Response:
		if m == nil {
			return dst, errNilMessage
		}
		dst = append(dst, `,"id":`...)
		dst = appendID(dst, m.ID)
		if m.Error != nil {
			e := wireError(m.Error)
			dst = append(dst, `,"error":{"code":`...)
			dst = strconv.AppendInt(dst, e.Code, 10)
			dst = append(dst, `,"message":`...)
			dst = appendString(dst, e.Message)
			if e.Data != nil {
				if !json.Valid(e.Data) {
					return dst, errors.New("jsonrpc: error data is not valid JSON")
				}
				dst = append(dst, `,"data":`...)
				dst = append(dst, e.Data...)
			}
			dst = append(dst, '}')
		} else {
			dst = append(dst, `,"result":`...)
			if m.Result == nil {
				dst = append(dst, "null"...)
			} else {
				if !json.Valid(m.Result) {
					return dst, errors.New("jsonrpc: result is not valid JSON")
				}
				dst = append(dst, m.Result...)
			}
		}
	default:
		return dst, errNilMessage
	}
	return append(dst, '}'), nil
}

var errNilMessage = errors.New("jsonrpc: not a request or a response")

// wireError is err as an error object.
func wireError(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	e := &Error{Code: CodeInternalError, Message: err.Error()}
	var wrapped *Error
	if errors.As(err, &wrapped) {
		e.Code = wrapped.Code
	}
	return e
}

func appendID(dst []byte, id ID) []byte {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.AppendInt(dst, v, 10)
	case string:
		return appendString(dst, v)
	}
	return append(dst, "null"...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping what JSON requires (and
// U+2028, U+2029, as encoding/json does); invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
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
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
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
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
