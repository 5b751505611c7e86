package convert

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/relaygate/gateway/codec/llm"
)

// AppendError appends an error body in format f's shape: the gateway's own
// errors (a request that cannot be translated, a provider that cannot be
// reached) reach clients as their SDKs expect.
func AppendError(dst []byte, f Format, status int, message string) []byte {
	return appendError(dst, f, status, statusErrorType(status, f), bytesOf(message))
}

// AppendProviderError appends a provider's error (a StreamFailure) as an
// error body in format f's shape: its type where f knows it, else the
// status's.
func AppendProviderError(dst []byte, f Format, status int, typ string, message []byte) []byte {
	if typ == "" || !knownType(typ, f) {
		typ = statusErrorType(status, f)
	}
	if len(message) == 0 {
		message = []byte("provider error")
	}
	return appendError(dst, f, status, typ, message)
}

// AppendRateLimitError appends the error body of a request the gateway's
// rate limit refused (a 429), as f's API answers one: Anthropic's
// rate_limit_error; OpenAI's type, the unit the limit counts ("tokens" or
// "requests"), with code "rate_limit_exceeded", which its SDKs read as a
// rate limit.
func AppendRateLimitError(dst []byte, f Format, unit, message string) []byte {
	switch f {
	case Chat, Responses:
		return appendErrorCode(dst, f, 429, unit, "rate_limit_exceeded", bytesOf(message))
	}
	return appendError(dst, f, 429, statusErrorType(429, f), bytesOf(message))
}

// appendError writes f's error body; typ is a type name, message plain text.
func appendError(dst []byte, f Format, status int, typ string, message []byte) []byte {
	return appendErrorCode(dst, f, status, typ, "", message)
}

// appendErrorCode is appendError with an error code for the OpenAI formats
// ("": null), which only they have.
func appendErrorCode(dst []byte, f Format, status int, typ, code string, message []byte) []byte {
	switch f {
	case Messages:
		dst = append(dst, `{"type":"error","error":{"type":`...)
		dst = llm.AppendString(dst, typ)
		dst = append(dst, `,"message":`...)
		dst = llm.AppendString(dst, message)
		return append(dst, `}}`...)
	case Gemini:
		dst = append(dst, `{"error":{"code":`...)
		dst = appendInt(dst, int64(status))
		dst = append(dst, `,"message":`...)
		dst = llm.AppendString(dst, message)
		dst = append(dst, `,"status":"`...)
		dst = append(dst, googleStatus(status)...)
		return append(dst, `"}}`...)
	case Bedrock:
		dst = append(dst, `{"message":`...)
		dst = llm.AppendString(dst, message)
		return append(dst, '}')
	}
	dst = append(dst, `{"error":{"message":`...)
	dst = llm.AppendString(dst, message)
	dst = append(dst, `,"type":`...)
	dst = llm.AppendString(dst, typ)
	if code == "" {
		return append(dst, `,"param":null,"code":null}}`...)
	}
	dst = append(dst, `,"param":null,"code":`...)
	dst = llm.AppendString(dst, code)
	return append(dst, `}}`...)
}

func googleStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

// googleErrorType is the error type of a Google status.
func googleErrorType(status string, httpStatus int, f Format) string {
	switch status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return "invalid_request_error"
	case "NOT_FOUND":
		return "not_found_error"
	case "UNAUTHENTICATED":
		return "authentication_error"
	case "PERMISSION_DENIED":
		return "permission_error"
	case "RESOURCE_EXHAUSTED":
		return "rate_limit_error"
	}
	return statusErrorType(httpStatus, f)
}

// maxErrorText bounds the provider text quoted in an error made from an
// unreadable error body.
const maxErrorText = 1024

// ProviderError translates a provider's error response (status and body)
// into the client's error shape, appended to dst, with the status to send.
// The provider's status is kept: 4xx stay the client's problem, 429 stays
// retryable, 5xx stay the provider's. Same formats copy the body when it is
// in the client's shape; one that is not (a platform in front of the model
// answering in its own, as Vertex AI does before Claude, or a proxy's page)
// is translated like any other.
func ProviderError(dst []byte, info RequestInfo, status int, body []byte) ([]byte, int) {
	if info.Client == info.Provider && inErrorShape(body, info.Client) {
		return append(dst, body...), status
	}
	typ, msg := "", []byte(nil)
	var dec llm.Decoder
	switch info.Provider {
	case Chat, Responses:
		var e llm.ErrorBody
		if dec.Decode(body, &e) == nil && e.Error.Message != "" {
			typ, msg = e.Error.Type, bytesOf(e.Error.Message)
		}
	case Messages:
		var e llm.AnthropicErrorBody
		if dec.Decode(body, &e) == nil && e.Error.Message != "" {
			typ, msg = e.Error.Type, bytesOf(e.Error.Message)
		}
	case Gemini:
		var e llm.GeminiErrorBody
		err := dec.Decode(body, &e)
		if err != nil {
			var arr [1]llm.GeminiErrorBody // Vertex's OpenAI shim wraps it
			var s []llm.GeminiErrorBody = arr[:0]
			if dec.Decode(body, &s) == nil && len(s) > 0 {
				e, err = s[0], nil
			}
		}
		if err == nil && e.Error.Message != "" {
			typ, msg = googleErrorType(e.Error.Status, status, info.Client), bytesOf(e.Error.Message)
		}
	case Bedrock:
		var e llm.BedrockErrorBody
		if dec.Decode(body, &e) == nil && e.Text() != "" {
			msg = bytesOf(e.Text())
		}
	}
	if msg == nil {
		msg = errorText(body)
	}
	if typ == "" || !knownType(typ, info.Client) {
		typ = statusErrorType(status, info.Client)
	}
	return appendError(dst, info.Client, status, typ, msg), status
}

// inErrorShape reports an error body in f's own shape, with a message (and
// for Messages the type its SDK reads).
func inErrorShape(body []byte, f Format) bool {
	var dec llm.Decoder
	switch f {
	case Messages:
		var e llm.AnthropicErrorBody
		return dec.Decode(body, &e) == nil && e.Type == "error" && e.Error.Type != "" && e.Error.Message != ""
	case Chat, Responses:
		var e llm.ErrorBody
		return dec.Decode(body, &e) == nil && e.Error.Message != ""
	}
	return true
}

// knownType reports error types that mean the same in f's vocabulary.
func knownType(typ string, f Format) bool {
	switch typ {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "rate_limit_error":
		return true
	case "api_error", "overloaded_error", "request_too_large":
		return f == Messages
	case "server_error", "insufficient_quota":
		return f != Messages
	}
	return false
}

// errorText is an unreadable error body as text: valid UTF-8, bounded.
func errorText(body []byte) []byte {
	if len(body) > maxErrorText {
		body = body[:maxErrorText]
		// Cut before a rune the bound split (AppendString would mark it).
		for i := 0; i < utf8.UTFMax && len(body) > 0 && !utf8.FullRune(body[len(body)-1-i:]); i++ {
			if utf8.RuneStart(body[len(body)-1-i]) {
				body = body[:len(body)-1-i]
				break
			}
		}
	}
	if len(body) == 0 {
		return []byte("provider error")
	}
	return body
}

// bedrockExceptionStatus is the HTTP status of a Bedrock exception type.
func bedrockExceptionStatus(typ string) int {
	switch typ {
	case "validationException":
		return 400
	case "accessDeniedException":
		return 403
	case "resourceNotFoundException":
		return 404
	case "modelTimeoutException":
		return 408
	case "throttlingException", "serviceQuotaExceededException", "modelNotReadyException":
		return 429
	case "modelStreamErrorException", "modelErrorException":
		return 424
	case "serviceUnavailableException":
		return 503
	}
	return 500
}

// AnswerError is a provider's answer with a success status (2xx) that is
// no answer: an error object in the provider's shape (Anthropic's
// {"type":"error"}, Gemini's {"error":{...}}, Bedrock's {"message":...}),
// or JSON without what an answer must have (null, {}, a chat completion
// without choices). Translated, it would be an empty answer that the
// client takes as a success, and another provider would not be asked: it
// is the provider's error instead, with the status its error names (an
// Anthropic error type's, a Gemini code), else 502. Type is the error's
// type in the provider's vocabulary ("" when it names none); AppendProviderError
// writes it in the client's shape.
type AnswerError struct {
	Status  int
	Type    string
	Message []byte
}

func (e *AnswerError) Error() string {
	return "convert: the provider's answer is an error: " + string(e.Message)
}

// answerError looks at a provider's answer in format f that lacks what
// the caller read of an answer (its choices, content, candidates, output,
// or its usage, for one passed on unread) and returns why it is none, or
// nil when it is an answer after all. One walk over its top-level members:
// only answers that look empty pay for it.
func answerError(body []byte, f Format) *AnswerError {
	var errV, typ, message, object llm.Raw
	var answer bool // a member only answers have, not empty
	var m llm.Members
	m.Reset(body)
	for m.Next() {
		v := m.Value()
		switch {
		case m.NameIs("error"):
			errV = v
		case m.NameIs("type"):
			typ = v
		case m.NameIs("message"), m.NameIs("Message"):
			message = v
		case m.NameIs("object"):
			object = v
		case m.NameIs("choices") && f == Chat,
			m.NameIs("content") && f == Messages,
			m.NameIs("candidates") && f == Gemini,
			m.NameIs("output") && (f == Bedrock || f == Responses):
			answer = answer || len(v) > 2 // a non-empty array or object
		case m.NameIs("promptFeedback") && f == Gemini:
			answer = answer || v.IsObject() // a blocked prompt's answer
		}
	}
	if m.Err() != nil {
		return &AnswerError{Status: 502, Message: []byte("invalid response from provider: " + m.Err().Error())}
	}
	var dec llm.Decoder
	switch f {
	case Messages:
		switch {
		case string(typ) == `"message"` || (typ == nil && answer):
			return nil
		case string(typ) == `"error"`:
			var e llm.AnthropicErrorBody
			if dec.Decode(body, &e) == nil && e.Error.Message != "" {
				return &AnswerError{Status: anthropicErrorStatus(e.Error.Type), Type: e.Error.Type, Message: bytesOf(e.Error.Message)}
			}
		}
		return &AnswerError{Status: 502, Message: []byte("the provider's answer is not a message")}
	case Gemini:
		if answer {
			return nil
		}
		var e llm.GeminiErrorBody
		if errV.IsObject() && dec.Decode(body, &e) == nil && e.Error.Message != "" {
			status := e.Error.Code
			if status < 400 || status > 599 {
				status = 502
			}
			return &AnswerError{Status: status, Type: googleErrorType(e.Error.Status, status, Messages), Message: bytesOf(e.Error.Message)}
		}
		return &AnswerError{Status: 502, Message: []byte("the provider's answer has no candidates")}
	case Bedrock:
		if answer {
			return nil
		}
		if message.IsString() {
			var e llm.BedrockErrorBody
			if dec.Decode(body, &e) == nil && e.Text() != "" {
				return &AnswerError{Status: 502, Message: bytesOf(e.Text())}
			}
		}
		return &AnswerError{Status: 502, Message: []byte("the provider's answer has no output")}
	}
	// Chat, Responses (a Responses answer's "error" is null unless it
	// failed, and then it has its output).
	if answer {
		return nil
	}
	if f == Responses && string(object) == `"response"` {
		// A response object is the answer even without output: a
		// background request's is queued (status "queued", output []),
		// a failed one says why in its own error member.
		return nil
	}
	var e llm.ErrorBody
	if errV.IsObject() && dec.Decode(body, &e) == nil && e.Error.Message != "" {
		return &AnswerError{Status: 502, Type: e.Error.Type, Message: bytesOf(e.Error.Message)}
	}
	if f == Responses {
		return &AnswerError{Status: 502, Message: []byte("the provider's answer has no output")}
	}
	return &AnswerError{Status: 502, Message: []byte("the provider's answer has no choices")}
}

// requestError is a client's body (or a value of it: what names it) that
// the decoder refused, as a 400 whose text never quotes the body, as the
// decoder's does around the error: an empty or invalid body says so; for a
// whole request (top), a head member of the wrong type gets the message a
// same-format route gives (ReadHead's); otherwise the message names the
// value of the wrong type (messages[0].role), found by decoding pieces of v
// again with decode (only on this path: the request is refused anyway).
func requestError(what string, v []byte, err error, top bool, decode func(piece []byte) error) error {
	if errors.Is(err, llm.ErrEmpty) || errors.Is(err, llm.ErrSyntax) {
		return badRequest("invalid " + what + ": " + err.Error())
	}
	if top {
		if _, herr := ReadHead(v); herr != nil {
			return badRequest("invalid " + what + ": " + herr.Error())
		}
	}
	if path := wrongTypePath(nil, nil, v, 0, decode); path != "" {
		return badRequest("invalid " + what + ": " + path + " has the wrong type")
	}
	if r := llm.Raw(v); !r.IsObject() && !r.IsArray() {
		return badRequest("invalid " + what + ": the value has the wrong type")
	}
	return badRequest("invalid " + what + ": a value in it has the wrong type")
}

// wrongTypePath finds the value of v that decode refuses: a member of an
// object, an element of an array, decoded alone in the containers around
// v (prefix and suffix), then within it, down to a few levels. It returns
// its path (name, [index], name.name), or "" when no single piece is
// refused.
func wrongTypePath(prefix, suffix []byte, v llm.Raw, depth int, decode func([]byte) error) string {
	if depth == 4 {
		return ""
	}
	piece := func(open []byte, part llm.Raw, close byte) []byte {
		b := append(append(append([]byte(nil), prefix...), open...), part...)
		return append(append(b, close), suffix...)
	}
	sub := func(here string, open []byte, part llm.Raw, close byte) string {
		inner := wrongTypePath(append(append([]byte(nil), prefix...), open...), append([]byte{close}, suffix...), part, depth+1, decode)
		switch {
		case inner == "":
			return here
		case inner[0] == '[':
			return here + inner
		}
		return here + "." + inner
	}
	switch {
	case v.IsObject():
		var m llm.Members
		m.Reset(v)
		for m.Next() {
			open := append(append([]byte{'{'}, m.Name()...), ':')
			if decode(piece(open, m.Value(), '}')) != nil {
				var buf [64]byte
				name := llm.KeyText(buf[:0], m.Name())
				if len(name) > len(buf) {
					name = append(name[:len(buf)-3:len(buf)-3], "..."...)
				}
				return sub(string(name), open, m.Value(), '}')
			}
		}
	case v.IsArray():
		i := skipSpaceAt(v, 1)
		for n := 0; i < len(v) && v[i] != ']'; n++ {
			end, ok := llm.ValueEnd(v, i, 0)
			if !ok {
				return ""
			}
			if decode(piece([]byte{'['}, v[i:end], ']')) != nil {
				return sub("["+strconv.Itoa(n)+"]", []byte{'['}, v[i:end], ']')
			}
			i = skipSpaceAt(v, end)
			if i < len(v) && v[i] == ',' {
				i = skipSpaceAt(v, i+1)
			}
		}
	}
	return ""
}

func skipSpaceAt(v []byte, i int) int {
	for i < len(v) && isSpace(v[i]) {
		i++
	}
	return i
}
