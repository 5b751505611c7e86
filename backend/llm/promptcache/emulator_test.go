package promptcache

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/llmtest"
)

const bedrockModel = "anthropic.claude-3-5-sonnet-20240620-v1:0"

// post sends body and returns the status.
func post(t *testing.T, url string, header map[string]string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBedrockEmulatorTakesPoints: Bedrock requests with the points Apply
// added are answered by the Bedrock emulator, and reach it as written.
func TestBedrockEmulatorTakesPoints(t *testing.T) {
	b := llmtest.NewBedrock(t)
	b.APIKey = "emulated-bedrock-api-key"
	for _, input := range []string{"bedrock-basic", "bedrock-marked"} {
		t.Run(input, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", input+".json"))
			out, err := New(everything()).Apply(nil, in, convert.Bedrock)
			if err != nil || bytes.Equal(out, in) {
				t.Fatalf("Apply added nothing (%v)", err)
			}
			status := post(t, b.URL+"/model/"+bedrockModel+"/converse", map[string]string{"Authorization": "Bearer " + b.APIKey}, out)
			r := b.Last()
			if status != http.StatusOK || r.AuthError != "" || !bytes.Equal(r.Body, out) {
				t.Fatalf("status %d, auth error %q, body as received:\n%s", status, r.AuthError, r.Body)
			}
		})
	}
}

// TestCachePointIsTheSDKs: the block Apply adds is what the AWS SDK sends
// for a cache point in the system prompt, a message and the tools.
func TestCachePointIsTheSDKs(t *testing.T) {
	b := llmtest.NewBedrock(t)
	c := bedrockruntime.New(bedrockruntime.Options{
		Region:           b.Region,
		BaseEndpoint:     aws.String(b.BaseURL()),
		Credentials:      credentials.NewStaticCredentialsProvider(b.AccessKeyID, b.SecretAccessKey, ""),
		RetryMaxAttempts: 1,
	})
	point := types.CachePointBlock{Type: types.CachePointTypeDefault}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId: aws.String(bedrockModel),
		System:  []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "rules"}, &types.SystemContentBlockMemberCachePoint{Value: point}},
		Messages: []types.Message{{Role: types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}, &types.ContentBlockMemberCachePoint{Value: point}}}},
		ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{
			&types.ToolMemberToolSpec{Value: types.ToolSpecification{Name: aws.String("t"),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object"})}}},
			&types.ToolMemberCachePoint{Value: point},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		System     []json.RawMessage
		Messages   []struct{ Content []json.RawMessage }
		ToolConfig struct{ Tools []json.RawMessage }
	}
	if err := json.Unmarshal(b.Last().Body, &sent); err != nil || len(sent.System) != 2 || len(sent.Messages) != 1 ||
		len(sent.Messages[0].Content) != 2 || len(sent.ToolConfig.Tools) != 2 {
		t.Fatalf("the SDK sent %s (%v)", b.Last().Body, err)
	}
	for name, got := range map[string]json.RawMessage{"system": sent.System[1], "message": sent.Messages[0].Content[1], "tools": sent.ToolConfig.Tools[1]} {
		var compact bytes.Buffer
		if err := json.Compact(&compact, got); err != nil || compact.String() != cachePointBlock {
			t.Errorf("%s: the SDK sends %s, Apply adds %s", name, got, cachePointBlock)
		}
	}
}

// TestAnthropicEmulatorTakesPoints: Messages requests with the points Apply
// added are answered by the Anthropic emulator, and the Anthropic SDK reads
// a cache_control on exactly the blocks Apply marked.
func TestAnthropicEmulatorTakesPoints(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	header := map[string]string{"x-api-key": a.APIKey, "anthropic-version": "2023-06-01"}
	for _, input := range []string{"anthropic-strings", "anthropic-blocks", "anthropic-marked"} {
		t.Run(input, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", input+".json"))
			out, err := New(everything()).Apply(nil, in, convert.Messages)
			if err != nil || bytes.Equal(out, in) {
				t.Fatalf("Apply added nothing (%v)", err)
			}
			status := post(t, a.URL+"/v1/messages", header, out)
			if r := a.Last(); status != http.StatusOK || r.AuthError != "" || !bytes.Equal(r.Body, out) {
				t.Fatalf("status %d, auth error %q, body as received:\n%s", status, r.AuthError, r.Body)
			}
			var params sdk.MessageNewParams
			if err := params.UnmarshalJSON(out); err != nil {
				t.Fatal(err)
			}
			system, messages, tools, _ := sectionPoints(t, out, convert.Messages)
			var sdkSystem, sdkMessages, sdkTools int
			for _, s := range params.System {
				sdkSystem += present(s.CacheControl)
			}
			for _, m := range params.Messages {
				for _, c := range m.Content {
					if cc := c.GetCacheControl(); cc != nil {
						sdkMessages += present(*cc)
					}
				}
			}
			for _, tl := range params.Tools {
				if cc := tl.GetCacheControl(); cc != nil {
					sdkTools += present(*cc)
				}
			}
			if sdkSystem != system || sdkMessages != messages || sdkTools != tools || system+messages+tools == 0 {
				t.Errorf("the SDK reads points system %d messages %d tools %d; Apply counts %d %d %d",
					sdkSystem, sdkMessages, sdkTools, system, messages, tools)
			}
		})
	}
}

func present(cc sdk.CacheControlEphemeralParam) int {
	if param.IsOmitted(cc) || param.IsNull(cc) {
		return 0
	}
	return 1
}
