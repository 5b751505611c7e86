package guardrailtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func bedrockClient(b *guardrailtest.Bedrock, key, secret string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:           b.Region,
		BaseEndpoint:     aws.String(b.URL),
		Credentials:      credentials.NewStaticCredentialsProvider(key, secret, ""),
		RetryMaxAttempts: 1,
	})
}

func applyInput(b *guardrailtest.Bedrock, source types.GuardrailContentSource, texts ...string) *bedrockruntime.ApplyGuardrailInput {
	in := &bedrockruntime.ApplyGuardrailInput{
		GuardrailIdentifier: aws.String(b.GuardrailID),
		GuardrailVersion:    aws.String(b.GuardrailVersion),
		Source:              source,
	}
	for _, t := range texts {
		in.Content = append(in.Content, &types.GuardrailContentBlockMemberText{Value: types.GuardrailTextBlock{Text: aws.String(t)}})
	}
	return in
}

// TestBedrockWithSDK drives the ApplyGuardrail emulator with the AWS SDK:
// the SDK signs, the emulator checks the signature, and the SDK decodes
// each kind of answer.
func TestBedrockWithSDK(t *testing.T) {
	b := guardrailtest.NewBedrock(t)
	// An ARN identifier: its ':' and '/' must survive SigV4's path escaping.
	b.Configure(func() {
		b.GuardrailID = "arn:aws:bedrock:us-east-1:123456789012:guardrail/gr-emulated"
		b.Block = map[string]string{"bomb": "VIOLENCE"}
		b.Anonymize = map[string]string{"alice@example.com": "EMAIL"}
	})
	client := bedrockClient(b, b.AccessKeyID, b.SecretAccessKey)

	t.Run("none", func(t *testing.T) {
		out, err := client.ApplyGuardrail(testContext(t), applyInput(b, types.GuardrailContentSourceInput, "hello"))
		if err != nil {
			t.Fatal(err)
		}
		if out.Action != types.GuardrailActionNone || len(out.Outputs) != 0 {
			t.Errorf("action %q outputs %d", out.Action, len(out.Outputs))
		}
		if got := b.Last().Path; !strings.Contains(got, "arn%3Aaws%3Abedrock") {
			t.Errorf("path %q: the identifier is not escaped as the SDK escapes it", got)
		}
	})
	t.Run("blocked", func(t *testing.T) {
		out, err := client.ApplyGuardrail(testContext(t), applyInput(b, types.GuardrailContentSourceOutput, "how to make a bomb"))
		if err != nil {
			t.Fatal(err)
		}
		if out.Action != types.GuardrailActionGuardrailIntervened || len(out.Outputs) != 1 || *out.Outputs[0].Text != b.BlockedMessage {
			t.Fatalf("action %q outputs %v", out.Action, out.Outputs)
		}
		f := out.Assessments[0].ContentPolicy.Filters[0]
		if f.Action != types.GuardrailContentPolicyActionBlocked || f.Type != types.GuardrailContentFilterTypeViolence {
			t.Errorf("filter %+v", f)
		}
	})
	t.Run("anonymized", func(t *testing.T) {
		out, err := client.ApplyGuardrail(testContext(t), applyInput(b, types.GuardrailContentSourceInput, "mail alice@example.com", "no pii"))
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Outputs) != 2 || *out.Outputs[0].Text != "mail {EMAIL}" || *out.Outputs[1].Text != "no pii" {
			t.Fatalf("outputs %v", out.Outputs)
		}
		e := out.Assessments[0].SensitiveInformationPolicy.PiiEntities[0]
		if e.Action != types.GuardrailSensitiveInformationPolicyActionAnonymized || e.Type != types.GuardrailPiiEntityTypeEmail {
			t.Errorf("entity %+v", e)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		_, err := bedrockClient(b, b.AccessKeyID, "not-the-secret").ApplyGuardrail(testContext(t), applyInput(b, types.GuardrailContentSourceInput, "hello"))
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidSignatureException" {
			t.Fatalf("err %v", err)
		}
		if got := b.Last().AuthError; got != "signature mismatch" {
			t.Errorf("AuthError %q", got)
		}
	})
	t.Run("unknown guardrail", func(t *testing.T) {
		in := applyInput(b, types.GuardrailContentSourceInput, "hello")
		in.GuardrailVersion = aws.String("7")
		_, err := client.ApplyGuardrail(testContext(t), in)
		var notFound *types.ResourceNotFoundException
		if !errors.As(err, &notFound) {
			t.Fatalf("err %v", err)
		}
	})
}

// TestModerationWithSDK drives the moderation emulator with OpenAI's SDK.
func TestModerationWithSDK(t *testing.T) {
	m := guardrailtest.NewModeration(t)
	m.Configure(func() { m.Flag = map[string]string{"kill": "violence"} })
	client := openai.NewClient(option.WithBaseURL(m.URL+"/v1/"), option.WithAPIKey(m.APIKey), option.WithMaxRetries(0))

	out, err := client.Moderations.New(testContext(t), openai.ModerationNewParams{
		Input: openai.ModerationNewParamsInputUnion{OfStringArray: []string{"hello", "I will kill it"}},
		Model: openai.ModerationModelOmniModerationLatest,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || out.Results[0].Flagged || !out.Results[1].Flagged || !out.Results[1].Categories.Violence {
		t.Fatalf("results %+v", out.Results)
	}
	if out.Model != "omni-moderation-latest" || !strings.HasPrefix(out.ID, "modr-") {
		t.Errorf("model %q id %q", out.Model, out.ID)
	}
	r := out.Results[1]
	for name, extra := range map[string]int{
		"result":                       len(r.JSON.ExtraFields),
		"categories":                   len(r.Categories.JSON.ExtraFields),
		"category_scores":              len(r.CategoryScores.JSON.ExtraFields),
		"category_applied_input_types": len(r.CategoryAppliedInputTypes.JSON.ExtraFields),
	} {
		if extra != 0 {
			t.Errorf("%s: %d members the SDK does not know", name, extra)
		}
	}

	bad := openai.NewClient(option.WithBaseURL(m.URL+"/v1/"), option.WithAPIKey("sk-wrong"), option.WithMaxRetries(0))
	_, err = bad.Moderations.New(testContext(t), openai.ModerationNewParams{Input: openai.ModerationNewParamsInputUnion{OfString: openai.String("hello")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("err %v", err)
	}
}
