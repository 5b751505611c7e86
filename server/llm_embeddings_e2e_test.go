package server

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMEmbeddingsChargeTheirUsage: an embeddings answer's usage (its
// prompt_tokens) is read as a chat answer's is: charged to the token
// buckets, counted in the token metric and logged, with the model the
// provider says answered. Embeddings were passed on unread, so a token
// budget never saw them: a client limited to 150 tokens embedded without
// end.
func TestLLMEmbeddingsChargeTheirUsage(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Usage: llmtest.Usage{InputTokens: 100}, Model: "text-embedding-3-small-v2"})
	limits := `
localRateLimit:
- {maxTokens: 150, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits), nil)
	c := openaiVia(tg)
	embed := func() error {
		_, err := c.Embeddings.New(llmCtx(t), openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")}})
		return err
	}
	// 150 tokens: the first (100) leaves 50, the second takes the bucket
	// to -50, the third is refused.
	for i := range 2 {
		if err := embed(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	var apiErr *openai.Error
	if err := embed(); err == nil || !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %v, want a 429", err)
	}
	if n := len(o.Requests()); n != 2 {
		t.Errorf("provider got %d requests, want 2", n)
	}
	fams := scrapeGateway(t, tg.gw)
	s := seriesOf(fams, "agentgateway_gen_ai_client_token_usage", map[string]string{"gen_ai_token_type": "input", "gen_ai_operation_name": "embeddings"})
	if s == nil || s.GetHistogram().GetSampleSum() != 200 {
		t.Errorf("input token usage of embeddings: %v, want a sum of 200", s)
	}
	eventually(t, 5*time.Second, "an access line with 100 input tokens and the answering model", func() bool {
		for _, e := range tg.accessLogs().FilterMessage("request").All() {
			if m := e.ContextMap(); m["llm.input_tokens"] == int64(100) && m["llm.model"] == "text-embedding-3-small-v2" {
				return true
			}
		}
		return false
	})
}
