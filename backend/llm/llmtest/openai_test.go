package llmtest_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

func openaiClient(o *llmtest.OpenAI, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(o.BaseURL()), option.WithAPIKey(o.APIKey), option.WithMaxRetries(0),
	}, opts...)...)
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:       "get_weather",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
})

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the capital of France?")},
	}
}

// checkBearer asserts the request's path and OpenAI-style authentication.
func checkRecorded(t *testing.T, r llmtest.Request, method, path string) {
	t.Helper()
	if r.Method != method || r.Path != path {
		t.Errorf("recorded %s %s, want %s %s", r.Method, r.Path, method, path)
	}
	if r.AuthError != "" {
		t.Errorf("credentials refused: %s", r.AuthError)
	}
}

func TestOpenAIChat(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(llmtest.Reply{Text: "Paris.", Usage: llmtest.Usage{InputTokens: 21, OutputTokens: 2, CachedInputTokens: 8}})
	c := openaiClient(o)
	resp, err := c.Chat.Completions.New(testContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "chat.completion", resp)
	ch := resp.Choices[0]
	if ch.Message.Content != "Paris." || ch.FinishReason != "stop" || resp.Model != "gpt-4o-mini" || resp.Object != "chat.completion" {
		t.Errorf("answer %q, finish %q, model %q, object %q", ch.Message.Content, ch.FinishReason, resp.Model, resp.Object)
	}
	u := resp.Usage
	if u.PromptTokens != 21 || u.CompletionTokens != 2 || u.TotalTokens != 23 || u.PromptTokensDetails.CachedTokens != 8 {
		t.Errorf("usage %+v", u)
	}
	r := o.Last()
	checkRecorded(t, r, "POST", "/v1/chat/completions")
	if got := r.Header.Get("Authorization"); got != "Bearer "+o.APIKey {
		t.Errorf("Authorization %q", got)
	}
	if r.Op != "chat.completions" || r.Model != "gpt-4o-mini" || r.Stream {
		t.Errorf("recorded op %q model %q stream %v", r.Op, r.Model, r.Stream)
	}
}

func TestOpenAIChatToolCall(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}})
	p := chatParams()
	p.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
	c := openaiClient(o)
	resp, err := c.Chat.Completions.New(testContext(t), p)
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "chat.completion", resp)
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("finish %q, tool calls %+v", ch.FinishReason, ch.Message.ToolCalls)
	}
	tc := ch.Message.ToolCalls[0].AsFunction()
	if tc.ID != "call_1" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("tool call %+v", tc)
	}
	if !ch.Message.JSON.Content.Valid() && ch.Message.Content != "" {
		t.Errorf("content %q", ch.Message.Content)
	}
	if tools, _ := o.Last().JSON()["tools"].([]any); len(tools) != 1 {
		t.Errorf("recorded tools %v", tools)
	}
}

func TestOpenAIChatStreamWithUsage(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(llmtest.Reply{Chunks: []string{"The capital ", "is ", "Paris."}, Usage: llmtest.Usage{InputTokens: 14, OutputTokens: 5}})
	p := chatParams()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	c := openaiClient(o)
	stream := c.Chat.Completions.NewStreaming(testContext(t), p)
	var acc openai.ChatCompletionAccumulator
	var chunks, usageChunks int
	for stream.Next() {
		chunk := stream.Current()
		noUnknownFields(t, "chat.completion.chunk", chunk)
		if chunk.Object != "chat.completion.chunk" {
			t.Errorf("object %q", chunk.Object)
		}
		if chunk.JSON.Usage.Valid() {
			usageChunks++
			if len(chunk.Choices) != 0 {
				t.Errorf("usage chunk has choices")
			}
		}
		chunks++
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator refused chunk %d", chunks)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "The capital is Paris." || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("accumulated %q finish %q", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason)
	}
	if usageChunks != 1 || acc.Usage.PromptTokens != 14 || acc.Usage.CompletionTokens != 5 || acc.Usage.TotalTokens != 19 {
		t.Errorf("%d usage chunks, usage %+v", usageChunks, acc.Usage)
	}
	// role, 3 deltas, finish, usage
	if chunks != 6 {
		t.Errorf("%d chunks", chunks)
	}
	r := o.Last()
	checkRecorded(t, r, "POST", "/v1/chat/completions")
	if !r.Stream {
		t.Error("recorded as not streamed")
	}
}

func TestOpenAIChatStreamToolCallWithoutUsage(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{
		{Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`},
		{Name: "get_time", Arguments: `{"tz":"Europe/Paris"}`},
	}})
	c := openaiClient(o)
	stream := c.Chat.Completions.NewStreaming(testContext(t), chatParams())
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			t.Error("usage chunk without include_usage")
		}
		acc.AddChunk(chunk)
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	msg := acc.Choices[0].Message
	if acc.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 2 {
		t.Fatalf("finish %q, calls %+v", acc.Choices[0].FinishReason, msg.ToolCalls)
	}
	if f := msg.ToolCalls[0].Function; f.Name != "get_weather" || f.Arguments != `{"city":"Paris","unit":"celsius"}` {
		t.Errorf("first call %+v", f)
	}
	if f := msg.ToolCalls[1].Function; f.Name != "get_time" || f.Arguments != `{"tz":"Europe/Paris"}` {
		t.Errorf("second call %+v", f)
	}
	if len(finished) != 2 || finished[0].ID == "" || finished[0].ID == finished[1].ID {
		t.Errorf("finished tool calls %+v", finished)
	}
}

// responseStore is a member of OpenAI's response object (its API reference
// example has it) that openai-go does not declare.
const responseStore = "store"

func TestOpenAIResponses(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(
		llmtest.Reply{Text: "Paris.", Usage: llmtest.Usage{InputTokens: 30, OutputTokens: 3, CachedInputTokens: 2}},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_9", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
	)
	c := openaiClient(o)
	params := responses.ResponseNewParams{
		Model:        "gpt-4.1",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Capital of France?")},
	}
	resp, err := c.Responses.New(testContext(t), params)
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "response", resp, responseStore)
	if resp.OutputText() != "Paris." || resp.Status != "completed" || resp.Model != "gpt-4.1" || resp.Instructions.OfString != "Be brief." {
		t.Errorf("text %q status %q model %q instructions %+v", resp.OutputText(), resp.Status, resp.Model, resp.Instructions)
	}
	if u := resp.Usage; u.InputTokens != 30 || u.OutputTokens != 3 || u.TotalTokens != 33 || u.InputTokensDetails.CachedTokens != 2 {
		t.Errorf("usage %+v", u)
	}
	checkRecorded(t, o.Last(), "POST", "/v1/responses")

	resp, err = c.Responses.New(testContext(t), params)
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "response", resp, responseStore)
	if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" {
		t.Fatalf("output %+v", resp.Output)
	}
	fc := resp.Output[0].AsFunctionCall()
	if fc.CallID != "call_9" || fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris"}` {
		t.Errorf("function call %+v", fc)
	}
}

func TestOpenAIResponsesStream(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	o.Enqueue(llmtest.Reply{Text: "Paris is the capital.", ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		Usage: llmtest.Usage{InputTokens: 9, OutputTokens: 7}})
	c := openaiClient(o)
	stream := c.Responses.NewStreaming(testContext(t), responses.ResponseNewParams{
		Model: "gpt-4.1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Capital of France?")},
	})
	var text, args string
	var types []string
	var final responses.Response
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		noUnknownFields(t, ev.Type, ev, responseStore)
		if ev.SequenceNumber != seq {
			t.Errorf("%s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.AsResponseOutputTextDelta().Delta
		case "response.function_call_arguments.delta":
			args += ev.AsResponseFunctionCallArgumentsDelta().Delta
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "Paris is the capital." || args != `{"city":"Paris"}` {
		t.Errorf("streamed text %q args %q", text, args)
	}
	if types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Errorf("event types %v", types)
	}
	if final.OutputText() != "Paris is the capital." || final.Usage.TotalTokens != 16 || len(final.Output) != 2 {
		t.Errorf("final response %q usage %+v, %d items", final.OutputText(), final.Usage, len(final.Output))
	}
}

func TestOpenAIEmbeddings(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	c := openaiClient(o)
	params := openai.EmbeddingNewParams{
		Model:      "text-embedding-3-small",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first", "second"}},
		Dimensions: openai.Int(16),
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatFloat
	floats, err := c.Embeddings.New(testContext(t), params)
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "embeddings", floats)
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	b64, err := c.Embeddings.New(testContext(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(floats.Data) != 2 || len(b64.Data) != 2 || floats.Model != "text-embedding-3-small" || floats.Usage.PromptTokens != int64(llmtest.DefaultUsage.InputTokens) {
		t.Fatalf("float %+v, base64 %+v", floats, b64)
	}
	for i := range floats.Data {
		if len(floats.Data[i].Embedding) != 16 || !slices.Equal(floats.Data[i].Embedding, b64.Data[i].Embedding) || floats.Data[i].Index != int64(i) {
			t.Errorf("input %d: float %v, base64 %v", i, floats.Data[i].Embedding, b64.Data[i].Embedding)
		}
	}
	if slices.Equal(floats.Data[0].Embedding, floats.Data[1].Embedding) {
		t.Error("different inputs got the same vector")
	}
	if raw := b64.Data[0].JSON.Embedding.Raw(); raw[0] != '"' {
		t.Errorf("base64 answer is %.20s", raw)
	}
	reqs := o.Requests()
	checkRecorded(t, reqs[1], "POST", "/v1/embeddings")
	if reqs[1].JSON()["encoding_format"] != "base64" {
		t.Errorf("recorded body %s", reqs[1].Body)
	}
}

func TestOpenAIModels(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	c := openaiClient(o)
	page, err := c.Models.List(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		noUnknownFields(t, "model", m)
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, o.Models) {
		t.Errorf("listed %v", ids)
	}
	m, err := c.Models.Get(testContext(t), "gpt-4.1")
	if err != nil || m.ID != "gpt-4.1" || m.OwnedBy != "system" {
		t.Errorf("get: %+v, %v", m, err)
	}
	_, err = c.Models.Get(testContext(t), "gpt-nope")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}
	checkRecorded(t, o.Requests()[0], "GET", "/v1/models")
}

func TestOpenAIRefusesWrongKey(t *testing.T) {
	t.Parallel()
	o := llmtest.NewOpenAI(t)
	c := openai.NewClient(option.WithBaseURL(o.BaseURL()), option.WithAPIKey("sk-wrong-key-123456"), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(testContext(t), chatParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" || apiErr.Type != "invalid_request_error" {
		t.Fatalf("err %v", err)
	}
	if r := o.Last(); r.AuthError == "" {
		t.Error("refusal not recorded")
	}
}

func azureClient(a *llmtest.Azure) openai.Client {
	return openai.NewClient(
		azure.WithEndpoint(a.Endpoint(), "2024-10-21"),
		azure.WithAPIKey(a.APIKey),
		azure.WithUnsafeAllowHTTP(), // the emulator is plain HTTP on loopback
		option.WithMaxRetries(0),
	)
}

func TestAzureDeploymentChat(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAzure(t)
	a.Enqueue(
		llmtest.Reply{Text: "Paris.", Model: "gpt-4o-2024-08-06", Usage: llmtest.Usage{InputTokens: 11, OutputTokens: 2}},
		llmtest.Reply{Chunks: []string{"Par", "is."}, ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			Usage: llmtest.Usage{InputTokens: 11, OutputTokens: 9}},
	)
	c := azureClient(a)
	resp, err := c.Chat.Completions.New(testContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Paris." || resp.Choices[0].FinishReason != "stop" || resp.Model != "gpt-4o-2024-08-06" || resp.Usage.TotalTokens != 13 {
		t.Errorf("answer %+v", resp)
	}
	if _, ok := resp.JSON.ExtraFields["prompt_filter_results"]; !ok {
		t.Error("no prompt_filter_results")
	}
	r := a.Last()
	checkRecorded(t, r, "POST", "/openai/deployments/gpt-4o-mini/chat/completions")
	if r.Query.Get("api-version") != "2024-10-21" || r.Header.Get("Api-Key") != a.APIKey || r.Header.Get("Authorization") != "" {
		t.Errorf("query %v, api-key %q, authorization %q", r.Query, r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
	}
	if r.Deployment != "gpt-4o-mini" {
		t.Errorf("deployment %q", r.Deployment)
	}

	p := chatParams()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(testContext(t), p)
	var acc openai.ChatCompletionAccumulator
	first := true
	for stream.Next() {
		chunk := stream.Current()
		if first && (len(chunk.Choices) != 0 || chunk.JSON.ExtraFields["prompt_filter_results"].Raw() == "") {
			t.Errorf("first chunk %s is not Azure's prompt filter chunk", chunk.RawJSON())
		}
		first = false
		acc.AddChunk(chunk)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if m := acc.Choices[0].Message; m.Content != "Paris." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` ||
		acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.CompletionTokens != 9 {
		t.Errorf("accumulated %+v, usage %+v", acc.Choices[0], acc.Usage)
	}
}

func TestAzureEmbeddingsDeployment(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAzure(t)
	c := azureClient(a)
	resp, err := c.Embeddings.New(testContext(t), openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 1 || len(resp.Data[0].Embedding) != 8 {
		t.Errorf("embeddings %+v", resp.Data)
	}
	checkRecorded(t, a.Last(), "POST", "/openai/deployments/text-embedding-3-small/embeddings")
}

// The v1 API is reached with the plain OpenAI client (Azure's documented
// way): its base URL and the key in api-key.
func TestAzureV1Chat(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAzure(t)
	a.Enqueue(llmtest.Reply{Text: "Paris.", Usage: llmtest.Usage{InputTokens: 4, OutputTokens: 2}})
	c := openai.NewClient(option.WithBaseURL(a.V1BaseURL()+"/"), option.WithHeader("api-key", a.APIKey), option.WithMaxRetries(0))
	resp, err := c.Chat.Completions.New(testContext(t), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Paris." || resp.Usage.TotalTokens != 6 {
		t.Errorf("answer %+v", resp)
	}
	r := a.Last()
	checkRecorded(t, r, "POST", "/openai/v1/chat/completions")
	if r.Header.Get("api-key") != a.APIKey || r.Model != "gpt-4o-mini" {
		t.Errorf("api-key %q, model %q", r.Header.Get("api-key"), r.Model)
	}

	// The key as a bearer token (OpenAI's client as it is), and an Entra ID
	// token once one is configured.
	a.EntraToken = "entra-access-token"
	for _, key := range []string{a.APIKey, a.EntraToken} {
		c := openai.NewClient(option.WithBaseURL(a.V1BaseURL()+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		if _, err := c.Chat.Completions.New(testContext(t), chatParams()); err != nil {
			t.Errorf("bearer %q: %v", key, err)
		}
	}
}

func TestAzureRefusals(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAzure(t)
	c := openai.NewClient(azure.WithEndpoint(a.Endpoint(), "2024-10-21"), azure.WithAPIKey("wrong"), azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(testContext(t), chatParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "401" {
		t.Fatalf("wrong key: %v", err)
	}
	// A deployment path without api-version is not found, as on Azure.
	req, _ := http.NewRequest("POST", a.URL+"/openai/deployments/gpt-4o-mini/chat/completions", nil)
	req.Header.Set("api-key", a.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("no api-version: %d", resp.StatusCode)
	}
}
