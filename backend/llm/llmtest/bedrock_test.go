package llmtest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// bedrockModel has the ':' that SigV4 path escaping must get right.
const bedrockModel = "anthropic.claude-3-5-sonnet-20240620-v1:0"

func bedrockClient(b *llmtest.Bedrock, key, secret string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:           b.Region,
		BaseEndpoint:     aws.String(b.BaseURL()),
		Credentials:      credentials.NewStaticCredentialsProvider(key, secret, ""),
		RetryMaxAttempts: 1,
	})
}

func converseInput() *bedrockruntime.ConverseInput {
	return &bedrockruntime.ConverseInput{
		ModelId: aws.String(bedrockModel),
		Messages: []types.Message{{
			Role:    types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Weather in Paris?"}},
		}},
		ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
			Name: aws.String("get_weather"),
			InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{
				"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
			})},
		}}}},
	}
}

func checkSigned(t *testing.T, b *llmtest.Bedrock, r llmtest.Request, path string) {
	t.Helper()
	checkRecorded(t, r, "POST", path)
	if a := r.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential="+b.AccessKeyID+"/") || !strings.Contains(a, "/us-east-1/bedrock/aws4_request") {
		t.Errorf("Authorization %q", a)
	}
	if r.Model != bedrockModel {
		t.Errorf("model %q", r.Model)
	}
}

const escapedModel = "anthropic.claude-3-5-sonnet-20240620-v1%3A0"

func TestBedrockConverse(t *testing.T) {
	t.Parallel()
	b := llmtest.NewBedrock(t)
	b.Enqueue(llmtest.Reply{Text: "Let me check.", ToolCalls: []llmtest.ToolCall{{ID: "tooluse_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		Usage: llmtest.Usage{InputTokens: 30, OutputTokens: 12, CachedInputTokens: 4}})
	c := bedrockClient(b, b.AccessKeyID, b.SecretAccessKey)
	out, err := c.Converse(testContext(t), converseInput())
	if err != nil {
		t.Fatal(err)
	}
	msg := out.Output.(*types.ConverseOutputMemberMessage).Value
	if msg.Role != types.ConversationRoleAssistant || len(msg.Content) != 2 {
		t.Fatalf("message %+v", msg)
	}
	if text := msg.Content[0].(*types.ContentBlockMemberText).Value; text != "Let me check." {
		t.Errorf("text %q", text)
	}
	tu := msg.Content[1].(*types.ContentBlockMemberToolUse).Value
	var input map[string]any
	if err := tu.Input.UnmarshalSmithyDocument(&input); err != nil || aws.ToString(tu.Name) != "get_weather" || aws.ToString(tu.ToolUseId) != "tooluse_1" || input["city"] != "Paris" {
		t.Errorf("tool use %+v input %v (%v)", tu, input, err)
	}
	if out.StopReason != types.StopReasonToolUse {
		t.Errorf("stop reason %q", out.StopReason)
	}
	if u := out.Usage; aws.ToInt32(u.InputTokens) != 30 || aws.ToInt32(u.OutputTokens) != 12 || aws.ToInt32(u.TotalTokens) != 46 || aws.ToInt32(u.CacheReadInputTokens) != 4 {
		t.Errorf("usage in %d out %d total %d cached %d", aws.ToInt32(u.InputTokens), aws.ToInt32(u.OutputTokens), aws.ToInt32(u.TotalTokens), aws.ToInt32(u.CacheReadInputTokens))
	}
	if out.Metrics == nil || aws.ToInt64(out.Metrics.LatencyMs) < 1 {
		t.Errorf("metrics %+v", out.Metrics)
	}
	checkSigned(t, b, b.Last(), "/model/"+escapedModel+"/converse")
}

func TestBedrockConverseStream(t *testing.T) {
	t.Parallel()
	b := llmtest.NewBedrock(t)
	b.Enqueue(llmtest.Reply{Chunks: []string{"Let ", "me ", "check."}, ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		Usage: llmtest.Usage{InputTokens: 30, OutputTokens: 12}})
	c := bedrockClient(b, b.AccessKeyID, b.SecretAccessKey)
	in := converseInput()
	out, err := c.ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{ModelId: in.ModelId, Messages: in.Messages, ToolConfig: in.ToolConfig})
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var text, args, toolName, toolID string
	var stop types.StopReason
	var usage *types.TokenUsage
	var kinds []string
	for ev := range stream.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberMessageStart:
			kinds = append(kinds, "messageStart")
			if e.Value.Role != types.ConversationRoleAssistant {
				t.Errorf("role %q", e.Value.Role)
			}
		case *types.ConverseStreamOutputMemberContentBlockStart:
			kinds = append(kinds, "contentBlockStart")
			s := e.Value.Start.(*types.ContentBlockStartMemberToolUse).Value
			toolName, toolID = aws.ToString(s.Name), aws.ToString(s.ToolUseId)
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			kinds = append(kinds, "contentBlockDelta")
			switch d := e.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				text += d.Value
			case *types.ContentBlockDeltaMemberToolUse:
				args += aws.ToString(d.Value.Input)
			}
		case *types.ConverseStreamOutputMemberContentBlockStop:
			kinds = append(kinds, "contentBlockStop")
		case *types.ConverseStreamOutputMemberMessageStop:
			kinds = append(kinds, "messageStop")
			stop = e.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			kinds = append(kinds, "metadata")
			usage = e.Value.Usage
		default:
			t.Errorf("unexpected event %T", ev)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "Let me check." || args != `{"city":"Paris"}` || toolName != "get_weather" || toolID == "" || stop != types.StopReasonToolUse {
		t.Errorf("text %q args %q tool %q/%q stop %q", text, args, toolName, toolID, stop)
	}
	if usage == nil || aws.ToInt32(usage.InputTokens) != 30 || aws.ToInt32(usage.OutputTokens) != 12 || aws.ToInt32(usage.TotalTokens) != 42 {
		t.Errorf("usage %+v", usage)
	}
	if len(kinds) != 12 || kinds[0] != "messageStart" || kinds[len(kinds)-1] != "metadata" {
		t.Errorf("events %v", kinds)
	}
	r := b.Last()
	checkSigned(t, b, r, "/model/"+escapedModel+"/converse-stream")
	if !r.Stream {
		t.Error("recorded as not streamed")
	}
}

func TestBedrockGuardrailIntervention(t *testing.T) {
	t.Parallel()
	b := llmtest.NewBedrock(t)
	b.Guardrail = &llmtest.Guardrail{ID: "gr-emulated", Version: "1", Message: "Sorry, I can't help with that."}
	c := bedrockClient(b, b.AccessKeyID, b.SecretAccessKey)
	in := converseInput()
	in.GuardrailConfig = &types.GuardrailConfiguration{GuardrailIdentifier: aws.String("gr-emulated"), GuardrailVersion: aws.String("1"), Trace: types.GuardrailTraceEnabled}
	out, err := c.Converse(testContext(t), in)
	if err != nil {
		t.Fatal(err)
	}
	msg := out.Output.(*types.ConverseOutputMemberMessage).Value
	if out.StopReason != types.StopReasonGuardrailIntervened || len(msg.Content) != 1 ||
		msg.Content[0].(*types.ContentBlockMemberText).Value != "Sorry, I can't help with that." {
		t.Fatalf("stop %q content %+v", out.StopReason, msg.Content)
	}
	if out.Trace == nil || out.Trace.Guardrail == nil {
		t.Fatal("no guardrail trace")
	}
	f := out.Trace.Guardrail.InputAssessment["gr-emulated"].ContentPolicy.Filters[0]
	if f.Action != types.GuardrailContentPolicyActionBlocked || f.Type != types.GuardrailContentFilterTypeViolence || !aws.ToBool(f.Detected) {
		t.Errorf("filter %+v", f)
	}
	if gc, _ := b.Last().JSON()["guardrailConfig"].(map[string]any); gc["guardrailIdentifier"] != "gr-emulated" {
		t.Errorf("recorded guardrailConfig %v", gc)
	}

	// Streamed, the intervention ends the stream the same way.
	sout, err := c.ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{
		ModelId: in.ModelId, Messages: in.Messages,
		GuardrailConfig: &types.GuardrailStreamConfiguration{GuardrailIdentifier: aws.String("gr-emulated"), GuardrailVersion: aws.String("1"), Trace: types.GuardrailTraceEnabled},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	var stop types.StopReason
	var trace *types.ConverseStreamTrace
	for ev := range sout.GetStream().Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			text += e.Value.Delta.(*types.ContentBlockDeltaMemberText).Value
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = e.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			trace = e.Value.Trace
		}
	}
	if err := sout.GetStream().Err(); err != nil {
		t.Fatal(err)
	}
	if text != "Sorry, I can't help with that." || stop != types.StopReasonGuardrailIntervened || trace == nil || trace.Guardrail == nil {
		t.Errorf("streamed %q stop %q trace %+v", text, stop, trace)
	}

	// An unknown guardrail is a validation error.
	in.GuardrailConfig.GuardrailIdentifier = aws.String("gr-other")
	_, err = c.Converse(testContext(t), in)
	var ve *types.ValidationException
	if !errors.As(err, &ve) {
		t.Errorf("unknown guardrail: %v", err)
	}
}

func TestBedrockSigV4Refusals(t *testing.T) {
	t.Parallel()
	b := llmtest.NewBedrock(t)
	for _, tc := range []struct {
		name, key, secret, code string
	}{
		{"wrong secret", b.AccessKeyID, "not-the-secret", "InvalidSignatureException"},
		{"unknown key", "AKIAUNKNOWN000000000", b.SecretAccessKey, "UnrecognizedClientException"},
	} {
		c := bedrockClient(b, tc.key, tc.secret)
		_, err := c.Converse(testContext(t), converseInput())
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != tc.code {
			t.Errorf("%s: %v", tc.name, err)
		}
		if r := b.Last(); r.AuthError == "" {
			t.Errorf("%s: refusal not recorded", tc.name)
		}
	}
	// Signed for another region.
	c := bedrockruntime.New(bedrockruntime.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(b.BaseURL()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(b.AccessKeyID, b.SecretAccessKey, ""),
	})
	_, err := c.Converse(testContext(t), converseInput())
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("other region: %v", err)
	}
	// Unsigned.
	resp, err := http.Post(b.URL+"/model/m/converse", "application/json", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("X-Amzn-ErrorType"), "MissingAuthenticationTokenException") {
		t.Errorf("unsigned: %d %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
}
