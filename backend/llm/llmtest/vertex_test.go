package llmtest_test

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth/credentials"
	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/vertex"
	"github.com/golang-jwt/jwt/v5"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"golang.org/x/oauth2/google"
	"google.golang.org/genai"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// checkVertexAuth asserts that a request carried a token the emulator
// issued through its token endpoint.
func checkVertexAuth(t *testing.T, v *llmtest.Vertex, r llmtest.Request) {
	t.Helper()
	grants := v.TokenRequests()
	if len(grants) == 0 {
		t.Fatal("no token request")
	}
	g := grants[0]
	if g.Path != "/token" || g.AuthError != "" || !strings.Contains(string(g.Body), "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer") {
		t.Errorf("token request %s %s (%s): %s", g.Method, g.Path, g.AuthError, g.Body)
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ya29.emu-"); !ok || tok == "" {
		t.Errorf("Authorization %q", r.Header.Get("Authorization"))
	}
}

func TestVertexGeminiWithGenai(t *testing.T) {
	t.Parallel()
	v := llmtest.NewVertex(t)
	u := llmtest.Usage{InputTokens: 18, OutputTokens: 11}
	reply := llmtest.Reply{Text: "It is sunny in Paris.", ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: u}
	v.Enqueue(reply, reply)
	creds, err := credentials.DetectDefault(&credentials.DetectOptions{
		CredentialsFile: v.ServiceAccountFile(),
		Scopes:          []string{llmtest.CloudPlatformScope},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := genai.NewClient(testContext(t), &genai.ClientConfig{
		Backend:     genai.BackendVertexAI,
		Project:     v.Project,
		Location:    v.Location,
		Credentials: creds,
		HTTPOptions: genai.HTTPOptions{BaseURL: v.BaseURL(), APIVersion: "v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Models.GenerateContent(testContext(t), "gemini-2.5-flash", genai.Text("Weather in Paris?"), geminiTools)
	if err != nil {
		t.Fatal(err)
	}
	checkGeminiAnswer(t, partsText(resp), resp.FunctionCalls(), resp.Candidates[0].FinishReason, resp.UsageMetadata, u)
	if resp.UsageMetadata.TrafficType != genai.TrafficTypeOnDemand || resp.CreateTime.IsZero() {
		t.Errorf("traffic type %q, create time %v", resp.UsageMetadata.TrafficType, resp.CreateTime)
	}
	r := v.Last()
	checkRecorded(t, r, "POST", "/v1/projects/emulated-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent")
	checkVertexAuth(t, v, r)

	var text strings.Builder
	var calls []*genai.FunctionCall
	var last *genai.GenerateContentResponse
	for resp, err := range c.Models.GenerateContentStream(testContext(t), "gemini-2.5-flash", genai.Text("Weather in Paris?"), geminiTools) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(partsText(resp))
		calls = append(calls, resp.FunctionCalls()...)
		last = resp
	}
	checkGeminiAnswer(t, text.String(), calls, last.Candidates[0].FinishReason, last.UsageMetadata, u)
	r = v.Last()
	checkRecorded(t, r, "POST", "/v1/projects/emulated-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent")
	if r.Query.Get("alt") != "sse" || !r.Stream {
		t.Errorf("query %v, stream %v", r.Query, r.Stream)
	}
	if n := len(v.TokenRequests()); n != 1 {
		t.Errorf("%d token requests, want the token reused", n)
	}
}

func vertexAnthropicClient(t *testing.T, v *llmtest.Vertex) anthropic.Client {
	t.Helper()
	creds, err := google.CredentialsFromJSONWithType(testContext(t), v.ServiceAccountJSON(), google.ServiceAccount, llmtest.CloudPlatformScope)
	if err != nil {
		t.Fatal(err)
	}
	return anthropic.NewClient(
		vertex.WithCredentials(testContext(t), v.Location, v.Project, creds),
		aoption.WithBaseURL(v.BaseURL()), // after WithCredentials, which sets Google's host
		aoption.WithMaxRetries(0),
	)
}

func TestVertexClaudeWithAnthropicSDK(t *testing.T) {
	t.Parallel()
	v := llmtest.NewVertex(t)
	u := llmtest.Usage{InputTokens: 25, OutputTokens: 40}
	reply := llmtest.Reply{Text: "Let me check.", ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: u}
	v.Enqueue(reply, reply, llmtest.Reply{Usage: llmtest.Usage{InputTokens: 64}})
	c := vertexAnthropicClient(t, v)

	m, err := c.Messages.New(testContext(t), messageParams())
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "message", m)
	checkAnthropicMessage(t, m, "Let me check.", u)
	r := v.Last()
	checkRecorded(t, r, "POST", "/v1/projects/emulated-project/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5:rawPredict")
	checkVertexAuth(t, v, r)
	body := r.JSON()
	if body["anthropic_version"] != vertex.DefaultVersion || body["model"] != nil || r.Model != "claude-sonnet-4-5" {
		t.Errorf("body %s, model %q", r.Body, r.Model)
	}

	stream := c.Messages.NewStreaming(testContext(t), messageParams())
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkAnthropicMessage(t, &acc, "Let me check.", u)
	r = v.Last()
	checkRecorded(t, r, "POST", "/v1/projects/emulated-project/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5:streamRawPredict")
	if !r.Stream {
		t.Error("recorded as not streamed")
	}

	n, err := c.Messages.CountTokens(testContext(t), anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != 64 {
		t.Errorf("input tokens %d", n.InputTokens)
	}
	r = v.Last()
	checkRecorded(t, r, "POST", "/v1/projects/emulated-project/locations/us-central1/publishers/anthropic/models/count-tokens:rawPredict")
	if r.Op != "count_tokens" || r.Model != "claude-sonnet-4-5" {
		t.Errorf("op %q model %q", r.Op, r.Model)
	}
}

// The OpenAI-compatible endpoint, with a token the emulator issued directly.
func TestVertexOpenAICompatible(t *testing.T) {
	t.Parallel()
	v := llmtest.NewVertex(t)
	v.Enqueue(llmtest.Reply{Text: "Paris.", Usage: llmtest.Usage{InputTokens: 3, OutputTokens: 2}})
	c := openai.NewClient(
		option.WithBaseURL(v.URL+"/v1/projects/"+v.Project+"/locations/"+v.Location+"/endpoints/openapi"),
		option.WithAPIKey(v.AccessToken()), option.WithMaxRetries(0))
	p := chatParams()
	p.Model = "google/gemini-2.5-flash"
	resp, err := c.Chat.Completions.New(testContext(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Paris." || resp.Model != "google/gemini-2.5-flash" || resp.Usage.TotalTokens != 5 {
		t.Errorf("answer %+v", resp)
	}
	checkRecorded(t, v.Last(), "POST", "/v1/projects/emulated-project/locations/us-central1/endpoints/openapi/chat/completions")
}

// The token endpoint refuses assertions it cannot verify, and the API
// refuses tokens it did not issue or that expired.
func TestVertexRefusals(t *testing.T) {
	t.Parallel()
	v := llmtest.NewVertex(t)

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	assertion, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": v.ClientEmail(), "aud": v.TokenURL(), "scope": llmtest.CloudPlatformScope,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString(other)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.PostForm(v.TokenURL(), url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion},
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(v.TokenRequests()[0].AuthError, "invalid_grant") {
		t.Errorf("foreign key: %d, %+v", resp.StatusCode, v.TokenRequests())
	}

	creds, err := credentials.DetectDefault(&credentials.DetectOptions{
		CredentialsJSON: v.ServiceAccountJSON(), Scopes: []string{"https://www.googleapis.com/auth/userinfo.email"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := creds.Token(testContext(t)); err == nil {
		t.Error("token for a scope without cloud-platform")
	}

	v.TokenLifetime = -time.Minute
	expired := v.AccessToken()
	for _, auth := range []string{"", "Bearer ya29.not-issued", "Bearer " + expired} {
		c, err := genai.NewClient(testContext(t), &genai.ClientConfig{
			Backend: genai.BackendVertexAI, Project: v.Project, Location: v.Location,
			HTTPClient:  &http.Client{},
			HTTPOptions: genai.HTTPOptions{BaseURL: v.BaseURL(), APIVersion: "v1", Headers: http.Header{"Authorization": {auth}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Models.GenerateContent(testContext(t), "gemini-2.5-flash", genai.Text("hi"), nil)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized || apiErr.Status != "UNAUTHENTICATED" {
			t.Errorf("Authorization %q: %v", auth, err)
		}
		if r := v.Last(); r.AuthError == "" {
			t.Errorf("Authorization %q: refusal not recorded", auth)
		}
	}
}
