package server

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMCompressedRequestBody: a client may compress its request body
// (some agents gzip large prompts). The gateway decodes it within
// maxBufferSize, edits the text as any other (alias, mask), and the
// provider gets plain JSON without a Content-Encoding. A coding it does not
// decode is 415, a body past the limit once decoded 413, one that does not
// decode 400; none of those reach the provider.
func TestLLMCompressedRequestBody(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok"})
	cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, `
modelAliases: {fast: gpt-4o-mini}
promptGuard:
  request:
  - regex: {action: mask, rules: [{builtin: email}]}
`) + `
frontendPolicies:
  http: {maxBufferSize: 4096}
`
	tg := startGateway(t, cfg, nil)
	const prompt = `{"model":"fast","messages":[{"role":"user","content":"write to jane@example.com"}]}`
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	zl := func(s string) []byte {
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	big := `{"model":"fast","messages":[{"role":"user","content":"` + strings.Repeat("a", 8000) + `"}]}`
	sent := 0
	for _, c := range []struct {
		desc, coding string
		body         []byte
		status       int
	}{
		{"gzip", "gzip", gz(prompt), 200},
		{"x-gzip, case-insensitive", "X-Gzip", gz(prompt), 200},
		{"deflate (zlib)", "deflate", zl(prompt), 200},
		{"br", "br", fasthttp.AppendBrotliBytes(nil, []byte(prompt)), 200},
		{"zstd", "zstd", fasthttp.AppendZstdBytes(nil, []byte(prompt)), 200},
		{"identity", "identity", []byte(prompt), 200},
		{"two codings", "gzip, br", gz(prompt), 415},
		{"unknown coding", "compress", []byte(prompt), 415},
		{"not gzip at all", "gzip", []byte(prompt), 400},
		{"gzip cut short", "gzip", gz(prompt)[:20], 400},
		// 8 KB of text packs far under the limit; decoded, it is past it.
		{"past maxBufferSize once decoded", "gzip", gz(big), 413},
	} {
		t.Run(c.desc, func(t *testing.T) {
			req, _ := http.NewRequest("POST", tg.url(8080)+"/v1/chat/completions", bytes.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Content-Encoding", c.coding)
			resp, got := do(t, req)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, got, c.status)
			}
			if c.status != 200 {
				if n := len(o.Requests()); n != sent {
					t.Fatalf("the provider got %d requests, want %d", n, sent)
				}
				return
			}
			sent++
			last := o.Last()
			if ce := last.Header.Get("Content-Encoding"); ce != "" {
				t.Errorf("the provider got Content-Encoding %q", ce)
			}
			var body struct {
				Model    string `json:"model"`
				Messages []struct {
					Content string `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(last.Body, &body); err != nil {
				t.Fatalf("the provider got %q: %v", last.Body, err)
			}
			if body.Model != "gpt-4o-mini" || len(body.Messages) != 1 || strings.Contains(body.Messages[0].Content, "jane@") {
				t.Errorf("the provider got %s: not aliased and masked", last.Body)
			}
		})
	}
}

// compressingProvider is an OpenAI-format provider that compresses every
// answer in coding although the gateway asked for none (a provider, or a
// proxy in front of it, that ignores Accept-Encoding): chat completions
// whole or streamed event by event (the coding flushed after each), and
// the model list. For a coding the gateway does not decode it sends the
// text labelled with it.
func compressingProvider(t *testing.T, coding string) string {
	newWriter := func(w io.Writer) interface {
		io.WriteCloser
		Flush() error
	} {
		switch coding {
		case "gzip":
			return gzip.NewWriter(w)
		case "deflate":
			return zlib.NewWriter(w)
		}
		return nopFlusher{w}
	}
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "" {
			t.Errorf("the gateway asked the provider for %q", r.Header.Get("Accept-Encoding"))
		}
		w.Header().Set("Content-Encoding", coding)
		var req struct {
			Stream bool `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		switch {
		case r.URL.Path == "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			cw := newWriter(w)
			io.WriteString(cw, `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1,"owned_by":"x"}]}`)
			cw.Close()
		case req.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			cw := newWriter(w)
			for _, piece := range []string{"Par", "is."} {
				fmt.Fprintf(cw, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", piece)
				cw.Flush()
				w.(http.Flusher).Flush()
			}
			io.WriteString(cw, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":2,\"total_tokens\":13}}\n\ndata: [DONE]\n\n")
			cw.Close()
		default:
			w.Header().Set("Content-Type", "application/json")
			cw := newWriter(w)
			io.WriteString(cw, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}`)
			cw.Close()
		}
	}))
}

type nopFlusher struct{ io.Writer }

func (nopFlusher) Close() error { return nil }
func (nopFlusher) Flush() error { return nil }

// TestLLMCompressedProviderAnswer: a provider's answer in a coding is
// decoded, whole or streamed, for a client of its own format, of another
// (translated) and for the answers passed as they are (the model list);
// the client gets text without a Content-Encoding and the usage is read.
// An answer in a coding the gateway does not decode is a 502.
func TestLLMCompressedProviderAnswer(t *testing.T) {
	for _, enc := range []string{"gzip", "deflate"} {
		t.Run(enc, func(t *testing.T) {
			tg := startGateway(t, llmConfig(`openAI: {}`, compressingProvider(t, enc), "", ""), nil)
			c := openaiVia(tg)
			resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini"))
			if err != nil || resp.Choices[0].Message.Content != "Paris." || resp.Usage.TotalTokens != 13 {
				t.Fatalf("chat: %v %+v", err, resp)
			}
			if text, err := sgChat.stream(t, tg, "gpt-4o-mini"); err != nil || text != "Paris." {
				t.Fatalf("stream: %q, %v", text, err)
			}
			ac := anthropicVia(tg)
			msg, err := ac.Messages.New(llmCtx(t), anthropic.MessageNewParams{
				Model: "gpt-4o-mini", MaxTokens: 50,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Capital of France?"))},
			})
			if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "Paris." || msg.Usage.OutputTokens != 2 {
				t.Fatalf("messages, translated: %v %+v", err, msg)
			}
			hresp, body := get(t, tg.url(8080)+"/v1/models")
			if hresp.StatusCode != 200 || hresp.Header.Get("Content-Encoding") != "" || !strings.Contains(body, `"gpt-4o-mini"`) {
				t.Fatalf("models: %d %q %q", hresp.StatusCode, hresp.Header.Get("Content-Encoding"), body)
			}
			eventually(t, 5*time.Second, "the usage in the access log", func() bool {
				n := 0
				for _, e := range tg.accessLogs().FilterMessage("request").All() {
					if e.ContextMap()["llm.output_tokens"] == int64(2) {
						n++
					}
				}
				return n == 3 // chat, stream, messages
			})
		})
	}
	t.Run("unknown coding", func(t *testing.T) {
		tg := startGateway(t, llmConfig(`openAI: {}`, compressingProvider(t, "compress"), "", ""), nil)
		oc := openaiVia(tg)
		_, err := oc.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 {
			t.Fatalf("got %v, want a 502", err)
		}
	})
}
