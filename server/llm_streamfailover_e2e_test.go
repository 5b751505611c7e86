package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// failoverConfig is a route to an ai backend of two groups: first, then
// second, each a provider kind with key k.
func failoverConfig(first, firstKind, second, secondKind string) string {
	return failoverConfigOf(
		`{name: first, hostOverride: "`+first+`", provider: {`+firstKind+`: {}}, policies: {backendAuth: {key: k}}}`,
		`{name: second, hostOverride: "`+second+`", provider: {`+secondKind+`: {}}, policies: {backendAuth: {key: k}}}`)
}

// failoverConfigOf is failoverConfig with the providers' YAML, and more
// of the route's ai policy.
func failoverConfigOf(first, second string, ai ...string) string {
	return `
binds:
- port: 8080
  listeners:
  - routes:
    - name: llm
      policies:
        ai:
          routes: ` + llmRoutes + `
` + indent(strings.Join(ai, "\n"), 10) + `
      backends:
      - ai:
          groups:
          - providers:
            - ` + first + `
          - providers:
            - ` + second + `
`
}

// anthropicThenOpenAI is a gateway whose route fails over from an
// Anthropic emulator to an OpenAI one.
func anthropicThenOpenAI(t *testing.T) (*llmtest.Anthropic, *llmtest.OpenAI, *testGateway) {
	t.Helper()
	a := llmtest.NewAnthropic(t)
	o := llmtest.NewOpenAI(t)
	a.APIKey, o.APIKey = "k", "k"
	return a, o, startGateway(t, failoverConfig(a.Addr(), "anthropic", o.Addr(), "openAI"), nil)
}

// firstFailedOnce checks that the provider named first was asked once and
// is shown unhealthy.
func firstFailedOnce(t *testing.T, first *llmtest.Server, tg *testGateway) {
	t.Helper()
	if n := len(first.Requests()); n != 1 {
		t.Errorf("the first provider got %d requests, want 1", n)
	}
	var m bytes.Buffer
	tg.metrics().WritePrometheus(&m)
	if want := `agentgateway_gen_ai_provider_healthy{backend="llm",provider="first"} 0`; !strings.Contains(m.String(), want) {
		t.Errorf("metrics lack %s", want)
	}
}

// streamText reads a chat stream through the OpenAI SDK (client format
// chat) or the Anthropic SDK (messages), returning its text and error.
func streamText(t *testing.T, tg *testGateway, anthropicClient bool) (string, error) {
	t.Helper()
	var text strings.Builder
	if anthropicClient {
		c := anthropicVia(tg)
		s := c.Messages.NewStreaming(llmCtx(t), messagesRequest("m"))
		for s.Next() {
			if d := s.Current().Delta; d.Text != "" {
				text.WriteString(d.Text)
			}
		}
		return text.String(), s.Err()
	}
	c := openaiVia(tg)
	s := c.Chat.Completions.NewStreaming(llmCtx(t), chatRequest("m"))
	for s.Next() {
		if ch := s.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	return text.String(), s.Err()
}

// TestLLMStreamFailoverBeforeTheAnswer: a provider that answers a stream
// with 200 and then fails before its answer begins (an overloaded error
// event, as Anthropic sends; a stream cut after its first event) has given
// the client nothing, so the next provider answers inside the same client
// request, and the failing one's health drops. Before, the client got the
// 200 and the error event, with no failover at all. A failure after the
// answer began still reaches the client as the stream's error.
func TestLLMStreamFailoverBeforeTheAnswer(t *testing.T) {
	overloaded := &llmtest.Failure{Status: 529, Type: "overloaded_error", Message: "Overloaded"}
	for _, tc := range []struct {
		name  string
		first llmtest.Answer
	}{
		{"error event first", llmtest.Reply{StreamError: overloaded}},
		{"cut after its first event", llmtest.Reply{Text: "never sent", DropAfter: 1}},
	} {
		for _, anthropicClient := range []bool{false, true} {
			name := tc.name + "/openai client"
			if anthropicClient {
				name = tc.name + "/anthropic client"
			}
			t.Run(name, func(t *testing.T) {
				a, o, tg := anthropicThenOpenAI(t)
				a.Enqueue(tc.first)
				o.Enqueue(llmtest.Reply{Text: "from the second"})
				got, err := streamText(t, tg, anthropicClient)
				if err != nil || got != "from the second" {
					t.Fatalf("stream: %q, %v; want the second provider's answer", got, err)
				}
				firstFailedOnce(t, a.Server, tg)
			})
		}
	}

	// Bedrock reports its failures as exceptions in its binary event
	// stream; modelStreamErrorException's status is a 424, but AWS
	// documents it as retryable (it used to end the request there).
	for _, exc := range []llmtest.Failure{
		{Status: 503, Type: "serviceUnavailableException", Message: "busy"},
		{Status: 424, Type: "modelStreamErrorException", Message: "the model's stream failed"},
	} {
		t.Run("bedrock exception first/"+exc.Type, func(t *testing.T) {
			b := llmtest.NewBedrock(t)
			o := llmtest.NewOpenAI(t)
			o.APIKey = "k"
			tg := startGateway(t, failoverConfigOf(
				`{name: first, hostOverride: "`+b.Addr()+`", provider: {bedrock: {region: `+b.Region+`, model: anthropic.claude-3-haiku-20240307-v1:0}}, policies: {backendAuth: {aws: {accessKeyId: `+b.AccessKeyID+`, secretAccessKey: `+b.SecretAccessKey+`}}}}`,
				`{name: second, hostOverride: "`+o.Addr()+`", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}`), nil)
			b.Enqueue(llmtest.Reply{StreamError: &exc})
			o.Enqueue(llmtest.Reply{Text: "from the second"})
			got, err := streamText(t, tg, false)
			if err != nil || got != "from the second" {
				t.Fatalf("stream: %q, %v; want the second provider's answer", got, err)
			}
			if n := len(b.Requests()); n != 1 {
				t.Errorf("bedrock got %d requests, want 1", n)
			}
		})
	}

	// The same over HTTP/2 (h2c), whose streams the gateway serves on
	// its own front end.
	t.Run("h2c client", func(t *testing.T) {
		a, o, tg := anthropicThenOpenAI(t)
		a.Enqueue(llmtest.Reply{StreamError: overloaded})
		o.Enqueue(llmtest.Reply{Text: "from the second"})
		c := openai.NewClient(option.WithBaseURL(tg.url(8080)+"/v1"), option.WithAPIKey("client-key"), option.WithMaxRetries(0), option.WithHTTPClient(h2cClient()))
		s := c.Chat.Completions.NewStreaming(llmCtx(t), chatRequest("m"))
		var text strings.Builder
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		if err := s.Err(); err != nil || text.String() != "from the second" {
			t.Fatalf("h2c stream: %q, %v", text.String(), err)
		}
	})

	// A Responses client in front of two OpenAI providers: the first
	// one's in-band error event comes before any output.
	t.Run("responses client", func(t *testing.T) {
		first := llmtest.NewOpenAI(t)
		second := llmtest.NewOpenAI(t)
		first.APIKey, second.APIKey = "k", "k"
		tg := startGateway(t, failoverConfig(first.Addr(), "openAI", second.Addr(), "openAI"), nil)
		first.Enqueue(llmtest.Reply{StreamError: &llmtest.Failure{Status: 500, Message: "boom"}})
		second.Enqueue(llmtest.Reply{Text: "from the second"})
		got, err := sgResponses.stream(t, tg, "gpt-4o-mini")
		if err != nil || got != "from the second" {
			t.Fatalf("responses stream: %q, %v", got, err)
		}
		firstFailedOnce(t, first.Server, tg)
	})

	t.Run("failure after the answer began", func(t *testing.T) {
		a, o, tg := anthropicThenOpenAI(t)
		a.Enqueue(llmtest.Reply{Chunks: []string{"half "}, StreamError: overloaded})
		got, err := streamText(t, tg, false)
		if got != "half " || err == nil {
			t.Fatalf("stream: %q, %v; want the first provider's start and its error", got, err)
		}
		if n := len(o.Requests()); n != 0 {
			t.Errorf("the second provider got %d requests, want none", n)
		}
	})

	// Every provider fails before its answer: the last one's stream
	// reaches the client as it came (a single provider's does too).
	t.Run("all fail", func(t *testing.T) {
		a := llmtest.NewAnthropic(t)
		b := llmtest.NewAnthropic(t)
		a.APIKey, b.APIKey = "k", "k"
		tg := startGateway(t, failoverConfig(a.Addr(), "anthropic", b.Addr(), "anthropic"), nil)
		a.Enqueue(llmtest.Reply{StreamError: overloaded})
		b.Enqueue(llmtest.Reply{StreamError: &llmtest.Failure{Status: 529, Type: "overloaded_error", Message: "the last one"}})
		_, err := streamText(t, tg, true)
		if err == nil || !strings.Contains(err.Error(), "the last one") {
			t.Fatalf("all failed: %v; want the last provider's error", err)
		}
		if na, nb := len(a.Requests()), len(b.Requests()); na != 1 || nb != 1 {
			t.Errorf("the providers got %d and %d requests, want 1 each", na, nb)
		}
	})

	// An error event that is the request's own (a 4xx) is no provider's
	// failure: no other is asked, and the client gets it as an error
	// answer in its format, since none of the stream reached it.
	t.Run("request error", func(t *testing.T) {
		a, o, tg := anthropicThenOpenAI(t)
		a.Enqueue(llmtest.Reply{StreamError: &llmtest.Failure{Status: 400, Type: "invalid_request_error", Message: "prompt is too long"}})
		_, err := streamText(t, tg, false)
		var oErr *openai.Error
		if !errors.As(err, &oErr) || oErr.StatusCode != 400 || !strings.Contains(oErr.Message, "prompt is too long") || oErr.Type != "invalid_request_error" {
			t.Fatalf("request error: %v; want a 400 invalid_request_error with the provider's message", err)
		}
		if n := len(o.Requests()); n != 0 {
			t.Errorf("the second provider got %d requests, want none", n)
		}
		a.Enqueue(llmtest.Reply{StreamError: &llmtest.Failure{Status: 400, Type: "invalid_request_error", Message: "prompt is too long"}})
		_, err = streamText(t, tg, true)
		var aErr *anthropic.Error
		if !errors.As(err, &aErr) || aErr.StatusCode != 400 || !strings.Contains(aErr.Error(), "invalid_request_error") {
			t.Fatalf("request error, anthropic client: %v", err)
		}
	})

	// A single provider has no other to go to: its stream reaches the
	// client as it came, head first.
	t.Run("single provider", func(t *testing.T) {
		a := llmtest.NewAnthropic(t)
		tg := startGateway(t, llmConfig(`anthropic: {}`, a.Addr(), `backendAuth: {key: `+a.APIKey+`}`, ""), nil)
		a.Enqueue(llmtest.Reply{StreamError: overloaded})
		resp, err := http.Post(tg.url(8080)+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "overloaded_error") {
			t.Fatalf("single provider: %d %q", resp.StatusCode, body)
		}
	})
}

// TestLLMStreamFailoverGuarded: a stream that remote response guards judge
// fails over the same way, and the guards judge the answer of the provider
// that gave it, window by window. A complete stream read whole while it
// was primed (an empty answer) reaches the client whole.
func TestLLMStreamFailoverGuarded(t *testing.T) {
	answer := sgAnswer()
	wh := guardrailtest.NewWebhook(t)
	var calls atomic.Int32
	wh.Configure(func() {
		wh.Judge = func(guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			if calls.Add(1) == 2 {
				return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "not this answer", Status: 451}}
			}
			return guardrailtest.WebhookAction{}
		}
	})
	a := llmtest.NewAnthropic(t)
	o := llmtest.NewOpenAI(t)
	a.APIKey, o.APIKey = "k", "k"
	guard := "promptGuard: {streaming: Enabled, response: [{webhook: {target: {host: " + wh.Addr() + "}}}]}"
	tg := startGateway(t, failoverConfigOf(
		`{name: first, hostOverride: "`+a.Addr()+`", provider: {anthropic: {}}, policies: {backendAuth: {key: k}}}`,
		`{name: second, hostOverride: "`+o.Addr()+`", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}`, guard), nil)

	a.Enqueue(llmtest.Reply{StreamError: &llmtest.Failure{Status: 529, Type: "overloaded_error", Message: "Overloaded"}})
	o.Enqueue(llmtest.Reply{Chunks: answer})
	got, err := sgChat.stream(t, tg, "m")
	sgRejected(t, sgChat, err, "not this answer")
	news := sgNewText(t, sgWindows(t, wh, 0))
	if len(news) != 2 || got != news[0] {
		t.Fatalf("%d windows, the client got %d bytes: want 2 windows and the first one's text", len(news), len(got))
	}

	// (a fresh gateway: the first provider is evicted in this one)
	a2 := llmtest.NewAnthropic(t)
	a2.APIKey = "k"
	tg = startGateway(t, failoverConfigOf(
		`{name: first, hostOverride: "`+a2.Addr()+`", provider: {anthropic: {}}, policies: {backendAuth: {key: k}}}`,
		`{name: second, hostOverride: "`+o.Addr()+`", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}`, guard), nil)
	a2.Enqueue(llmtest.Reply{Text: ""})
	resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"finish_reason":"stop"`) || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("an empty answer: %d %q %v; want it whole", resp.StatusCode, body, err)
	}
	if n := len(o.Requests()); n != 1 {
		t.Errorf("the second provider got %d requests, want 1 (the first answered)", n)
	}
}

// TestLLMStreamPrimeWait: a stream held back for failover goes out once
// primeWait has passed, with the provider's keep-alives, even before the
// answer begins: a client does not wait headless while a model thinks.
func TestLLMStreamPrimeWait(t *testing.T) {
	old := primeWait.Swap(int64(100 * time.Millisecond))
	t.Cleanup(func() { primeWait.Store(old) })

	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	thinker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
		fl.Flush()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	think:
		for {
			select {
			case <-release:
				break think
			case <-r.Context().Done():
				return
			case <-tick.C:
				io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
				fl.Flush()
			}
		}
		io.WriteString(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"thought\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	t.Cleanup(thinker.Close)
	o := llmtest.NewOpenAI(t)
	o.APIKey = "k"
	tg := startGateway(t, failoverConfig(strings.TrimPrefix(thinker.URL, "http://"), "anthropic", o.Addr(), "openAI"), nil)

	type result struct {
		resp *http.Response
		err  error
	}
	head := make(chan result, 1)
	go func() {
		resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		head <- result{resp, err}
	}()
	var r result
	select {
	case r = <-head:
	case <-time.After(5 * time.Second):
		free()
		t.Fatal("no response head while the provider thinks: the stream is held back past primeWait")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	// The keep-alives come through while the model still thinks.
	br := bufio.NewReader(r.resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before the answer: %v", err)
		}
		if strings.HasPrefix(line, ": ping") {
			break
		}
	}
	free()
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), `"content":"thought"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("the answer: %q %v", rest, err)
	}
	if n := len(o.Requests()); n != 0 {
		t.Errorf("the second provider got %d requests, want none", n)
	}
}

// TestLLMStreamPrimeWaitQuiet: a stream held back for failover goes out
// once primeWait has passed also when the provider sends nothing more
// after its head (or after its role chunk, or a keep-alive): the bound is
// a timer, not a check made when the next bytes come. The stream then
// goes on as any stream that answered: its end reaches the client, and so
// does its failure, with no other provider asked.
func TestLLMStreamPrimeWaitQuiet(t *testing.T) {
	old := primeWait.Swap(int64(100 * time.Millisecond))
	t.Cleanup(func() { primeWait.Store(old) })

	const (
		oaiRole = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
		oaiRest = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"late"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n" +
			"data: [DONE]\n\n"
		antStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
	)
	for _, tc := range []struct {
		name, kind string
		prelude    string // what the provider sends before it goes quiet
		before     string // what the client reads of it before the provider goes on
		rest       string // what the provider sends then ("": it cuts the stream)
		want       string // what the client's stream ends with
	}{
		{name: "head only", kind: "openAI", rest: oaiRole + oaiRest, want: "data: [DONE]\n\n"},
		{name: "role chunk", kind: "openAI", prelude: oaiRole, before: `"role":"assistant"`, rest: oaiRest, want: "data: [DONE]\n\n"},
		{name: "keep-alive then cut", kind: "anthropic", prelude: antStart + ": keepalive\n\n", before: ": keepalive", want: `"error"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(free)
			quiet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				io.WriteString(w, tc.prelude)
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				if tc.rest == "" {
					c, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						c.Close()
					}
					return
				}
				io.WriteString(w, tc.rest)
			}))
			t.Cleanup(quiet.Close)
			o := llmtest.NewOpenAI(t)
			o.APIKey = "k"
			tg := startGateway(t, failoverConfig(strings.TrimPrefix(quiet.URL, "http://"), tc.kind, o.Addr(), "openAI"), nil)

			type result struct {
				resp *http.Response
				err  error
			}
			head := make(chan result, 1)
			go func() {
				resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
				head <- result{resp, err}
			}()
			var r result
			select {
			case r = <-head:
			case <-time.After(5 * time.Second):
				free()
				t.Fatal("no response head while the provider is quiet: the stream is held back past primeWait")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.resp.Body.Close()
			if r.resp.StatusCode != 200 {
				t.Fatalf("status %d", r.resp.StatusCode)
			}
			br := bufio.NewReader(r.resp.Body)
			if tc.before != "" {
				// What the provider sent before going quiet came too.
				got := make(chan string, 1)
				go func() {
					var seen strings.Builder
					for {
						line, err := br.ReadString('\n')
						seen.WriteString(line)
						if err != nil || strings.Contains(line, tc.before) {
							got <- seen.String()
							return
						}
					}
				}()
				select {
				case seen := <-got:
					if !strings.Contains(seen, tc.before) {
						t.Fatalf("before the provider went on: %q; want %q", seen, tc.before)
					}
				case <-time.After(5 * time.Second):
					free()
					t.Fatalf("%q held back while the provider is quiet", tc.before)
				}
			}
			free()
			rest, _ := io.ReadAll(br)
			if !strings.Contains(string(rest), tc.want) {
				t.Fatalf("the rest: %q; want %q", rest, tc.want)
			}
			if n := len(o.Requests()); n != 0 {
				t.Errorf("the second provider got %d requests, want none: the first had answered", n)
			}
		})
	}
}

// TestLLMStreamFailoverThenSkipped: when the providers after one whose
// stream failed before its answer are all skipped (their model's
// authorization refuses the request), the failure is the answer, in the
// client's format with the provider's status, not a refusal as if no
// provider had been asked.
func TestLLMStreamFailoverThenSkipped(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	o := llmtest.NewOpenAI(t)
	cfg := `
llm:
  port: 4000
  models:
  - name: first
    visibility: internal
    provider: anthropic
    params: {apiKey: ` + a.APIKey + `, hostOverride: "` + a.Addr() + `"}
  - name: second
    visibility: internal
    provider: openAI
    params: {apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}
    authorization: {rules: ['request.headers["x-tier"] == "gold"']}
  virtualModels:
  - name: best
    routing: {failover: {targets: [{model: first, priority: 0}, {model: second, priority: 1}]}}
`
	tg := startGateway(t, cfg, nil)
	a.Enqueue(llmtest.Reply{StreamError: &llmtest.Failure{Status: 529, Type: "overloaded_error", Message: "Overloaded"}})
	resp, err := http.Post(tg.url(4000)+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"best","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(body), "Overloaded") {
		t.Fatalf("%d %s; want the first provider's 529", resp.StatusCode, body)
	}
	if n := len(o.Requests()); n != 0 {
		t.Errorf("the refused model's provider got %d requests", n)
	}
}

// TestLLMWholeAnswerFailover: a whole (not streamed) answer whose body the
// provider cuts after a 200 head has given the client nothing either: the
// next provider answers, and the first one's health drops. It used to
// answer the client 502 with another provider left to ask.
func TestLLMWholeAnswerFailover(t *testing.T) {
	a, o, tg := anthropicThenOpenAI(t)
	a.Enqueue(llmtest.Reply{Text: strings.Repeat("a long answer ", 2000), DropAfter: 1})
	o.Enqueue(llmtest.Reply{Text: "from the second"})
	c := openaiVia(tg)
	resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("m"))
	if err != nil || resp.Choices[0].Message.Content != "from the second" {
		t.Fatalf("answer: %v %v; want the second provider's", resp, err)
	}
	firstFailedOnce(t, a.Server, tg)
}
