package llmtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

func geminiClient(t *testing.T, g *llmtest.Gemini, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(testContext(t), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: g.BaseURL()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var geminiTools = &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
	Name:       "get_weather",
	Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"city": {Type: genai.TypeString}}},
}}}}}

// checkGeminiAnswer asserts a response with text then one get_weather call.
func checkGeminiAnswer(t *testing.T, text string, calls []*genai.FunctionCall, finish genai.FinishReason, u *genai.GenerateContentResponseUsageMetadata, want llmtest.Usage) {
	t.Helper()
	if text != "It is sunny in Paris." {
		t.Errorf("text %q", text)
	}
	if len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Args["city"] != "Paris" {
		t.Errorf("function calls %+v", calls)
	}
	if finish != genai.FinishReasonStop {
		t.Errorf("finish reason %q", finish)
	}
	if u == nil || u.PromptTokenCount != int32(want.InputTokens) || u.CandidatesTokenCount != int32(want.OutputTokens) ||
		u.TotalTokenCount != int32(want.InputTokens+want.OutputTokens) {
		t.Errorf("usage %+v", u)
	}
}

// partsText is the text of a response's first candidate (genai's Text logs
// a warning when there are function calls too).
func partsText(r *genai.GenerateContentResponse) string {
	var b strings.Builder
	for _, p := range r.Candidates[0].Content.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// strictDecode decodes an emulator's JSON into a genai type, refusing
// members the type does not declare (genai's own decoding drops them).
func strictDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("%T: %v in %s", v, err, data)
	}
}

func TestGeminiGenerateContent(t *testing.T) {
	t.Parallel()
	g := llmtest.NewGemini(t)
	u := llmtest.Usage{InputTokens: 18, OutputTokens: 11}
	reply := llmtest.Reply{Text: "It is sunny in Paris.", ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: u}
	g.Enqueue(reply, reply)
	c := geminiClient(t, g, g.APIKey)
	resp, err := c.Models.GenerateContent(testContext(t), "gemini-2.5-flash", genai.Text("Weather in Paris?"), geminiTools)
	if err != nil {
		t.Fatal(err)
	}
	checkGeminiAnswer(t, partsText(resp), resp.FunctionCalls(), resp.Candidates[0].FinishReason, resp.UsageMetadata, u)
	if resp.ModelVersion != "gemini-2.5-flash" || resp.ResponseID == "" || resp.Candidates[0].Content.Role != "model" {
		t.Errorf("model version %q, response id %q, role %q", resp.ModelVersion, resp.ResponseID, resp.Candidates[0].Content.Role)
	}
	r := g.Last()
	checkRecorded(t, r, "POST", "/v1beta/models/gemini-2.5-flash:generateContent")
	if r.Header.Get("x-goog-api-key") != g.APIKey || r.Model != "gemini-2.5-flash" || r.Op != "generateContent" || r.Stream {
		t.Errorf("key %q model %q op %q stream %v", r.Header.Get("x-goog-api-key"), r.Model, r.Op, r.Stream)
	}

	// The same answer, raw, against genai's types.
	req, _ := http.NewRequest("POST", g.URL+"/v1beta/models/gemini-2.5-flash:generateContent", bytes.NewReader(r.Body))
	req.Header.Set("x-goog-api-key", g.APIKey)
	raw, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(raw.Body)
	_ = raw.Body.Close()
	strictDecode(t, body, new(genai.GenerateContentResponse))
}

func TestGeminiStreamGenerateContent(t *testing.T) {
	t.Parallel()
	g := llmtest.NewGemini(t)
	u := llmtest.Usage{InputTokens: 18, OutputTokens: 11}
	g.Enqueue(llmtest.Reply{Text: "It is sunny in Paris.", ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: u})
	c := geminiClient(t, g, g.APIKey)
	var text strings.Builder
	var calls []*genai.FunctionCall
	var last *genai.GenerateContentResponse
	n := 0
	for resp, err := range c.Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("Weather in Paris?"), geminiTools) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		text.WriteString(partsText(resp))
		calls = append(calls, resp.FunctionCalls()...)
		last = resp
	}
	if n != 5 {
		t.Errorf("%d chunks", n)
	}
	checkGeminiAnswer(t, text.String(), calls, last.Candidates[0].FinishReason, last.UsageMetadata, u)
	r := g.Last()
	checkRecorded(t, r, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent")
	if r.Query.Get("alt") != "sse" || !r.Stream || r.Op != "streamGenerateContent" {
		t.Errorf("query %v stream %v op %q", r.Query, r.Stream, r.Op)
	}
}

func TestGeminiCountTokens(t *testing.T) {
	t.Parallel()
	g := llmtest.NewGemini(t)
	g.Enqueue(llmtest.Reply{Usage: llmtest.Usage{InputTokens: 31}})
	c := geminiClient(t, g, g.APIKey)
	resp, err := c.Models.CountTokens(testContext(t), "gemini-2.5-flash", genai.Text("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.TotalTokens != 31 {
		t.Errorf("total tokens %d", resp.TotalTokens)
	}
	checkRecorded(t, g.Last(), "POST", "/v1beta/models/gemini-2.5-flash:countTokens")
}

func TestGeminiRefusesWrongKey(t *testing.T) {
	t.Parallel()
	g := llmtest.NewGemini(t)
	c := geminiClient(t, g, "AIzaWrong")
	_, err := c.Models.GenerateContent(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || apiErr.Status != "INVALID_ARGUMENT" ||
		len(apiErr.Details) != 1 || apiErr.Details[0]["reason"] != "API_KEY_INVALID" {
		t.Fatalf("err %#v", err)
	}
	if g.Last().AuthError == "" {
		t.Error("refusal not recorded")
	}
}

// TestGeminiThoughtSignatures: with RequireThoughtSignatures the emulator
// refuses, as Gemini 3 models do, a history whose function call of the
// current turn lacks the thoughtSignature it was given, or carries one it
// did not give; genai's history, which keeps it, is served.
func TestGeminiThoughtSignatures(t *testing.T) {
	t.Parallel()
	g := llmtest.NewGemini(t)
	g.RequireThoughtSignatures()
	const sig = "U0lHLU9ORQ=="
	g.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{
		{Name: "get_weather", Arguments: `{"city":"Paris"}`, ThoughtSignature: sig},
		{Name: "get_weather", Arguments: `{"city":"Oslo"}`},
	}})
	g.SetDefault(llmtest.Reply{Text: "Sunny in both."})
	c := geminiClient(t, g, g.APIKey)
	ask := genai.NewContentFromText("Weather in Paris and Oslo?", genai.RoleUser)
	resp, err := c.Models.GenerateContent(testContext(t), "gemini-3-flash-preview", []*genai.Content{ask}, geminiTools)
	if err != nil {
		t.Fatal(err)
	}
	answer := resp.Candidates[0].Content
	if len(answer.Parts) != 2 || string(answer.Parts[0].ThoughtSignature) != "SIG-ONE" || answer.Parts[1].ThoughtSignature != nil {
		t.Fatalf("parts %+v", answer.Parts)
	}
	results := genai.NewContentFromParts([]*genai.Part{
		genai.NewPartFromFunctionResponse("get_weather", map[string]any{"content": "sunny"}),
		genai.NewPartFromFunctionResponse("get_weather", map[string]any{"content": "sunny"}),
	}, genai.RoleUser)
	history := func(first []byte) []*genai.Content {
		call := *answer.Parts[0]
		call.ThoughtSignature = first
		model := &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{&call, answer.Parts[1]}}
		return []*genai.Content{ask, model, results}
	}
	if _, err := c.Models.GenerateContent(testContext(t), "gemini-3-flash-preview", history(answer.Parts[0].ThoughtSignature), geminiTools); err != nil {
		t.Fatalf("history with the signature: %v", err)
	}
	for _, tc := range []struct {
		desc string
		sig  []byte
		want string
	}{
		{"without the signature", nil, "Function call is missing a thought_signature in functionCall parts"},
		{"with another signature", []byte("forged"), "Corrupted thought signature"},
	} {
		_, err := c.Models.GenerateContent(testContext(t), "gemini-3-flash-preview", history(tc.sig), geminiTools)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || !strings.Contains(apiErr.Message, tc.want) {
			t.Errorf("%s: %v, want a 400 saying %q", tc.desc, err, tc.want)
		}
	}
}
