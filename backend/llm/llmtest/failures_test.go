package llmtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"google.golang.org/genai"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

func TestOpenAIRateLimitAndRetry(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(
		llmtest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "7"},
		llmtest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "0"},
		llmtest.Reply{Text: "after the retry"},
	)
	c := openaiClient(o)
	_, err := c.Chat.Completions.New(testContext(t), chatParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "rate_limit_exceeded" ||
		apiErr.Type != "requests" || apiErr.Response.Header.Get("Retry-After") != "7" {
		t.Fatalf("err %v", err)
	}
	// The SDK's own retry honours Retry-After: 0 and gets the reply.
	resp, err := c.Chat.Completions.New(testContext(t), chatParams(), option.WithMaxRetries(1))
	if err != nil || resp.Choices[0].Message.Content != "after the retry" {
		t.Fatalf("retried: %v", err)
	}
	if n := len(o.Requests()); n != 3 {
		t.Errorf("%d requests", n)
	}
}

func TestOpenAIServerErrorAndInStreamError(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(
		llmtest.Failure{Status: http.StatusInternalServerError},
		llmtest.Reply{Chunks: []string{"partial "}, StreamError: &llmtest.Failure{Message: "boom"}},
	)
	c := openaiClient(o)
	_, err := c.Chat.Completions.New(testContext(t), chatParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || apiErr.Type != "server_error" {
		t.Fatalf("500: %v", err)
	}
	stream := c.Chat.Completions.NewStreaming(testContext(t), chatParams())
	var text string
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text += ch.Delta.Content
		}
	}
	var se *ssestream.StreamError
	if !errors.As(stream.Err(), &se) || !strings.Contains(se.Message, "boom") || text != "partial " {
		t.Errorf("in-stream error %v after %q", stream.Err(), text)
	}
}

func TestDroppedConnections(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(
		llmtest.Reply{Text: "one two three four", DropAfter: 3}, // role + two deltas, then cut
		llmtest.Reply{Text: "cut in the body", DropAfter: 1},
		llmtest.Failure{Reset: true},
	)
	c := openaiClient(o)
	stream := c.Chat.Completions.NewStreaming(testContext(t), chatParams())
	var text string
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text += ch.Delta.Content
		}
	}
	if !errors.Is(stream.Err(), io.ErrUnexpectedEOF) || text != "one two " {
		t.Errorf("dropped stream: %v after %q", stream.Err(), text)
	}
	if _, err := c.Chat.Completions.New(testContext(t), chatParams()); err == nil {
		t.Error("a body cut in half parsed")
	}
	if _, err := c.Chat.Completions.New(testContext(t), chatParams()); err == nil {
		t.Error("a reset connection answered")
	}
	if n := len(o.Requests()); n != 3 {
		t.Errorf("%d requests", n)
	}

	// Bedrock's event stream, cut after messageStart and one delta.
	b := llmtest.NewBedrock(t)
	b.Enqueue(llmtest.Reply{Text: "one two three", DropAfter: 2})
	bc := bedrockClient(b, b.AccessKeyID, b.SecretAccessKey)
	out, err := bc.ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(bedrockModel), Messages: converseInput().Messages})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for ev := range out.GetStream().Events() {
		kinds = append(kinds, fmt.Sprintf("%T", ev))
	}
	// The SDK ends the stream quietly on a truncated body (its event stream
	// codec counts io.ErrUnexpectedEOF as the end): the cut shows as a
	// stream without messageStop and metadata.
	if len(kinds) != 2 || !strings.HasSuffix(kinds[1], "ContentBlockDelta") {
		t.Errorf("dropped event stream: events %v, err %v", kinds, out.GetStream().Err())
	}
	// Raw, the body ends unexpectedly.
	b.APIKey = "bedrock-api-key"
	b.Enqueue(llmtest.Reply{Text: "one two three", DropAfter: 2})
	req, _ := http.NewRequest("POST", b.URL+"/model/m/converse-stream", strings.NewReader(`{"messages":[]}`))
	req.Header.Set("Authorization", "Bearer bedrock-api-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("raw dropped event stream: %v", err)
	}
}

func TestRefusedConnections(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	c := openaiClient(o)
	if _, err := c.Chat.Completions.New(testContext(t), chatParams()); err != nil {
		t.Fatal(err)
	}
	o.Refuse()
	// A fresh transport: the old one may still hold the connection Refuse
	// closed, and would see that close instead of a refusal.
	c = openaiClient(o, option.WithHTTPClient(&http.Client{Transport: &http.Transport{}}))
	_, err := c.Chat.Completions.New(testContext(t), chatParams())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after Refuse: %v", err)
	}
	c = openai.NewClient(option.WithBaseURL(llmtest.RefusedURL(t)+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	if _, err := c.Chat.Completions.New(testContext(t), chatParams()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("RefusedURL: %v", err)
	}
}

func TestSlowFirstByteAndHold(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAnthropic(t)
	a.Enqueue(llmtest.Reply{Text: "late", Delay: time.Minute})
	c := anthropicClient(a)
	start := time.Now()
	_, err := c.Messages.New(testContext(t), messageParams(), aoption.WithRequestTimeout(150*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("slow first byte: %v after %v", err, time.Since(start))
	}

	// Hold: the request is recorded and waits until released.
	release := a.Hold()
	done := make(chan error, 1)
	go func() {
		_, err := c.Messages.New(context.Background(), messageParams())
		done <- err
	}()
	a.WaitRequests(2, 10*time.Second)
	select {
	case err := <-done:
		t.Fatalf("answered while held: %v", err)
	default:
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after release")
	}
}

func TestAnthropicOverloadedAndInStreamError(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAnthropic(t)
	a.Enqueue(
		llmtest.Failure{Status: 529},
		llmtest.Reply{Text: "partial answer", StreamError: &llmtest.Failure{Status: 529}},
	)
	c := anthropicClient(a)
	_, err := c.Messages.New(testContext(t), messageParams())
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" {
		t.Fatalf("529: %v", err)
	}
	stream := c.Messages.NewStreaming(testContext(t), messageParams())
	var m anthropic.Message
	for stream.Next() {
		_ = m.Accumulate(stream.Current())
	}
	if !errors.As(stream.Err(), &apiErr) || apiErr.Type() != "overloaded_error" || m.Content[0].Text != "partial answer" {
		t.Errorf("in-stream error %v after %+v", stream.Err(), m.Content)
	}
}

func TestGeminiFailures(t *testing.T) {
	t.Parallel()
	g := llmtest.NewGemini(t)
	g.Enqueue(
		llmtest.Failure{Status: http.StatusTooManyRequests},
		llmtest.Reply{Chunks: []string{"par", "tial"}, StreamError: &llmtest.Failure{Status: http.StatusServiceUnavailable}},
	)
	c := geminiClient(t, g, g.APIKey)
	_, err := c.Models.GenerateContent(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("429: %v", err)
	}
	var text string
	var streamErr error
	for resp, err := range c.Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			streamErr = err
			break
		}
		text += resp.Text()
	}
	if !errors.As(streamErr, &apiErr) || apiErr.Status != "UNAVAILABLE" || text != "partial" {
		t.Errorf("in-stream error %v after %q", streamErr, text)
	}
}

// genai always asks for SSE (alt=sse); without it Gemini streams one JSON
// array, checked here raw.
func TestGeminiStreamAsJSONArray(t *testing.T) {
	t.Parallel()
	g := llmtest.NewGemini(t)
	g.Enqueue(llmtest.Reply{Chunks: []string{"a ", "b"}})
	req, _ := http.NewRequest("POST", g.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	req.Header.Set("x-goog-api-key", g.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var chunks []genai.GenerateContentResponse
	strictDecode(t, body, &chunks)
	if len(chunks) != 2 || chunks[1].Candidates[0].FinishReason != genai.FinishReasonStop || chunks[0].Candidates[0].Content.Parts[0].Text != "a " {
		t.Errorf("chunks %s", body)
	}
}

func TestBedrockThrottlingAndStreamException(t *testing.T) {
	t.Parallel()
	b := llmtest.NewBedrock(t)
	b.Enqueue(
		llmtest.Failure{Status: http.StatusTooManyRequests},
		llmtest.Reply{Text: "partial", StreamError: &llmtest.Failure{Status: http.StatusFailedDependency, Message: "model failed"}},
	)
	c := bedrockClient(b, b.AccessKeyID, b.SecretAccessKey)
	_, err := c.Converse(testContext(t), converseInput())
	var te *types.ThrottlingException
	if !errors.As(err, &te) || aws.ToString(te.Message) != "Too many requests, please wait before trying again." {
		t.Fatalf("429: %v", err)
	}
	out, err := c.ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(bedrockModel), Messages: converseInput().Messages})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for ev := range out.GetStream().Events() {
		if d, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta); ok {
			text += d.Value.Delta.(*types.ContentBlockDeltaMemberText).Value
		}
	}
	var me *types.ModelStreamErrorException
	if !errors.As(out.GetStream().Err(), &me) || aws.ToString(me.Message) != "model failed" || text != "partial" {
		t.Errorf("stream exception %v after %q", out.GetStream().Err(), text)
	}
}

func TestAzureAndVertexErrorShapes(t *testing.T) {
	t.Parallel()
	az := llmtest.NewAzure(t)
	az.Enqueue(llmtest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "3"})
	c := azureClient(az)
	_, err := c.Chat.Completions.New(testContext(t), chatParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "429" || !strings.Contains(apiErr.Message, "rate limit") {
		t.Errorf("azure 429: %v", err)
	}

	v := llmtest.NewVertex(t)
	v.Enqueue(llmtest.Failure{Status: 529}, llmtest.Failure{Status: http.StatusTooManyRequests})
	vc := vertexAnthropicClient(t, v)
	_, err = vc.Messages.New(testContext(t), messageParams())
	var aErr *anthropic.Error
	if !errors.As(err, &aErr) || aErr.StatusCode != 529 || aErr.Type() != "overloaded_error" {
		t.Errorf("vertex claude 529: %v", err)
	}
	_, err = vc.Messages.New(testContext(t), messageParams())
	var body map[string]map[string]any
	if !errors.As(err, &aErr) || aErr.StatusCode != 429 || json.Unmarshal([]byte(aErr.RawJSON()), &body) != nil || body["error"]["status"] != "RESOURCE_EXHAUSTED" {
		t.Errorf("vertex quota 429: %v", err)
	}
}

// Failure.Body replaces the provider-format error body as is.
func TestRawFailureBody(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(llmtest.Failure{Status: http.StatusBadGateway, Body: "<html>bad gateway</html>", Header: http.Header{"Content-Type": {"text/html"}}})
	req, _ := http.NewRequest("POST", o.BaseURL()+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer "+o.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !bytes.Equal(body, []byte("<html>bad gateway</html>")) || resp.Header.Get("Content-Type") != "text/html" {
		t.Errorf("%d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
