package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

// preparedRequest is a request as the server has it before Authorize.
func preparedRequest(p *Provider, target []byte, body string) *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	req.SetRequestURIBytes(target)
	req.Header.SetMethod(fasthttp.MethodPost)
	addr, _ := p.Upstream()
	req.Header.SetHost(addr)
	req.SetBodyString(body)
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", "Bearer client-secret")
	return req
}

// authorizeKeyed is one request's AppendPath and Authorize with a key.
func authorizeKeyed(b testing.TB, p *Provider, req *fasthttp.Request, target []byte) []byte {
	target = p.AppendPath(target[:0], Completions, "gpt-4o-mini", false, []byte("/v1/chat/completions"))
	req.SetRequestURIBytes(target)
	if err := p.Authorize(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	return target
}

// TestAuthorizeKeyAllocations holds AppendPath and Authorize with a key
// (inline or from a file) to zero allocations.
func TestAuthorizeKeyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	fileAuth, _ := keyFileAuth(t, "sk-from-file")
	for desc, auth := range map[string]*config.BackendAuth{"inline": keyAuth("sk-inline"), "file": fileAuth} {
		t.Run(desc, func(t *testing.T) {
			p := mustNew(t, named(openAI()), auth)
			target := make([]byte, 0, 128)
			req := preparedRequest(p, target, chatBody)
			defer fasthttp.ReleaseRequest(req)
			target = authorizeKeyed(t, p, req, target) // reads the file, grows the header's buffers
			if n := testing.AllocsPerRun(200, func() { target = authorizeKeyed(t, p, req, target) }); n != 0 {
				t.Errorf("%v allocations per request, want 0", n)
			}
		})
	}
}

func BenchmarkAuthorizeKey(b *testing.B) {
	p := mustNew(b, named(openAI()), keyAuth("sk-inline-benchmark-key"))
	target := make([]byte, 0, 128)
	req := preparedRequest(p, target, chatBody)
	defer fasthttp.ReleaseRequest(req)
	b.ReportAllocs()
	for b.Loop() {
		target = authorizeKeyed(b, p, req, target)
	}
}

func BenchmarkAuthorizeSigV4(b *testing.B) {
	p := mustNew(b, named(bedrock("us-east-1")), &config.BackendAuth{AWS: &config.AWSAuth{
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session"}})
	body := `{"messages":[{"role":"user","content":[{"text":"Write a haiku about gateways."}]}],"inferenceConfig":{"maxTokens":256}}`
	target := p.AppendPath(nil, Completions, "anthropic.claude-3-5-sonnet-20240620-v1:0", true, nil)
	req := preparedRequest(p, target, body)
	defer fasthttp.ReleaseRequest(req)
	b.ReportAllocs()
	for b.Loop() {
		target = p.AppendPath(target[:0], Completions, "anthropic.claude-3-5-sonnet-20240620-v1:0", true, nil)
		req.SetRequestURIBytes(target)
		if err := p.Authorize(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthorizeGCPCached(b *testing.B) {
	p := mustNew(b, named(vertex("us-central1")), nil)
	p.creds.(*gcpCredentials).tokens.cur.Store(&cachedToken{header: []byte("Bearer ya29.cached"),
		refreshAt: farFuture, expiry: farFuture})
	target := make([]byte, 0, 128)
	req := preparedRequest(p, target, chatBody)
	defer fasthttp.ReleaseRequest(req)
	b.ReportAllocs()
	for b.Loop() {
		target = p.AppendPath(target[:0], Completions, "gemini-2.5-flash", true, []byte("/v1/chat/completions"))
		req.SetRequestURIBytes(target)
		if err := p.Authorize(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

var farFuture = time.Now().Add(24 * time.Hour)

// TestAppendPathAllocations holds AppendPath to zero allocations for every
// kind, the client's query and escapes included.
func TestAppendPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	host := func(k config.AIProvider) *config.NamedAIProvider {
		np := named(k)
		np.HostOverride = "127.0.0.1:1"
		np.PathPrefix = ptr("/prefix/")
		return np
	}
	cases := []struct {
		provider *config.NamedAIProvider
		model    string
	}{
		{named(openAI()), "gpt-4o"},
		{named(azure("openAI", ptr("2024-10-21"))), "my deployment"},
		{named(azure("foundry", nil)), "claude-haiku-4-5"},
		{named(anthropic()), "claude-sonnet-4-5"},
		{named(gemini()), "models/gemini-2.5-flash"},
		{named(vertex("us-east5")), "claude-3-5-sonnet-20241022"},
		{named(vertex("us-east5")), "publishers/google/models/gemini-2.5-flash"},
		{named(bedrock("us-east-1")), "arn:aws:bedrock:us-east-1:1:inference-profile/x:0"},
		{host(custom(config.ProviderFormat{Type: "messages"})), "m"},
	}
	client := []byte("/v1/chat/completions?alt=json&x=1&api-version=2023-05-15&key=k")
	dst := make([]byte, 0, 256)
	for _, auth := range []*config.BackendAuth{
		{Passthrough: &config.BackendAuthPassthrough{}},
		{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "gateway-key"}}}, // the client's key dropped
	} {
		for _, c := range cases {
			p := mustNew(t, c.provider, auth)
			for _, rt := range []RouteType{Completions, Messages, Responses, Passthrough} {
				n := testing.AllocsPerRun(100, func() { dst = p.AppendPath(dst[:0], rt, c.model, true, client) })
				if n != 0 {
					t.Errorf("%s %v: %v allocations", p.Kind(), rt, n)
				}
			}
		}
	}
}

// entraCached is an Azure provider with client-secret credentials whose
// token is cached.
func entraCached(tb testing.TB) *Provider {
	p := mustNew(tb, named(azure("openAI", nil)), &config.BackendAuth{Azure: &config.AzureAuth{ExplicitConfig: &config.AzureExplicitConfig{
		ClientSecret: &config.AzureClientSecret{TenantID: "tenant", ClientID: "client", ClientSecret: "secret"}}}})
	p.creds.(*entraCredentials).tokens.cur.Store(&cachedToken{header: []byte("Bearer eyJ0eXAi.cached"),
		refreshAt: farFuture, expiry: farFuture})
	return p
}

// TestAuthorizeEntraAllocations holds Authorize with a cached Entra ID
// token to zero allocations.
func TestAuthorizeEntraAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := entraCached(t)
	target := make([]byte, 0, 128)
	req := preparedRequest(p, target, chatBody)
	defer fasthttp.ReleaseRequest(req)
	target = authorizeKeyed(t, p, req, target)
	if n := testing.AllocsPerRun(200, func() { target = authorizeKeyed(t, p, req, target) }); n != 0 {
		t.Errorf("%v allocations per request, want 0", n)
	}
	if got := string(req.Header.Peek("Authorization")); got != "Bearer eyJ0eXAi.cached" {
		t.Errorf("Authorization %q", got)
	}
}

func BenchmarkAuthorizeEntraCached(b *testing.B) {
	p := entraCached(b)
	target := make([]byte, 0, 128)
	req := preparedRequest(p, target, chatBody)
	defer fasthttp.ReleaseRequest(req)
	b.ReportAllocs()
	for b.Loop() {
		target = authorizeKeyed(b, p, req, target)
	}
}

// BenchmarkPrepareBodyGuardrail: a Converse body of about 1 KB gains the
// provider's guardrailConfig.
func BenchmarkPrepareBodyGuardrail(b *testing.B) {
	p := mustNew(b, guarded("arn:aws:bedrock:us-east-1:123456789012:guardrail/abc123", "3"), nil)
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"` + strings.Repeat("Write a haiku about gateways. ", 30) +
		`"}]}],"inferenceConfig":{"maxTokens":256},"system":[{"text":"Be brief."}]}`)
	dst := make([]byte, 0, 2*len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		dst = p.PrepareBody(dst[:0], body, Completions)
	}
}
