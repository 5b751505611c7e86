package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func request(method, path, auth, body string, record bool) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	if auth != "" {
		ctx.Request.Header.Set("Authorization", auth)
	}
	if record {
		ctx.Request.Header.Set(recordHeader, "1")
	}
	ctx.Request.SetBodyString(body)
	return &ctx
}

func TestHandlerServe(t *testing.T) {
	tests := []struct {
		desc       string
		method     string
		path       string
		auth       string
		wantStatus int
		wantBody   []byte // nil: not checked
	}{
		{desc: "chat completion", method: "POST", path: chatPath, auth: "Bearer bench-key", wantStatus: 200, wantBody: completion},
		{desc: "wrong key", method: "POST", path: chatPath, auth: "Bearer nope", wantStatus: 401, wantBody: unauthorized},
		{desc: "no key", method: "POST", path: chatPath, wantStatus: 401, wantBody: unauthorized},
		{desc: "key without the scheme", method: "POST", path: chatPath, auth: "bench-key", wantStatus: 401},
		{desc: "GET refused", method: "GET", path: chatPath, auth: "Bearer bench-key", wantStatus: 405},
		{desc: "unknown path", method: "POST", path: "/v1/embeddings", auth: "Bearer bench-key", wantStatus: 404},
		{desc: "nothing recorded yet", method: "GET", path: "/last", wantStatus: 404},
		{desc: "ready", method: "GET", path: "/healthz", wantStatus: 200, wantBody: []byte("ok")},
	}
	h := newHandler("bench-key")
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := request(tc.method, tc.path, tc.auth, `{"model":"fast"}`, false)
			h.serve(ctx)
			if got := ctx.Response.StatusCode(); got != tc.wantStatus {
				t.Fatalf("status = %d, want %d", got, tc.wantStatus)
			}
			if tc.wantBody != nil && !bytes.Equal(ctx.Response.Body(), tc.wantBody) {
				t.Fatalf("body = %s, want %s", ctx.Response.Body(), tc.wantBody)
			}
		})
	}
}

// TestCompletionIsAChatCompletion: the fixed answer parses as what an
// OpenAI client expects, with usage, at about 300 bytes.
func TestCompletionIsAChatCompletion(t *testing.T) {
	var c struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(completion, &c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" ||
		c.Choices[0].FinishReason != "stop" || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens || c.Usage.TotalTokens == 0 {
		t.Fatalf("not a complete chat completion: %+v", c)
	}
	if n := len(completion); n < 250 || n > 350 {
		t.Fatalf("%d bytes, want about 300", n)
	}
}

// TestRecordAndLast: a request marked for recording is kept (bounded) and
// answered by GET /last; unmarked requests do not replace it.
func TestRecordAndLast(t *testing.T) {
	h := newHandler("bench-key")
	h.serve(request("POST", chatPath, "Bearer bench-key", `{"model":"kept"}`, true))
	h.serve(request("POST", chatPath, "Bearer bench-key", `{"model":"not kept"}`, false))
	h.serve(request("POST", chatPath, "Bearer wrong", `{"model":"refused"}`, true))
	last := request("GET", "/last", "", "", false)
	h.serve(last)
	if got := string(last.Response.Body()); last.Response.StatusCode() != 200 || got != `{"model":"kept"}` {
		t.Fatalf("GET /last: %d %s", last.Response.StatusCode(), got)
	}

	huge := strings.Repeat("x", maxRecorded+100)
	h.serve(request("POST", chatPath, "Bearer bench-key", huge, true))
	last = request("GET", "/last", "", "", false)
	h.serve(last)
	if got := len(last.Response.Body()); got != maxRecorded {
		t.Fatalf("kept %d bytes of a %d-byte body, want %d", got, len(huge), maxRecorded)
	}
}

// TestChatAllocs: an unrecorded answer allocates nothing, so the emulator
// costs every target the same little.
func TestChatAllocs(t *testing.T) {
	h := newHandler("bench-key")
	ctx := request("POST", chatPath, "Bearer bench-key", `{"model":"fast"}`, false)
	h.serve(ctx)
	allocs := testing.AllocsPerRun(100, func() {
		ctx.Response.Reset()
		h.serve(ctx)
	})
	if allocs != 0 {
		t.Fatalf("serve allocates %.1f times per request, want 0", allocs)
	}
}

func BenchmarkChat(b *testing.B) {
	h := newHandler("bench-key")
	ctx := request("POST", chatPath, "Bearer bench-key", `{"model":"fast"}`, false)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.serve(ctx)
	}
}
