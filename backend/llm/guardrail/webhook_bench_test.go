package guardrail_test

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/guardrail"
)

// passingWebhook is the cheapest webhook there is: a fasthttp server on
// 127.0.0.1 that passes everything, so that the benchmark measures the
// guard's side of the round trip.
func passingWebhook(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(`{"action":{"reason":"fine"}}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(answer)
	}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// BenchmarkWebhookPass is one prompt guard call that passes: encoding the
// messages, the headers (one forwarded, one from CEL), the exchange on a
// pooled keep-alive connection and the answer's decoding.
func BenchmarkWebhookPass(b *testing.B) {
	addr := passingWebhook(b)
	g := mustRequestGuard(b, `webhook:
  target: {host: "`+addr+`"}
  forwardHeaderMatches: [{name: x-tenant, value: {exact: acme}}]
  headers: {x-user: 'jwt.sub'}
`, guardrail.Options{})
	hdr, in := clientRequest("/v1/chat/completions", map[string]any{"sub": "user-123"}, "X-Tenant", "acme")
	input := &guardrail.Input{Header: hdr, Request: in}
	prompt := msgs("system", "You are a helpful assistant.", "user", "What is the capital of France? Answer in one word.")
	ctx := testContext(b)
	b.ReportAllocs()
	for b.Loop() {
		v, err := g.Check(ctx, prompt, input)
		if err != nil || v.Action != guardrail.Pass {
			b.Fatalf("verdict %+v err %v", v, err)
		}
	}
}

// BenchmarkWebhookPassBare is BenchmarkWebhookPass without headers to
// forward or compute.
func BenchmarkWebhookPassBare(b *testing.B) {
	addr := passingWebhook(b)
	g := mustRequestGuard(b, "webhook:\n  target: {host: \""+addr+"\"}\n", guardrail.Options{})
	prompt := msgs("system", "You are a helpful assistant.", "user", "What is the capital of France? Answer in one word.")
	ctx := testContext(b)
	b.ReportAllocs()
	for b.Loop() {
		v, err := g.Check(ctx, prompt, nil)
		if err != nil || v.Action != guardrail.Pass {
			b.Fatalf("verdict %+v err %v", v, err)
		}
	}
}
