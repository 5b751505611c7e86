package llmtest

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Gemini emulates the Gemini API (generativelanguage): POST
// /v1beta/models/{model}:generateContent, :streamGenerateContent (SSE with
// alt=sse, else a JSON array) and :countTokens (also under /v1). Requests
// need "x-goog-api-key: <APIKey>" (or ?key=).
type Gemini struct {
	*Server
	APIKey string

	sigs thoughtSignatures
}

// NewGemini starts a Gemini API emulator that the test's Cleanup stops.
func NewGemini(tb testing.TB) *Gemini {
	tb.Helper()
	g := &Gemini{APIKey: "AIzaEmulatedGeminiKey"}
	f := geminiFlavor{errors: googleError, sigs: &g.sigs}
	mux := http.NewServeMux()
	for _, version := range []string{"v1beta", "v1"} {
		mux.HandleFunc("POST /"+version+"/models/{call}", func(w http.ResponseWriter, r *http.Request) {
			model, method, _ := cutLast(r.PathValue("call"), ":")
			x := g.begin(w, r, method)
			x.rec.Model, x.rec.Stream = model, method == "streamGenerateContent"
			if !g.authorize(x) {
				return
			}
			f.serve(x, method)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		x := g.begin(w, r, "unknown")
		x.admit()
		x.writeError(googleError, Failure{Status: http.StatusNotFound})
	})
	g.Server = newServer(tb)
	g.start(mux)
	return g
}

// BaseURL is the base clients are given (the origin; paths start with the
// API version).
func (g *Gemini) BaseURL() string { return g.URL }

func (g *Gemini) authorize(x *exchange) bool {
	key := x.r.Header.Get("x-goog-api-key")
	if key == "" {
		key = x.r.URL.Query().Get("key")
	}
	switch {
	case key == "":
		x.refuse("no API key", googleError, Failure{Status: http.StatusForbidden,
			Message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."})
		return false
	case key != g.APIKey:
		invalid := func(h http.Header, f Failure) []byte {
			return mustJSON(googleErrorBody(f, []obj{{
				{"@type", "type.googleapis.com/google.rpc.ErrorInfo"}, {"reason", "API_KEY_INVALID"},
				{"domain", "googleapis.com"}, {"metadata", obj{{"service", "generativelanguage.googleapis.com"}}},
			}}))
		}
		x.refuse("wrong API key", invalid, Failure{Status: http.StatusBadRequest, Message: "API key not valid. Please pass a valid API key."})
		return false
	}
	x.admit()
	return true
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// googleStatus is the google.rpc status name of an HTTP status, and the
// message Google's APIs give it.
func googleStatus(status int) (name, msg string) {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT", "Request contains an invalid argument."
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED", "Request had invalid authentication credentials."
	case http.StatusForbidden:
		return "PERMISSION_DENIED", "The caller does not have permission"
	case http.StatusNotFound:
		return "NOT_FOUND", "Requested entity was not found."
	case http.StatusConflict:
		return "ABORTED", "The operation was aborted."
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
	case 499:
		return "CANCELLED", "The operation was cancelled."
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED", "Method not found."
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE", "The model is overloaded. Please try again later."
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."
	}
	if status >= 500 {
		return "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	}
	return "FAILED_PRECONDITION", http.StatusText(status)
}

// googleErrorBody is {"error":{"code","message","status"[,"details"]}}.
func googleErrorBody(f Failure, details []obj) obj {
	name, msg := googleStatus(f.status())
	if f.Type != "" {
		name = f.Type
	}
	if f.Message != "" {
		msg = f.Message
	}
	e := obj{{"code", f.status()}, {"message", msg}, {"status", name}}
	if details != nil {
		e = append(e, kv{"details", details})
	}
	return obj{{"error", e}}
}

func googleError(_ http.Header, f Failure) []byte { return mustJSON(googleErrorBody(f, nil)) }

// RequireThoughtSignatures makes the emulator check thought signatures as
// Gemini 3 models do (see thoughtSignatures).
func (g *Gemini) RequireThoughtSignatures() { g.sigs.require() }

// geminiFlavor renders generateContent as the Gemini API or Vertex AI
// serves it.
type geminiFlavor struct {
	vertex bool
	errors errorFormat
	sigs   *thoughtSignatures
}

// thoughtSignatures are the thought signatures an emulator gave out
// (ToolCall.ThoughtSignature) and, once required, the check Gemini 3
// models make of a request's history: in the current turn (the contents
// after the last user content with text), the first functionCall part of
// each model content must carry a thoughtSignature, one the emulator gave
// out (400 INVALID_ARGUMENT otherwise, with Gemini's messages).
type thoughtSignatures struct {
	mu       sync.Mutex
	required bool
	issued   map[string]bool
}

func (t *thoughtSignatures) require() {
	t.mu.Lock()
	t.required = true
	t.mu.Unlock()
}

func (t *thoughtSignatures) issue(sig string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.issued == nil {
		t.issued = map[string]bool{}
	}
	t.issued[sig] = true
}

// check is Gemini 3's refusal of contents, or "".
func (t *thoughtSignatures) check(contents []any) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.required {
		return ""
	}
	start := 0
	for i, c := range contents {
		m, _ := c.(map[string]any)
		if m["role"] != "user" {
			continue
		}
		parts, _ := m["parts"].([]any)
		for _, p := range parts {
			if pm, _ := p.(map[string]any); pm["text"] != nil {
				start = i + 1
				break
			}
		}
	}
	for i := start; i < len(contents); i++ {
		m, _ := contents[i].(map[string]any)
		if m["role"] != "model" {
			continue
		}
		parts, _ := m["parts"].([]any)
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			call, _ := pm["functionCall"].(map[string]any)
			if call == nil {
				continue
			}
			sig, _ := pm["thoughtSignature"].(string)
			if sig == "" {
				name, _ := call["name"].(string)
				return "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:" +
					name + "` , position " + strconv.Itoa(i+1) + ". Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
			}
			if !t.issued[sig] {
				return "Corrupted thought signature."
			}
			break // the first call of the step only
		}
	}
	return ""
}

func (f geminiFlavor) serve(x *exchange, method string) {
	switch method {
	case "generateContent", "streamGenerateContent":
		f.generate(x)
	case "countTokens":
		f.countTokens(x)
	default:
		x.writeError(f.errors, Failure{Status: http.StatusNotFound,
			Message: "Method not found: " + method})
	}
}

func (f geminiFlavor) requireContents(x *exchange, what string) bool {
	if x.body == nil {
		x.writeError(f.errors, Failure{Status: http.StatusBadRequest, Message: "Invalid JSON payload received."})
		return false
	}
	if c, _ := x.body["contents"].([]any); len(c) == 0 {
		x.writeError(f.errors, Failure{Status: http.StatusBadRequest,
			Message: "* " + what + ".contents: contents is not specified\n"})
		return false
	}
	return true
}

func (f geminiFlavor) usage(u Usage, final bool) obj {
	o := obj{{"promptTokenCount", u.InputTokens}}
	total := u.InputTokens
	if final {
		o = append(o, kv{"candidatesTokenCount", u.OutputTokens})
		total += u.OutputTokens
	}
	o = append(o, kv{"totalTokenCount", total})
	if u.CachedInputTokens > 0 {
		o = append(o, kv{"cachedContentTokenCount", u.CachedInputTokens})
	}
	o = append(o, kv{"promptTokensDetails", []obj{{{"modality", "TEXT"}, {"tokenCount", u.InputTokens}}}})
	if f.vertex {
		if final {
			o = append(o, kv{"candidatesTokensDetails", []obj{{{"modality", "TEXT"}, {"tokenCount", u.OutputTokens}}}})
		}
		o = append(o, kv{"trafficType", "ON_DEMAND"})
	}
	return o
}

func (f geminiFlavor) generate(x *exchange) {
	if !f.requireContents(x, "GenerateContentRequest") {
		return
	}
	if f.sigs != nil {
		contents, _ := x.body["contents"].([]any)
		if msg := f.sigs.check(contents); msg != "" {
			x.writeError(f.errors, Failure{Status: http.StatusBadRequest, Message: msg})
			return
		}
	}
	rep, ok := x.answer(f.errors)
	if !ok {
		return
	}
	model := rep.Model
	if model == "" {
		model = x.rec.Model
	}
	responseID := x.s.id("")
	created := time.Now().UTC().Format(time.RFC3339Nano)
	finish := rep.StopReason
	if finish == "" {
		finish = "STOP"
	}
	u := rep.usage()
	var callParts []obj
	for _, c := range rep.ToolCalls {
		call := obj{}
		if c.ID != "" {
			call = append(call, kv{"id", c.ID})
		}
		call = append(call, kv{"name", c.Name}, kv{"args", rawJSON(c.Arguments)})
		part := obj{{"functionCall", call}}
		if c.ThoughtSignature != "" && f.sigs != nil {
			f.sigs.issue(c.ThoughtSignature)
			part = append(part, kv{"thoughtSignature", c.ThoughtSignature})
		}
		callParts = append(callParts, part)
	}
	chunk := func(parts []obj, finish string, final bool) obj {
		cand := obj{{"content", obj{{"parts", parts}, {"role", "model"}}}}
		if finish != "" {
			cand = append(cand, kv{"finishReason", finish})
		}
		if !f.vertex {
			cand = append(cand, kv{"index", 0})
		}
		o := obj{{"candidates", []obj{cand}}, {"usageMetadata", f.usage(u, final)}, {"modelVersion", model}}
		if f.vertex {
			o = append(o, kv{"createTime", created})
		}
		return append(o, kv{"responseId", responseID})
	}
	if !x.rec.Stream {
		var parts []obj
		if t := rep.text(); t != "" || len(callParts) == 0 {
			parts = append(parts, obj{{"text", t}})
		}
		parts = append(parts, callParts...)
		if rep.EmptyTextLast {
			parts = append(parts, obj{{"text", ""}})
		}
		x.writeJSON(chunk(parts, finish, true), rep.DropAfter)
		return
	}

	sse := x.r.URL.Query().Get("alt") == "sse"
	contentType := "application/json; charset=UTF-8"
	if sse {
		contentType = "text/event-stream"
	}
	st := x.startStream(contentType, rep.DropAfter)
	first := true
	send := func(v any) {
		if sse {
			st.sse("", v, "\r\n\r\n")
			return
		}
		prefix := ",\r\n"
		if first {
			prefix = "["
		}
		first = false
		st.send(append([]byte(prefix), mustJSON(v)...))
	}
	deltas := rep.deltas()
	if len(deltas) == 0 && len(callParts) == 0 {
		deltas = []string{""}
	}
	var last []obj
	for i, d := range deltas {
		part := []obj{{{"text", d}}}
		if i == len(deltas)-1 {
			last = part
			break
		}
		send(chunk(part, "", false))
	}
	if rep.StreamError != nil {
		if last != nil {
			send(chunk(last, "", false))
		}
		e := *rep.StreamError
		send(googleErrorBody(e, nil))
		if !sse {
			st.send([]byte("]"))
		}
		return
	}
	if rep.EmptyTextLast {
		send(chunk(append(last, callParts...), "", false))
		send(chunk([]obj{{{"text", ""}}}, finish, true))
	} else {
		send(chunk(append(last, callParts...), finish, true))
	}
	if !sse {
		st.send([]byte("]"))
	}
}

func (f geminiFlavor) countTokens(x *exchange) {
	if !f.requireContents(x, "CountTokensRequest") {
		return
	}
	rep, ok := x.answer(f.errors)
	if !ok {
		return
	}
	n := rep.usage().InputTokens
	o := obj{{"totalTokens", n}}
	if f.vertex {
		o = append(o, kv{"totalBillableCharacters", 4 * n})
	}
	o = append(o, kv{"promptTokensDetails", []obj{{{"modality", "TEXT"}, {"tokenCount", n}}}})
	x.writeJSON(o, rep.DropAfter)
}
