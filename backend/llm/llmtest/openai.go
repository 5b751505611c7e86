package llmtest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// OpenAI emulates the OpenAI API under /v1: chat completions (plain, and
// streamed as SSE ending with "data: [DONE]", with a usage chunk when
// stream_options.include_usage is set), responses (plain and streamed
// events), embeddings (float or base64) and models (list and retrieve).
// Requests need "Authorization: Bearer <APIKey>".
type OpenAI struct {
	*Server
	// APIKey is the accepted key.
	APIKey string
	// Models are the ids GET /v1/models lists.
	Models []string
}

// NewOpenAI starts an OpenAI emulator that the test's Cleanup stops.
func NewOpenAI(tb testing.TB) *OpenAI {
	tb.Helper()
	o := &OpenAI{
		APIKey: "sk-emulated-openai-key",
		Models: []string{"gpt-4o-mini", "gpt-4.1", "text-embedding-3-small"},
	}
	mux := http.NewServeMux()
	f := openaiFlavor{modelIDs: func() []string { return o.Models }}
	auth := func(x *exchange) bool { return o.authorize(x) }
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		f.chat(o.begin(w, r, "chat.completions"), auth)
	})
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		f.responses(o.begin(w, r, "responses"), auth)
	})
	mux.HandleFunc("POST /v1/embeddings", func(w http.ResponseWriter, r *http.Request) {
		f.embeddings(o.begin(w, r, "embeddings"), auth)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		f.models(o.begin(w, r, "models"), auth, "")
	})
	mux.HandleFunc("GET /v1/models/{model}", func(w http.ResponseWriter, r *http.Request) {
		f.models(o.begin(w, r, "models"), auth, r.PathValue("model"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		x := o.begin(w, r, "unknown")
		x.admit()
		x.writeError(openaiError, Failure{Status: http.StatusNotFound,
			Message: "Invalid URL (" + r.Method + " " + r.URL.Path + ")"})
	})
	o.Server = newServer(tb)
	o.start(mux)
	return o
}

// BaseURL is the API base clients are given: URL + "/v1".
func (o *OpenAI) BaseURL() string { return o.URL + "/v1" }

func (o *OpenAI) authorize(x *exchange) bool {
	got, ok := strings.CutPrefix(x.r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || got == "":
		x.refuse("no bearer token", openaiError, Failure{Status: http.StatusUnauthorized,
			Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys."})
		return false
	case got != o.APIKey:
		x.refuse("wrong API key", openaiError, Failure{Status: http.StatusUnauthorized, Code: "invalid_api_key",
			Message: "Incorrect API key provided: " + redact(got) + ". You can find your API key at https://platform.openai.com/account/api-keys."})
		return false
	}
	x.admit()
	return true
}

// redact shows a key as OpenAI's errors do: its start and end.
func redact(key string) string {
	if len(key) <= 8 {
		return "****"
	}
	return key[:3] + "*****" + key[len(key)-4:]
}

// openaiError renders OpenAI's error body:
// {"error":{"message","type","param","code"}}.
func openaiError(_ http.Header, f Failure) []byte {
	typ, code, msg := "invalid_request_error", any(nil), ""
	switch f.Status {
	case http.StatusBadRequest:
		msg = "Bad request."
	case http.StatusUnauthorized:
		code, msg = "invalid_api_key", "Incorrect API key provided."
	case http.StatusForbidden:
		code, msg = "unsupported_country_region_territory", "Country, region, or territory not supported"
	case http.StatusNotFound:
		code, msg = "model_not_found", "The model does not exist or you do not have access to it."
	case http.StatusTooManyRequests:
		typ, code, msg = "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."
	case http.StatusServiceUnavailable:
		typ, msg = "server_error", "The engine is currently overloaded, please try again later"
	default:
		if f.Status >= 500 {
			typ, msg = "server_error", "The server had an error while processing your request. Sorry about that!"
		} else {
			msg = http.StatusText(f.Status)
		}
	}
	if f.Type != "" {
		typ = f.Type
	}
	if f.Code != "" {
		code = f.Code
	}
	if f.Message != "" {
		msg = f.Message
	}
	return mustJSON(obj{{"error", obj{{"message", msg}, {"type", typ}, {"param", nil}, {"code", code}}}})
}

// azureError renders Azure OpenAI's error body: {"error":{"code","message"}}.
func azureError(_ http.Header, f Failure) []byte {
	code, msg := http.StatusText(f.Status), http.StatusText(f.Status)
	switch f.Status {
	case http.StatusUnauthorized:
		code, msg = "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."
	case http.StatusNotFound:
		code, msg = "404", "Resource not found"
	case http.StatusTooManyRequests:
		code, msg = "429", "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 1 second."
	case http.StatusInternalServerError:
		code, msg = "InternalServerError", "The server had an error while processing your request. Sorry about that!"
	}
	if f.Code != "" {
		code = f.Code
	} else if f.Type != "" {
		code = f.Type
	}
	if f.Message != "" {
		msg = f.Message
	}
	return mustJSON(obj{{"error", obj{{"code", code}, {"message", msg}}}})
}

// openaiFlavor renders the OpenAI formats, as OpenAI or as Azure OpenAI
// (content filter results, Azure's error body).
type openaiFlavor struct {
	azure    bool
	modelIDs func() []string
}

func (f openaiFlavor) errors() errorFormat {
	if f.azure {
		return azureError
	}
	return openaiError
}

// requireFields answers 400 when a required member is missing.
func (f openaiFlavor) requireFields(x *exchange, names ...string) bool {
	if x.body == nil {
		x.writeError(f.errors(), Failure{Status: http.StatusBadRequest,
			Message: "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"})
		return false
	}
	for _, n := range names {
		if !x.has(n) {
			x.writeError(f.errors(), Failure{Status: http.StatusBadRequest, Code: "missing_required_parameter",
				Message: "Missing required parameter: '" + n + "'."})
			return false
		}
	}
	return true
}

func (f openaiFlavor) model(x *exchange, rep Reply) string {
	switch {
	case rep.Model != "":
		return rep.Model
	case x.rec.Model != "":
		return x.rec.Model
	}
	return x.rec.Deployment
}

func openaiUsage(u Usage) obj {
	return obj{
		{"prompt_tokens", u.InputTokens},
		{"completion_tokens", u.OutputTokens},
		{"total_tokens", u.InputTokens + u.OutputTokens},
		{"prompt_tokens_details", obj{{"cached_tokens", u.CachedInputTokens}, {"audio_tokens", 0}}},
		{"completion_tokens_details", obj{{"reasoning_tokens", 0}, {"audio_tokens", 0},
			{"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}},
	}
}

// contentFilterResults is Azure's per-choice (and per-prompt) annotation.
func contentFilterResults() obj {
	safe := obj{{"filtered", false}, {"severity", "safe"}}
	return obj{{"hate", safe}, {"self_harm", safe}, {"sexual", safe}, {"violence", safe}}
}

func promptFilterResults() []obj {
	return []obj{{{"prompt_index", 0}, {"content_filter_results", contentFilterResults()}}}
}

func (f openaiFlavor) chat(x *exchange, authorize func(*exchange) bool) {
	x.rec.Model = x.str("model")
	x.rec.Stream = x.flag("stream")
	if !authorize(x) {
		return
	}
	required := []string{"model", "messages"}
	if f.azure && x.rec.Deployment != "" {
		required = required[1:] // the deployment names the model
	}
	if !f.requireFields(x, required...) {
		return
	}
	rep, ok := x.answer(f.errors())
	if !ok {
		return
	}
	model := f.model(x, rep)
	id := x.s.id("chatcmpl-")
	created := time.Now().Unix()
	finish := rep.StopReason
	if finish == "" {
		finish = "stop"
		if len(rep.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	calls := make([]ToolCall, len(rep.ToolCalls))
	for i, c := range rep.ToolCalls {
		if c.ID == "" {
			c.ID = x.s.id("call_")
		}
		calls[i] = c
	}
	if !x.rec.Stream {
		var content any
		if t := rep.text(); t != "" || len(calls) == 0 {
			content = t
		}
		msg := obj{{"role", "assistant"}, {"content", content}, {"refusal", nil}, {"annotations", []any{}}}
		if len(calls) > 0 {
			var tcs []obj
			for _, c := range calls {
				tcs = append(tcs, obj{{"id", c.ID}, {"type", "function"},
					{"function", obj{{"name", c.Name}, {"arguments", c.args()}}}})
			}
			msg = append(msg, kv{"tool_calls", tcs})
		}
		choice := obj{{"index", 0}, {"message", msg}, {"logprobs", nil}, {"finish_reason", finish}}
		if f.azure {
			choice = append(choice, kv{"content_filter_results", contentFilterResults()})
		}
		body := obj{
			{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
			{"choices", []obj{choice}},
			{"usage", openaiUsage(rep.usage())},
		}
		if f.azure {
			body = append(body, kv{"prompt_filter_results", promptFilterResults()})
		} else {
			body = append(body, kv{"service_tier", "default"})
		}
		body = append(body, kv{"system_fingerprint", "fp_emulated"})
		x.writeJSON(body, rep.DropAfter)
		return
	}

	opts, _ := x.body["stream_options"].(map[string]any)
	includeUsage, _ := opts["include_usage"].(bool)
	obfuscate := true
	if v, ok := opts["include_obfuscation"].(bool); ok {
		obfuscate = v
	}
	st := x.startStream("text/event-stream; charset=utf-8", rep.DropAfter)
	chunk := func(delta obj, finish any, filter bool) obj {
		choice := obj{{"index", 0}, {"delta", delta}, {"logprobs", nil}, {"finish_reason", finish}}
		if f.azure && filter {
			choice = append(choice, kv{"content_filter_results", contentFilterResults()})
		}
		c := obj{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}}
		if !f.azure {
			c = append(c, kv{"service_tier", "default"})
		}
		c = append(c, kv{"system_fingerprint", "fp_emulated"}, kv{"choices", []obj{choice}})
		if includeUsage {
			c = append(c, kv{"usage", nil})
		}
		if obfuscate && !f.azure {
			c = append(c, kv{"obfuscation", padding()})
		}
		return c
	}
	send := func(v any) { st.sse("", v, "\n\n") }
	if f.azure {
		// Azure opens with the prompt's content filter results and no choice.
		send(obj{{"choices", []any{}}, {"created", 0}, {"id", ""}, {"model", ""}, {"object", ""},
			{"prompt_filter_results", promptFilterResults()}})
	}
	text := rep.deltas()
	role := obj{{"role", "assistant"}, {"content", ""}, {"refusal", nil}}
	if len(text) == 0 && len(calls) > 0 {
		role = obj{{"role", "assistant"}, {"content", nil}, {"refusal", nil}}
	} else {
		send(chunk(role, nil, false))
		role = nil
	}
	for _, d := range text {
		send(chunk(obj{{"content", d}}, nil, true))
	}
	for i, c := range calls {
		start := obj{{"index", i}, {"id", c.ID}, {"type", "function"},
			{"function", obj{{"name", c.Name}, {"arguments", ""}}}}
		delta := append(role, kv{"tool_calls", []obj{start}})
		role = nil
		send(chunk(delta, nil, false))
		for _, piece := range splitN(c.args(), 3) {
			send(chunk(obj{{"tool_calls", []obj{{{"index", i}, {"function", obj{{"arguments", piece}}}}}}}, nil, false))
		}
	}
	if rep.StreamError != nil {
		e := *rep.StreamError
		e.Status = e.status()
		st.send(append(append([]byte("data: "), f.errors()(http.Header{}, e)...), "\n\n"...))
		return
	}
	send(chunk(obj{}, finish, true))
	if includeUsage {
		c := obj{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}}
		if !f.azure {
			c = append(c, kv{"service_tier", "default"})
		}
		c = append(c, kv{"system_fingerprint", "fp_emulated"}, kv{"choices", []any{}},
			kv{"usage", openaiUsage(rep.usage())})
		if obfuscate && !f.azure {
			c = append(c, kv{"obfuscation", padding()})
		}
		send(c)
	}
	st.last, st.unterminated = true, rep.NoLastBlankLine
	st.send([]byte("data: [DONE]\n\n"))
}

// padding is the random "obfuscation" value OpenAI adds to stream chunks.
func padding() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func responsesUsage(u Usage) obj {
	return obj{
		{"input_tokens", u.InputTokens},
		{"input_tokens_details", obj{{"cached_tokens", u.CachedInputTokens}}},
		{"output_tokens", u.OutputTokens},
		{"output_tokens_details", obj{{"reasoning_tokens", 0}}},
		{"total_tokens", u.InputTokens + u.OutputTokens},
	}
}

func (f openaiFlavor) responses(x *exchange, authorize func(*exchange) bool) {
	x.rec.Model = x.str("model")
	x.rec.Stream = x.flag("stream")
	if !authorize(x) {
		return
	}
	required := []string{"model"}
	if f.azure && x.rec.Deployment != "" {
		required = nil
	}
	if !f.requireFields(x, required...) {
		return
	}
	rep, ok := x.answer(f.errors())
	if !ok {
		return
	}
	model := f.model(x, rep)
	id := x.s.id("resp_")
	created := time.Now().Unix()
	status, incomplete := "completed", any(nil)
	if rep.StopReason != "" && rep.StopReason != "completed" {
		status, incomplete = "incomplete", obj{{"reason", rep.StopReason}}
	}
	msgID := x.s.id("msg_")
	text := rep.text()
	type fcall struct {
		ToolCall
		itemID string
	}
	var calls []fcall
	for _, c := range rep.ToolCalls {
		if c.ID == "" {
			c.ID = x.s.id("call_")
		}
		calls = append(calls, fcall{c, x.s.id("fc_")})
	}
	textPart := func(t string) obj {
		return obj{{"type", "output_text"}, {"annotations", []any{}}, {"logprobs", []any{}}, {"text", t}}
	}
	msgItem := func(status string, content []obj) obj {
		if content == nil {
			content = []obj{}
		}
		return obj{{"id", msgID}, {"type", "message"}, {"status", status}, {"content", content}, {"role", "assistant"}}
	}
	callItem := func(c fcall, status, args string) obj {
		return obj{{"id", c.itemID}, {"type", "function_call"}, {"status", status},
			{"arguments", args}, {"call_id", c.ID}, {"name", c.Name}}
	}
	var output []obj
	if text != "" || len(calls) == 0 {
		output = append(output, msgItem("completed", []obj{textPart(text)}))
	}
	for _, c := range calls {
		output = append(output, callItem(c, "completed", c.args()))
	}
	instructions, _ := x.body["instructions"].(string)
	var instr any
	if instructions != "" {
		instr = instructions
	}
	response := func(status string, output []obj, usage any, incomplete any) obj {
		if output == nil {
			output = []obj{}
		}
		return obj{
			{"id", id}, {"object", "response"}, {"created_at", created}, {"status", status},
			{"background", false}, {"error", nil}, {"incomplete_details", incomplete},
			{"instructions", instr}, {"max_output_tokens", nil}, {"max_tool_calls", nil}, {"model", model},
			{"output", output}, {"parallel_tool_calls", true}, {"previous_response_id", nil},
			{"reasoning", obj{{"effort", nil}, {"summary", nil}}}, {"service_tier", "default"},
			{"store", true}, {"temperature", 1.0},
			{"text", obj{{"format", obj{{"type", "text"}}}, {"verbosity", "medium"}}},
			{"tool_choice", "auto"}, {"tools", []any{}}, {"top_logprobs", 0}, {"top_p", 1.0},
			{"truncation", "disabled"}, {"usage", usage}, {"user", nil}, {"metadata", obj{}},
		}
	}
	if !x.rec.Stream {
		x.writeJSON(response(status, output, responsesUsage(rep.usage()), incomplete), rep.DropAfter)
		return
	}

	st := x.startStream("text/event-stream; charset=utf-8", rep.DropAfter)
	seq := 0
	event := func(typ string, members ...kv) {
		o := append(obj{{"type", typ}}, members...)
		o = append(o, kv{"sequence_number", seq})
		seq++
		st.sse(typ, o, "\n\n")
	}
	event("response.created", kv{"response", response("in_progress", nil, nil, nil)})
	event("response.in_progress", kv{"response", response("in_progress", nil, nil, nil)})
	index := 0
	if text != "" || len(calls) == 0 {
		event("response.output_item.added", kv{"output_index", index}, kv{"item", msgItem("in_progress", nil)})
		event("response.content_part.added", kv{"item_id", msgID}, kv{"output_index", index},
			kv{"content_index", 0}, kv{"part", textPart("")})
		for _, d := range rep.deltas() {
			event("response.output_text.delta", kv{"item_id", msgID}, kv{"output_index", index},
				kv{"content_index", 0}, kv{"delta", d}, kv{"logprobs", []any{}})
		}
		if rep.StreamError != nil {
			f.responsesStreamError(st, rep.StreamError, &seq)
			return
		}
		event("response.output_text.done", kv{"item_id", msgID}, kv{"output_index", index},
			kv{"content_index", 0}, kv{"text", text}, kv{"logprobs", []any{}})
		event("response.content_part.done", kv{"item_id", msgID}, kv{"output_index", index},
			kv{"content_index", 0}, kv{"part", textPart(text)})
		event("response.output_item.done", kv{"output_index", index}, kv{"item", msgItem("completed", []obj{textPart(text)})})
		index++
	}
	for _, c := range calls {
		event("response.output_item.added", kv{"output_index", index}, kv{"item", callItem(c, "in_progress", "")})
		for _, piece := range splitN(c.args(), 3) {
			event("response.function_call_arguments.delta", kv{"item_id", c.itemID}, kv{"output_index", index}, kv{"delta", piece})
		}
		event("response.function_call_arguments.done", kv{"item_id", c.itemID}, kv{"output_index", index},
			kv{"name", c.Name}, kv{"arguments", c.args()})
		event("response.output_item.done", kv{"output_index", index}, kv{"item", callItem(c, "completed", c.args())})
		index++
	}
	if rep.StreamError != nil {
		f.responsesStreamError(st, rep.StreamError, &seq)
		return
	}
	final := "response.completed"
	if status == "incomplete" {
		final = "response.incomplete"
	}
	event(final, kv{"response", response(status, output, responsesUsage(rep.usage()), incomplete)})
}

// responsesStreamError sends the Responses API's in-band error event.
func (f openaiFlavor) responsesStreamError(st *stream, e *Failure, seq *int) {
	code := e.Code
	if code == "" {
		code = e.Type
	}
	if code == "" {
		code = "server_error"
	}
	msg := e.Message
	if msg == "" {
		msg = "The server had an error while processing your request. Sorry about that!"
	}
	st.sse("error", obj{{"type", "error"}, {"code", code}, {"message", msg}, {"param", nil}, {"sequence_number", *seq}}, "\n\n")
	*seq++
}

func (f openaiFlavor) embeddings(x *exchange, authorize func(*exchange) bool) {
	x.rec.Model = x.str("model")
	if !authorize(x) {
		return
	}
	required := []string{"model", "input"}
	if f.azure && x.rec.Deployment != "" {
		required = required[1:]
	}
	if !f.requireFields(x, required...) {
		return
	}
	rep, ok := x.answer(f.errors())
	if !ok {
		return
	}
	var inputs []string
	switch in := x.body["input"].(type) {
	case string:
		inputs = []string{in}
	case []any:
		if len(in) > 0 {
			if _, isNum := in[0].(float64); isNum {
				inputs = []string{string(mustJSON(in))} // one tokenised input
				break
			}
		}
		for _, v := range in {
			inputs = append(inputs, string(mustJSON(v)))
		}
	}
	if len(inputs) == 0 {
		x.writeError(f.errors(), Failure{Status: http.StatusBadRequest, Message: "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."})
		return
	}
	dims := 8
	if d, ok := x.body["dimensions"].(float64); ok && d >= 1 && d <= 4096 {
		dims = int(d)
	}
	base64Out := x.str("encoding_format") == "base64"
	var data []obj
	for i, in := range inputs {
		vec := rep.Embedding
		if vec == nil {
			vec = derivedVector(in, dims)
		}
		var e any = vec
		if base64Out {
			e = encodeFloat32s(vec)
		}
		data = append(data, obj{{"object", "embedding"}, {"index", i}, {"embedding", e}})
	}
	u := rep.usage()
	x.writeJSON(obj{
		{"object", "list"}, {"data", data}, {"model", f.model(x, rep)},
		{"usage", obj{{"prompt_tokens", u.InputTokens}, {"total_tokens", u.InputTokens}}},
	}, rep.DropAfter)
}

// derivedVector is a unit-length vector that depends only on s.
func derivedVector(s string, dims int) []float64 {
	v := make([]float64, dims)
	var norm float64
	for i := range v {
		h := fnv.New64a()
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{byte(i), byte(i >> 8)})
		v[i] = float64(int64(h.Sum64()%2001)-1000) / 1000
		norm += v[i] * v[i]
	}
	if norm == 0 {
		v[0], norm = 1, 1
	}
	for i := range v {
		// Rounded through float32, so that float and base64 answers agree.
		v[i] = float64(float32(v[i] / math.Sqrt(norm)))
	}
	return v
}

// encodeFloat32s is OpenAI's base64 embedding: little-endian float32s.
func encodeFloat32s(v []float64) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (f openaiFlavor) models(x *exchange, authorize func(*exchange) bool, one string) {
	if !authorize(x) {
		return
	}
	rep, ok := x.answer(f.errors())
	if !ok {
		return
	}
	model := func(id string) obj {
		return obj{{"id", id}, {"object", "model"}, {"created", 1686935002}, {"owned_by", "system"}}
	}
	if one != "" {
		x.rec.Model = one
		for _, m := range f.modelIDs() {
			if m == one {
				x.writeJSON(model(m), rep.DropAfter)
				return
			}
		}
		x.writeError(f.errors(), Failure{Status: http.StatusNotFound, Code: "model_not_found",
			Message: "The model '" + one + "' does not exist"})
		return
	}
	data := []obj{}
	for _, m := range f.modelIDs() {
		data = append(data, model(m))
	}
	x.writeJSON(obj{{"object", "list"}, {"data", data}}, rep.DropAfter)
}

// Azure emulates Azure OpenAI: the deployment paths
// /openai/deployments/{deployment}/chat/completions and .../embeddings
// (api-version required), /openai/responses?api-version=..., and the v1 API
// under /openai/v1 (chat/completions, responses, embeddings, models).
// Requests need "api-key: <APIKey>", or "Authorization: Bearer <EntraToken>"
// when EntraToken is set; the v1 paths also take the key as a bearer token,
// as OpenAI's own clients send it there.
type Azure struct {
	*Server
	APIKey string
	// EntraToken, when set, is an accepted Microsoft Entra ID access token.
	EntraToken string
	// Models are the ids GET /openai/v1/models lists.
	Models []string
}

// apiVersion matches the api-version values Azure takes.
var apiVersion = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2}(-preview)?|preview|latest|v1)$`)

// NewAzure starts an Azure OpenAI emulator that the test's Cleanup stops.
func NewAzure(tb testing.TB) *Azure {
	tb.Helper()
	a := &Azure{APIKey: "emulated-azure-api-key", Models: []string{"gpt-4o-mini", "text-embedding-3-small"}}
	f := openaiFlavor{azure: true, modelIDs: func() []string { return a.Models }}
	mux := http.NewServeMux()
	deployment := func(op string, serve func(*exchange, func(*exchange) bool)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			x := a.begin(w, r, op)
			x.rec.Deployment = r.PathValue("deployment")
			auth := func(x *exchange) bool {
				if x.rec.Model == "" {
					x.rec.Model = x.rec.Deployment
				}
				return a.authorize(x, false) && a.versioned(x, true)
			}
			serve(x, auth)
		}
	}
	v1 := func(op string, serve func(*exchange, func(*exchange) bool)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			serve(a.begin(w, r, op), func(x *exchange) bool { return a.authorize(x, true) && a.versioned(x, false) })
		}
	}
	mux.HandleFunc("POST /openai/deployments/{deployment}/chat/completions", deployment("chat.completions", f.chat))
	mux.HandleFunc("POST /openai/deployments/{deployment}/embeddings", deployment("embeddings", f.embeddings))
	mux.HandleFunc("POST /openai/responses", func(w http.ResponseWriter, r *http.Request) {
		f.responses(a.begin(w, r, "responses"), func(x *exchange) bool { return a.authorize(x, false) && a.versioned(x, true) })
	})
	mux.HandleFunc("POST /openai/v1/chat/completions", v1("chat.completions", f.chat))
	mux.HandleFunc("POST /openai/v1/responses", v1("responses", f.responses))
	mux.HandleFunc("POST /openai/v1/embeddings", v1("embeddings", f.embeddings))
	mux.HandleFunc("GET /openai/v1/models", func(w http.ResponseWriter, r *http.Request) {
		f.models(a.begin(w, r, "models"), func(x *exchange) bool { return a.authorize(x, true) && a.versioned(x, false) }, "")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		x := a.begin(w, r, "unknown")
		x.admit()
		x.writeError(azureError, Failure{Status: http.StatusNotFound})
	})
	a.Server = newServer(tb)
	a.start(mux)
	return a
}

// Endpoint is the resource endpoint clients are given (URL + "/").
func (a *Azure) Endpoint() string { return a.URL + "/" }

// V1BaseURL is the base of the v1 API: URL + "/openai/v1".
func (a *Azure) V1BaseURL() string { return a.URL + "/openai/v1" }

func (a *Azure) authorize(x *exchange, v1 bool) bool {
	key := x.r.Header.Get("api-key")
	bearer, hasBearer := strings.CutPrefix(x.r.Header.Get("Authorization"), "Bearer ")
	switch {
	case key != "":
		if key != a.APIKey {
			x.refuse("wrong api-key", azureError, Failure{Status: http.StatusUnauthorized})
			return false
		}
	case hasBearer && a.EntraToken != "" && bearer == a.EntraToken:
	case hasBearer && v1 && bearer == a.APIKey:
	case hasBearer:
		x.refuse("wrong bearer token", azureError, Failure{Status: http.StatusUnauthorized,
			Message: "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired."})
		return false
	default:
		x.refuse("no api-key", azureError, Failure{Status: http.StatusUnauthorized})
		return false
	}
	x.admit()
	return true
}

// versioned checks the api-version query parameter: required on the
// deployment paths, optional on the v1 API.
func (a *Azure) versioned(x *exchange, required bool) bool {
	v := x.r.URL.Query().Get("api-version")
	switch {
	case v == "" && required:
		x.writeError(azureError, Failure{Status: http.StatusNotFound})
		return false
	case v != "" && !apiVersion.MatchString(v):
		x.writeError(azureError, Failure{Status: http.StatusBadRequest, Code: "BadRequest", Message: "API version not supported"})
		return false
	}
	return true
}
