package llmtest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

// Anthropic emulates the Anthropic API: POST /v1/messages (plain, and
// streamed as message_start ... message_stop events) and
// /v1/messages/count_tokens. Requests need "x-api-key: <APIKey>" (or
// "Authorization: Bearer <OAuthToken>" when OAuthToken is set) and an
// anthropic-version header.
type Anthropic struct {
	*Server
	APIKey string
	// OAuthToken, when set, is an accepted OAuth access token.
	OAuthToken string
}

// NewAnthropic starts an Anthropic emulator that the test's Cleanup stops.
func NewAnthropic(tb testing.TB) *Anthropic {
	tb.Helper()
	a := &Anthropic{APIKey: "sk-ant-emulated-key"}
	f := anthropicFlavor{errors: anthropicError}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		x := a.begin(w, r, "messages")
		x.rec.Model, x.rec.Stream = x.str("model"), x.flag("stream")
		if a.authorize(x) {
			f.messages(x)
		}
	})
	mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) {
		x := a.begin(w, r, "count_tokens")
		x.rec.Model = x.str("model")
		if a.authorize(x) {
			f.countTokens(x)
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		x := a.begin(w, r, "unknown")
		x.admit()
		x.writeError(anthropicError, Failure{Status: http.StatusNotFound, Message: "Not Found"})
	})
	a.Server = newServer(tb)
	a.start(mux)
	return a
}

// BaseURL is the base clients are given (the origin; paths start with /v1).
func (a *Anthropic) BaseURL() string { return a.URL }

func (a *Anthropic) authorize(x *exchange) bool {
	key := x.r.Header.Get("x-api-key")
	bearer, hasBearer := strings.CutPrefix(x.r.Header.Get("Authorization"), "Bearer ")
	switch {
	case key != "":
		if key != a.APIKey {
			x.refuse("wrong x-api-key", anthropicError, Failure{Status: http.StatusUnauthorized, Message: "invalid x-api-key"})
			return false
		}
	case hasBearer && a.OAuthToken != "":
		if bearer != a.OAuthToken {
			x.refuse("wrong OAuth token", anthropicError, Failure{Status: http.StatusUnauthorized, Message: "Invalid bearer token"})
			return false
		}
	default:
		x.refuse("no x-api-key", anthropicError, Failure{Status: http.StatusUnauthorized, Message: "x-api-key header is required"})
		return false
	}
	x.admit()
	if x.r.Header.Get("anthropic-version") == "" {
		x.writeError(anthropicError, Failure{Status: http.StatusBadRequest, Message: "anthropic-version: header is required"})
		return false
	}
	return true
}

func requestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "req_emu" + hex.EncodeToString(b)
}

// anthropicErrorType is the error type Anthropic gives a status.
func anthropicErrorType(status int) (typ, msg string) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", "Invalid request"
	case http.StatusUnauthorized:
		return "authentication_error", "invalid x-api-key"
	case http.StatusForbidden:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		return "not_found_error", "Not found"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case http.StatusTooManyRequests:
		return "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
	case http.StatusGatewayTimeout:
		return "timeout_error", "Request timed out"
	case 529:
		return "overloaded_error", "Overloaded"
	}
	if status >= 500 {
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", http.StatusText(status)
}

// anthropicErrorBody is {"type":"error","error":{"type","message"}} (with
// the request id when it is not in-band).
func anthropicErrorBody(f Failure, id string) obj {
	typ, msg := anthropicErrorType(f.status())
	if f.Type != "" {
		typ = f.Type
	}
	if f.Message != "" {
		msg = f.Message
	}
	o := obj{{"type", "error"}, {"error", obj{{"type", typ}, {"message", msg}}}}
	if id != "" {
		o = append(o, kv{"request_id", id})
	}
	return o
}

func anthropicError(h http.Header, f Failure) []byte {
	id := requestID()
	h.Set("request-id", id)
	if f.Status == 529 || f.Status == http.StatusTooManyRequests {
		h.Set("x-should-retry", "true")
	}
	return mustJSON(anthropicErrorBody(f, id))
}

// anthropicFlavor renders the Messages API, as Anthropic serves it or as
// Vertex AI does (model in the path, anthropic_version in the body).
type anthropicFlavor struct {
	vertex bool
	errors errorFormat
}

func (f anthropicFlavor) require(x *exchange, names ...string) bool {
	if x.body == nil {
		x.writeError(f.errors, Failure{Status: http.StatusBadRequest, Message: "There was an issue with your request body: it is not a JSON object"})
		return false
	}
	if f.vertex {
		if x.has("model") && x.rec.Op != "count_tokens" {
			x.writeError(f.errors, Failure{Status: http.StatusBadRequest, Message: "model: Extra inputs are not permitted"})
			return false
		}
		names = append(names, "anthropic_version")
	}
	for _, n := range names {
		if !x.has(n) {
			x.writeError(f.errors, Failure{Status: http.StatusBadRequest, Message: n + ": Field required"})
			return false
		}
	}
	return true
}

func anthropicUsage(u Usage, outputTokens int) obj {
	return obj{
		{"input_tokens", u.InputTokens},
		{"cache_creation_input_tokens", 0},
		{"cache_read_input_tokens", u.CachedInputTokens},
		{"cache_creation", obj{{"ephemeral_5m_input_tokens", 0}, {"ephemeral_1h_input_tokens", 0}}},
		{"output_tokens", outputTokens},
		{"service_tier", "standard"},
	}
}

func (f anthropicFlavor) messages(x *exchange) {
	required := []string{"model", "max_tokens", "messages"}
	if f.vertex {
		required = required[1:]
	}
	if !f.require(x, required...) {
		return
	}
	rep, ok := x.answer(f.errors)
	if !ok {
		return
	}
	model := rep.Model
	if model == "" {
		model = x.rec.Model
	}
	id := x.s.id("msg_")
	x.w.Header().Set("request-id", requestID())
	stop := rep.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(rep.ToolCalls) > 0 {
			stop = "tool_use"
		}
	}
	calls := make([]ToolCall, len(rep.ToolCalls))
	for i, c := range rep.ToolCalls {
		if c.ID == "" {
			c.ID = x.s.id("toolu_")
		}
		calls[i] = c
	}
	text := rep.text()
	withText := text != "" || len(calls) == 0
	u := rep.usage()
	if !x.rec.Stream {
		var content []obj
		if withText {
			content = append(content, obj{{"type", "text"}, {"text", text}})
		}
		for _, c := range calls {
			content = append(content, obj{{"type", "tool_use"}, {"id", c.ID}, {"name", c.Name}, {"input", rawJSON(c.Arguments)}})
		}
		x.writeJSON(obj{
			{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
			{"content", content}, {"stop_reason", stop}, {"stop_sequence", nil},
			{"usage", anthropicUsage(u, u.OutputTokens)},
		}, rep.DropAfter)
		return
	}

	st := x.startStream("text/event-stream; charset=utf-8", rep.DropAfter)
	event := func(typ string, members ...kv) {
		st.sse(typ, append(obj{{"type", typ}}, members...), "\n\n")
	}
	event("message_start", kv{"message", obj{
		{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
		{"content", []any{}}, {"stop_reason", nil}, {"stop_sequence", nil},
		{"usage", anthropicUsage(u, 1)},
	}})
	index := 0
	if withText {
		event("content_block_start", kv{"index", index}, kv{"content_block", obj{{"type", "text"}, {"text", ""}}})
		event("ping")
		for _, d := range rep.deltas() {
			event("content_block_delta", kv{"index", index}, kv{"delta", obj{{"type", "text_delta"}, {"text", d}}})
		}
		event("content_block_stop", kv{"index", index})
		index++
	}
	for _, c := range calls {
		event("content_block_start", kv{"index", index}, kv{"content_block", obj{
			{"type", "tool_use"}, {"id", c.ID}, {"name", c.Name}, {"input", obj{}}}})
		if !withText && index == 0 {
			event("ping")
		}
		event("content_block_delta", kv{"index", index}, kv{"delta", obj{{"type", "input_json_delta"}, {"partial_json", ""}}})
		for _, piece := range splitN(c.args(), 3) {
			event("content_block_delta", kv{"index", index}, kv{"delta", obj{{"type", "input_json_delta"}, {"partial_json", piece}}})
		}
		event("content_block_stop", kv{"index", index})
		index++
	}
	if rep.StreamError != nil {
		st.sse("error", anthropicErrorBody(*rep.StreamError, ""), "\n\n")
		return
	}
	event("message_delta", kv{"delta", obj{{"stop_reason", stop}, {"stop_sequence", nil}}}, kv{"usage", obj{
		{"input_tokens", u.InputTokens}, {"cache_creation_input_tokens", 0},
		{"cache_read_input_tokens", u.CachedInputTokens}, {"output_tokens", u.OutputTokens},
	}})
	st.last, st.unterminated = true, rep.NoLastBlankLine
	event("message_stop")
}

func (f anthropicFlavor) countTokens(x *exchange) {
	if !f.require(x, "model", "messages") {
		return
	}
	rep, ok := x.answer(f.errors)
	if !ok {
		return
	}
	x.w.Header().Set("request-id", requestID())
	x.writeJSON(obj{{"input_tokens", rep.usage().InputTokens}}, rep.DropAfter)
}
