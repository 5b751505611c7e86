package server

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMClientErrorsUnderLoad: the gateway's own errors in the client's
// format stay whole when many clients get them at once. The body was once
// a pooled buffer handed back before the response was written, so another
// request could overwrite it mid-write (the race detector sees that too).
func TestLLMClientErrorsUnderLoad(t *testing.T) {
	tg := startGateway(t, llmConfig(`openAI: {}`, closedAddr(t), "", ""), nil)
	const clients, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Bodies of different lengths make different error texts.
				body := `{"model":"m","messages":` + strings.Repeat("[", 1+(c+i)%3)
				resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || !bytes.HasPrefix(got, []byte(`{"error":`)) || !bytes.HasSuffix(bytes.TrimSpace(got), []byte(`}`)) {
					errs <- fmt.Errorf("status %d, body %q", resp.StatusCode, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLLMPassthroughKeepsContentType: a passthrough route type forwards the
// client's body with its own Content-Type (a multipart upload stays
// multipart); JSON route types send application/json.
func TestLLMPassthroughKeepsContentType(t *testing.T) {
	seen := make(chan string, 4)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path + " " + r.Header.Get("Content-Type")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"text":"hello"}`)
	}))
	cfg := strings.Replace(llmConfig(`openAI: {}`, up, "backendAuth: {key: k}", ""), llmRoutes,
		`{"/v1/audio/transcriptions": passthrough, "/v1/chat/completions": completions}`, 1)
	tg := startGateway(t, cfg, nil)

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "a.wav")
	fw.Write([]byte("RIFF....WAVE"))
	mw.WriteField("model", "whisper-1")
	mw.Close()
	resp, err := http.Post(tg.url(8080)+"/v1/audio/transcriptions", mw.FormDataContentType(), &form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got, want := <-seen, "/v1/audio/transcriptions "+mw.FormDataContentType(); got != want {
		t.Fatalf("the provider got %q, want %q", got, want)
	}
}

// TestLLMErrorWithSuccessStatus: a provider that answers 200 with an error
// object (Anthropic's, Gemini's, Bedrock's, OpenAI's) or with JSON that is
// no answer (null) gives the client that error in its shape, with the
// status the error names (else 502), and another provider is asked first
// when there is one. Such answers used to be translated into empty
// successful answers (content null), and failover did not happen.
func TestLLMErrorWithSuccessStatus(t *testing.T) {
	const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	t.Run("failover", func(t *testing.T) {
		a, o, tg := anthropicThenOpenAI(t)
		a.Enqueue(llmtest.Failure{Status: 200, Body: overloaded})
		o.Enqueue(llmtest.Reply{Text: "from the second"})
		c := openaiVia(tg)
		resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("m"))
		if err != nil || resp.Choices[0].Message.Content != "from the second" {
			t.Fatalf("answer: %v %v; want the second provider's", resp, err)
		}
		firstFailedOnce(t, a.Server, tg)
	})

	a := llmtest.NewAnthropic(t)
	g := llmtest.NewGemini(t)
	b := llmtest.NewBedrock(t)
	o := llmtest.NewOpenAI(t)
	bedrock := `bedrock: {region: ` + b.Region + `}`
	bedrockAuth := `backendAuth: {aws: {accessKeyId: ` + b.AccessKeyID + `, secretAccessKey: ` + b.SecretAccessKey + `}}`
	for _, tc := range []struct {
		name           string
		emulator       *llmtest.Server
		provider, auth string
		path, answer   string
		status         int
		want           string // in the client's error body
	}{
		{"anthropic to chat", a.Server, `anthropic: {}`, `backendAuth: {key: ` + a.APIKey + `}`, "/v1/chat/completions", overloaded, 529, `"message":"Overloaded"`},
		{"anthropic to messages", a.Server, `anthropic: {}`, `backendAuth: {key: ` + a.APIKey + `}`, "/v1/messages", overloaded, 529, `"type":"overloaded_error"`},
		{"gemini", g.Server, `gemini: {}`, `backendAuth: {key: ` + g.APIKey + `}`, "/v1/chat/completions",
			`{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}`, 429, `"message":"Resource exhausted"`},
		{"bedrock", b.Server, bedrock, bedrockAuth, "/v1/chat/completions", `{"message":"throttled"}`, 502, `"message":"throttled"`},
		{"openai, null", o.Server, `openAI: {}`, `backendAuth: {key: ` + o.APIKey + `}`, "/v1/chat/completions", `null`, 502, `"error":{`},
		{"openai, an error object", o.Server, `openAI: {}`, `backendAuth: {key: ` + o.APIKey + `}`, "/v1/chat/completions",
			`{"error":{"message":"The server had an error","type":"server_error"}}`, 502, `"message":"The server had an error"`},
		{"anthropic to chat, no content", a.Server, `anthropic: {}`, `backendAuth: {key: ` + a.APIKey + `}`, "/v1/chat/completions", `{}`, 502, `"error":{`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startGateway(t, llmConfig(tc.provider, tc.emulator.Addr(), tc.auth, ""), nil)
			tc.emulator.Enqueue(llmtest.Failure{Status: 200, Body: tc.answer})
			body := `{"model":"anthropic.claude-3-haiku-20240307-v1:0","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
			resp, got := postJSON(t, tg.url(8080)+tc.path, body)
			if resp.StatusCode != tc.status || !strings.Contains(got, tc.want) {
				t.Fatalf("status %d %s, want %d with %s", resp.StatusCode, got, tc.status, tc.want)
			}
			if tc.path == "/v1/messages" && !strings.HasPrefix(got, `{"type":"error"`) {
				t.Errorf("not in the Anthropic shape: %s", got)
			}
		})
	}
}

// TestLLMPassStreamErrorLogged: a stream passed on in the client's own
// format that ends with the provider's error event (Anthropic's overloaded
// error, an OpenAI error chunk, a Responses error event) reaches the
// client as it came and is recorded as the failure it is, as a translated
// one is: llm.error and upstream_error in the access log, error_type in
// the GenAI duration metric. It used to be recorded as a success.
func TestLLMPassStreamErrorLogged(t *testing.T) {
	boom := &llmtest.Failure{Status: 529, Type: "overloaded_error", Message: "Overloaded"}
	a := llmtest.NewAnthropic(t)
	o := llmtest.NewOpenAI(t)
	for _, tc := range []struct {
		name           string
		emulator       *llmtest.Server
		provider, auth string
		path, body     string
		seen           string // in the client's stream
	}{
		{"anthropic", a.Server, `anthropic: {}`, `backendAuth: {key: ` + a.APIKey + `}`, "/v1/messages",
			`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "event: error"},
		{"openai chat", o.Server, `openAI: {}`, `backendAuth: {key: ` + o.APIKey + `}`, "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"error":{`},
		{"openai responses", o.Server, `openAI: {}`, `backendAuth: {key: ` + o.APIKey + `}`, "/v1/responses",
			`{"model":"m","stream":true,"input":"hi"}`, "event: error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startGateway(t, llmConfig(tc.provider, tc.emulator.Addr(), tc.auth, ""), nil)
			tc.emulator.Enqueue(llmtest.Reply{Chunks: []string{"one ", "two"}, StreamError: boom})
			resp, got := postJSON(t, tg.url(8080)+tc.path, tc.body)
			if resp.StatusCode != 200 || !strings.Contains(got, "Overloaded") || !strings.Contains(got, tc.seen) {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			lines := tg.accessLogs().FilterMessage("request").All()
			if len(lines) != 1 {
				t.Fatalf("%d access lines", len(lines))
			}
			f := lines[0].ContextMap()
			if f["llm.error"] != "stream" || !strings.Contains(fmt.Sprint(f["upstream_error"]), "Overloaded") {
				t.Errorf("llm.error %v, upstream_error %v: want the stream's failure", f["llm.error"], f["upstream_error"])
			}
			fams := scrapeGateway(t, tg.gw)
			if s := seriesOf(fams, "agentgateway_gen_ai_server_request_duration_seconds", map[string]string{"error_type": "stream"}); s == nil || s.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("the failed stream in the duration metric: %v, want once under error_type stream", s)
			}
		})
	}
}
