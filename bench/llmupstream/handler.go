package main

import (
	"crypto/subtle"
	"sync"

	"github.com/valyala/fasthttp"
)

// chatPath is the one path the emulator answers LLM requests on.
const chatPath = "/v1/chat/completions"

// recordHeader marks a request whose body the emulator keeps for GET
// /last, so that bench/run.sh can check what a proxy sent upstream. Other
// requests are answered without a copy.
const recordHeader = "X-Bench-Record"

// maxRecorded bounds the body kept for GET /last.
const maxRecorded = 64 << 10

// completion is the fixed answer: an OpenAI chat completion with usage, as
// a provider sends it without streaming (about 300 bytes).
var completion = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1767225600,` +
	`"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant",` +
	`"content":"The benchmark answer."},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":250,"completion_tokens":5,"total_tokens":255},"system_fingerprint":"fp_bench"}`)

var (
	jsonType = []byte("application/json")
	// unauthorized is OpenAI's answer to a missing or wrong key, shortened.
	unauthorized = []byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
)

// handler answers chat completions at once, as a provider would if it
// took no time to think: every request must carry the expected key (as a
// provider checks it), and its body is not parsed.
type handler struct {
	wantAuth []byte // "Bearer <key>"

	mu   sync.Mutex
	last []byte // the body of the last request that asked to be recorded
}

func newHandler(key string) *handler {
	return &handler{wantAuth: []byte("Bearer " + key)}
}

func (h *handler) serve(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case chatPath:
		h.chat(ctx)
	case "/last":
		h.lastRecorded(ctx)
	case "/healthz":
		// Readiness, for bench/run.sh's probe.
		ctx.SetBodyString("ok")
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
}

func (h *handler) chat(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	ctx.Response.Header.SetContentTypeBytes(jsonType)
	if subtle.ConstantTimeCompare(ctx.Request.Header.Peek("Authorization"), h.wantAuth) != 1 {
		ctx.SetStatusCode(fasthttp.StatusUnauthorized)
		ctx.Response.SetBodyRaw(unauthorized)
		return
	}
	if len(ctx.Request.Header.Peek(recordHeader)) > 0 {
		h.record(ctx.Request.Body())
	}
	ctx.Response.SetBodyRaw(completion)
}

// record keeps a copy of body (at most maxRecorded bytes) for GET /last.
func (h *handler) record(body []byte) {
	kept := append([]byte(nil), body[:min(len(body), maxRecorded)]...)
	h.mu.Lock()
	h.last = kept
	h.mu.Unlock()
}

// lastRecorded answers GET /last with the last recorded body, 404 if none.
func (h *handler) lastRecorded(ctx *fasthttp.RequestCtx) {
	h.mu.Lock()
	last := h.last
	h.mu.Unlock()
	if last == nil {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	ctx.Response.Header.SetContentTypeBytes(jsonType)
	ctx.Response.SetBodyRaw(last)
}
