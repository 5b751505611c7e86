package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/credential"
)

// exchange is one request sent through a Provider to an emulator.
type exchange struct {
	rt     RouteType
	body   string            // the client's body (a chat route's is translated)
	model  string            // the model of a route that is not chat
	path   string            // the client's target ("/" when empty)
	header map[string]string // the client's headers
	method string            // POST when empty
}

// result is what came back.
type result struct {
	status int
	body   string
	ctype  string
}

// send does what the server does with an exchange: Format, convert,
// PrepareBody, AppendPath, Host, Authorize; then sends the request over a
// real socket to the provider's address.
func send(t *testing.T, p *Provider, x exchange) result {
	t.Helper()
	res, err := trySend(t, p, x)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func trySend(t *testing.T, p *Provider, x exchange) (result, error) {
	t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	body, model, stream := []byte(x.body), x.model, false
	if x.rt.chat() {
		if model == "" { // the server reads the client's model first
			var m struct{ Model string }
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			model = m.Model
		}
		f, ok := p.Format(x.rt, model)
		if !ok {
			t.Fatalf("%s does not serve %v", p.Kind(), x.rt)
		}
		out, info, err := convert.Request(nil, x.rt.clientFormat(), f, body, &convert.Options{Model: p.Model()})
		if err != nil {
			t.Fatalf("convert %v to %v: %v", x.rt.clientFormat(), f, err)
		}
		body, model, stream = p.PrepareBody(nil, out, x.rt), info.Model, info.Stream
	} else if x.rt == AnthropicTokenCount {
		body = p.PrepareBody(nil, body, x.rt)
	}
	clientPath := x.path
	if clientPath == "" {
		clientPath = "/"
	}
	req.SetRequestURIBytes(p.AppendPath(nil, x.rt, model, stream, []byte(clientPath)))
	method := x.method
	if method == "" {
		method = fasthttp.MethodPost
	}
	req.Header.SetMethod(method)
	addr, _ := p.Upstream()
	req.Header.SetHost(addr)
	req.UseHostHeader = true
	if len(body) > 0 {
		req.SetBodyRaw(body)
		req.Header.SetContentType("application/json")
	}
	for k, v := range x.header {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Authorize(ctx, req); err != nil {
		return result{}, err
	}
	c := &fasthttp.HostClient{Addr: addr, DisablePathNormalizing: true}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("send: %v", err)
	}
	return result{status: resp.StatusCode(), body: string(resp.Body()), ctype: string(resp.Header.ContentType())}, nil
}

// accepted asserts a 200 whose request the emulator admitted.
func accepted(t *testing.T, s *llmtest.Server, res result) llmtest.Request {
	t.Helper()
	r := s.Last()
	if res.status != 200 || r.AuthError != "" {
		t.Fatalf("status %d, auth error %q, body %s", res.status, r.AuthError, res.body)
	}
	return r
}

func at(addr string, k config.AIProvider) *config.NamedAIProvider {
	return &config.NamedAIProvider{Name: "p", Provider: k, HostOverride: addr}
}

func keyAuth(k string) *config.BackendAuth {
	return &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: k}, Short: true}}
}

func keyFileAuth(t *testing.T, k string) (*config.BackendAuth, string) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(k+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{File: path}, Short: true}}, path
}

const (
	chatBody       = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	chatStreamBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true}`
)

func chatFor(model string, stream bool) string {
	if stream {
		return strings.Replace(chatStreamBody, "gpt-4o-mini", model, 1)
	}
	return strings.Replace(chatBody, "gpt-4o-mini", model, 1)
}

// clientCredentials are credential headers a client might send; a key
// backendAuth must replace them all.
var clientCredentials = map[string]string{
	"Authorization": "Bearer client-secret", "X-Api-Key": "client-secret",
	"Api-Key": "client-secret", "X-Goog-Api-Key": "client-secret",
}

// noClientSecret asserts none of clientCredentials reached the provider.
func noClientSecret(t *testing.T, r llmtest.Request) {
	t.Helper()
	for name, values := range r.Header {
		for _, v := range values {
			if strings.Contains(v, "client-secret") {
				t.Errorf("the client's credential reached the provider in %s", name)
			}
		}
	}
}

func TestOpenAIKey(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	fileAuth, _ := keyFileAuth(t, o.APIKey)
	tests := []struct {
		desc   string
		auth   *config.BackendAuth
		x      exchange
		op     string
		path   string
		header string // the client's header that must arrive ("" none)
	}{
		{"inline key, chat", keyAuth(o.APIKey), exchange{rt: Completions, body: chatBody, header: clientCredentials}, "chat.completions", "/v1/chat/completions", ""},
		{"key file, responses", fileAuth, exchange{rt: Responses, body: `{"model":"gpt-4o-mini","input":"hi"}`, header: clientCredentials}, "responses", "/v1/responses", ""},
		{"messages client", keyAuth(o.APIKey), exchange{rt: Messages, body: `{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`}, "chat.completions", "/v1/chat/completions", ""},
		{"embeddings", keyAuth(o.APIKey), exchange{rt: Embeddings, body: `{"model":"text-embedding-3-small","input":"hi"}`}, "embeddings", "/v1/embeddings", ""},
		{"models", keyAuth(o.APIKey), exchange{rt: Models, method: "GET", path: "/v1/models"}, "models", "/v1/models", ""},
		{"passthrough leaves the client's key", &config.BackendAuth{Passthrough: &config.BackendAuthPassthrough{}},
			exchange{rt: Completions, body: chatBody, header: map[string]string{"Authorization": "Bearer " + o.APIKey}}, "chat.completions", "/v1/chat/completions", "Authorization"},
		{"no auth leaves the client's key", nil,
			exchange{rt: Passthrough, method: "GET", path: "/v1/models", header: map[string]string{"Authorization": "Bearer " + o.APIKey}}, "models", "/v1/models", "Authorization"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, at(o.Addr(), openAI()), tt.auth)
			r := accepted(t, o.Server, send(t, p, tt.x))
			if r.Op != tt.op || r.Path != tt.path {
				t.Errorf("op %q path %q, want %q %q", r.Op, r.Path, tt.op, tt.path)
			}
			if got := r.Header.Get("Authorization"); got != "Bearer "+o.APIKey {
				t.Errorf("Authorization %q", got)
			}
			if tt.header == "" {
				noClientSecret(t, r)
				for _, h := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
					if r.Header.Get(h) != "" {
						t.Errorf("client header %s reached the provider", h)
					}
				}
			}
		})
	}
}

// TestKeyRefused: a wrong key is what the provider sees, so it refuses.
func TestKeyRefused(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	p := mustNew(t, at(o.Addr(), openAI()), keyAuth("sk-wrong"))
	res := send(t, p, exchange{rt: Completions, body: chatBody, header: map[string]string{"Authorization": "Bearer " + o.APIKey}})
	if res.status != 401 || o.Last().AuthError == "" {
		t.Fatalf("status %d, auth error %q: the client's key was used", res.status, o.Last().AuthError)
	}
}

// TestKeyFileRotation: a key file is read once, and again when it
// changes.
func TestKeyFileRotation(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	auth, path := keyFileAuth(t, o.APIKey)
	p := mustNew(t, at(o.Addr(), openAI()), auth)
	accepted(t, o.Server, send(t, p, exchange{rt: Completions, body: chatBody}))

	// Rotate: the provider takes the new key, the file gets it.
	o.APIKey = "sk-rotated-key"
	if err := os.WriteFile(path, []byte(o.APIKey), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	key := p.creds.(*keyCredentials).key
	// Within keyRecheck the file is not looked at: the old key goes.
	if res := send(t, p, exchange{rt: Completions, body: chatBody}); res.status != 401 {
		t.Fatalf("status %d before the recheck, want 401 (old key)", res.status)
	}
	key.Recheck() // as if keyRecheck had passed
	accepted(t, o.Server, send(t, p, exchange{rt: Completions, body: chatBody}))

	// A file that goes away keeps the key read last.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	key.Recheck()
	accepted(t, o.Server, send(t, p, exchange{rt: Completions, body: chatBody}))
}

func TestKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		desc, path, want string
	}{
		{"missing", filepath.Join(dir, "missing"), "no such file"},
		{"empty", write("empty", "\n \n"), "empty"},
		{"control characters", write("ctl", "sk-secret\r\nX-Injected: 1"), "control characters"},
		{"too large", write("large", strings.Repeat("k", credential.MaxSecretFile+1)), "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			auth := &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{File: tt.path}}}
			p := mustNew(t, at("127.0.0.1:1", openAI()), auth)
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			err := p.Authorize(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Authorize = %v, want an error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-secret") || strings.Contains(err.Error(), "kkkk") {
				t.Errorf("error %q shows the key", err)
			}
			// The error is kept until the file is looked at again.
			if err2 := p.Authorize(context.Background(), req); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second Authorize = %v", err2)
			}
		})
	}
}

func TestAzure(t *testing.T) {
	a := llmtest.NewAzure(t)
	tests := []struct {
		desc     string
		provider config.AzureProvider
		x        exchange
		path     string
		version  string
		deploy   string
	}{
		{"v1 chat", config.AzureProvider{}, exchange{rt: Completions, body: chatBody, header: clientCredentials}, "/openai/v1/chat/completions", "", ""},
		{"v1 responses", config.AzureProvider{}, exchange{rt: Responses, body: `{"model":"gpt-4o-mini","input":"hi"}`}, "/openai/v1/responses", "", ""},
		{"v1 embeddings", config.AzureProvider{}, exchange{rt: Embeddings, body: `{"model":"text-embedding-3-small","input":"hi"}`}, "/openai/v1/embeddings", "", ""},
		{"preview", config.AzureProvider{APIVersion: ptr("preview")}, exchange{rt: Messages, body: `{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
			"/openai/v1/chat/completions", "preview", ""},
		{"dated chat", config.AzureProvider{APIVersion: ptr("2024-10-21")}, exchange{rt: Completions, body: chatBody, header: clientCredentials},
			"/openai/deployments/gpt-4o-mini/chat/completions", "2024-10-21", "gpt-4o-mini"},
		{"dated fixed model", config.AzureProvider{APIVersion: ptr("2024-10-21"), Model: ptr("my-deployment")}, exchange{rt: Completions, body: chatBody},
			"/openai/deployments/my-deployment/chat/completions", "2024-10-21", "my-deployment"},
		{"dated embeddings", config.AzureProvider{APIVersion: ptr("2024-02-15-preview")}, exchange{rt: Embeddings, model: "emb", body: `{"input":"hi"}`},
			"/openai/deployments/emb/embeddings", "2024-02-15-preview", "emb"},
		{"dated responses", config.AzureProvider{APIVersion: ptr("2025-04-01-preview")}, exchange{rt: Responses, body: `{"model":"gpt-4o-mini","input":"hi"}`},
			"/openai/responses", "2025-04-01-preview", ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			cfg := tt.provider
			cfg.ResourceName, cfg.ResourceType = "res", "openAI"
			p := mustNew(t, at(a.Addr(), config.AIProvider{Azure: &cfg}), keyAuth(a.APIKey))
			r := accepted(t, a.Server, send(t, p, tt.x))
			if r.Path != tt.path || r.Query.Get("api-version") != tt.version || r.Deployment != tt.deploy {
				t.Errorf("path %q api-version %q deployment %q; want %q %q %q", r.Path, r.Query.Get("api-version"), r.Deployment, tt.path, tt.version, tt.deploy)
			}
			if r.Header.Get("Api-Key") != a.APIKey || r.Header.Get("Authorization") != "" {
				t.Errorf("api-key %q, Authorization %q", r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
			}
			noClientSecret(t, r)
		})
	}
}

func TestAnthropic(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	a.OAuthToken = "oauth-token-for-location"
	const messages = `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		desc    string
		auth    *config.BackendAuth
		x       exchange
		op      string
		version string
	}{
		{"messages", keyAuth(a.APIKey), exchange{rt: Messages, body: messages, header: clientCredentials}, "messages", anthropicVersion},
		{"chat client", keyAuth(a.APIKey), exchange{rt: Completions, body: chatFor("claude-sonnet-4-5", true)}, "messages", anthropicVersion},
		{"client's version kept", keyAuth(a.APIKey), exchange{rt: Messages, body: messages, header: map[string]string{"anthropic-version": "2024-01-01"}}, "messages", "2024-01-01"},
		{"count tokens", keyAuth(a.APIKey), exchange{rt: AnthropicTokenCount, body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`}, "count_tokens", anthropicVersion},
		{"key location", &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: a.OAuthToken},
			Location: &config.AuthLocation{Header: &config.HeaderLocation{Name: "Authorization", Prefix: ptr("Bearer ")}}}},
			exchange{rt: Messages, body: messages, header: map[string]string{"X-Api-Key": "client-secret"}}, "messages", anthropicVersion},
		{"passthrough", &config.BackendAuth{Passthrough: &config.BackendAuthPassthrough{}},
			exchange{rt: Messages, body: messages, header: map[string]string{"X-Api-Key": a.APIKey}}, "messages", anthropicVersion},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, at(a.Addr(), anthropic()), tt.auth)
			r := accepted(t, a.Server, send(t, p, tt.x))
			if r.Op != tt.op || r.Header.Get("Anthropic-Version") != tt.version {
				t.Errorf("op %q anthropic-version %q; want %q %q", r.Op, r.Header.Get("Anthropic-Version"), tt.op, tt.version)
			}
			noClientSecret(t, r)
		})
	}
}

func TestGemini(t *testing.T) {
	g := llmtest.NewGemini(t)
	tests := []struct {
		desc   string
		auth   *config.BackendAuth
		x      exchange
		path   string
		stream bool
	}{
		{"generateContent", keyAuth(g.APIKey), exchange{rt: Completions, body: chatFor("gemini-2.5-flash", false), header: clientCredentials},
			"/v1beta/models/gemini-2.5-flash:generateContent", false},
		{"stream", keyAuth(g.APIKey), exchange{rt: Completions, body: chatFor("gemini-2.5-flash", true), path: "/v1/chat/completions?alt=json"},
			"/v1beta/models/gemini-2.5-flash:streamGenerateContent", true},
		{"messages client, resource name", keyAuth(g.APIKey), exchange{rt: Messages, body: `{"model":"models/gemini-2.5-pro","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":true}`},
			"/v1beta/models/gemini-2.5-pro:streamGenerateContent", true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, at(g.Addr(), gemini()), tt.auth)
			res := send(t, p, tt.x)
			r := accepted(t, g.Server, res)
			if r.Path != tt.path || r.Stream != tt.stream {
				t.Errorf("path %q stream %v, want %q %v", r.Path, r.Stream, tt.path, tt.stream)
			}
			if alt := r.Query["alt"]; tt.stream && (len(alt) != 1 || alt[0] != "sse" || !strings.HasPrefix(res.body, "data: ")) {
				t.Errorf("alt %q, body %.40q: want one alt=sse and an SSE answer", alt, res.body)
			}
			if r.Header.Get("X-Goog-Api-Key") != g.APIKey || r.Header.Get("Authorization") != "" {
				t.Errorf("x-goog-api-key %q Authorization %q", r.Header.Get("X-Goog-Api-Key"), r.Header.Get("Authorization"))
			}
			noClientSecret(t, r)
		})
	}
}

func TestCustom(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	a := llmtest.NewAnthropic(t)
	tests := []struct {
		desc    string
		server  *llmtest.Server
		formats []config.ProviderFormat
		auth    *config.BackendAuth
		x       exchange
		op      string
	}{
		{"completions", o.Server, []config.ProviderFormat{{Type: "completions"}}, keyAuth(o.APIKey),
			exchange{rt: Messages, body: `{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`}, "chat.completions"},
		{"responses native", o.Server, []config.ProviderFormat{{Type: "completions"}, {Type: "responses"}}, keyAuth(o.APIKey),
			exchange{rt: Responses, body: `{"model":"gpt-4o-mini","input":"hi"}`}, "responses"},
		{"messages at its path", a.Server, []config.ProviderFormat{{Type: "messages", Path: ptr("/v1/messages")}},
			&config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: a.APIKey},
				Location: &config.AuthLocation{Header: &config.HeaderLocation{Name: "x-api-key"}}}},
			exchange{rt: Completions, body: chatFor("claude-sonnet-4-5", false), header: map[string]string{"anthropic-version": anthropicVersion}}, "messages"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			addr := strings.TrimPrefix(tt.server.URL, "http://")
			p := mustNew(t, at(addr, custom(tt.formats...)), tt.auth)
			r := accepted(t, tt.server, send(t, p, tt.x))
			if r.Op != tt.op {
				t.Errorf("op %q, want %q", r.Op, tt.op)
			}
		})
	}
}

// TestKeyLocations: the key goes where key.location says, and every value
// a client sent in a credential header (or the location's header) is gone.
func TestKeyLocations(t *testing.T) {
	tests := []struct {
		desc     string
		location *config.AuthLocation
		want     map[string][]string // header name -> values after Authorize
	}{
		{"default", nil, map[string][]string{"Authorization": {"Bearer k"}, "X-Custom-Key": {"client-secret", "client-secret"}}},
		{"custom header", &config.AuthLocation{Header: &config.HeaderLocation{Name: "x-custom-key", Prefix: ptr("Key ")}},
			map[string][]string{"X-Custom-Key": {"Key k"}, "Authorization": nil}},
		{"cookie", &config.AuthLocation{Cookie: &config.NamedLocation{Name: "session"}},
			map[string][]string{"Authorization": nil, "Cookie": {"theme=dark; session=k"}}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, named(openAI()), &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "k"}, Location: tt.location}})
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			for _, h := range []string{"Authorization", "Authorization", "X-Api-Key", "X-Custom-Key", "X-Custom-Key"} {
				req.Header.Add(h, "client-secret")
			}
			req.Header.SetCookie("theme", "dark")
			req.Header.SetCookie("session", "client-secret")
			req.Header.Add("Cookie", "session=client-secret-2")
			if err := p.Authorize(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for k, v := range req.Header.All() {
				got[string(k)] = append(got[string(k)], string(v))
			}
			for name, want := range tt.want {
				if strings.Join(got[name], "|") != strings.Join(want, "|") {
					t.Errorf("%s: %q, want %q", name, got[name], want)
				}
			}
			if got["X-Api-Key"] != nil {
				t.Errorf("X-Api-Key: %q", got["X-Api-Key"])
			}
		})
	}
}

// TestProviderHeaders: anthropic-version goes where Anthropic's API is
// served, unless the client chose one.
func TestProviderHeaders(t *testing.T) {
	tests := []struct {
		desc     string
		provider config.AIProvider
		target   string
		client   string // the client's anthropic-version
		want     string
	}{
		{"anthropic", anthropic(), "/v1/messages", "", anthropicVersion},
		{"anthropic passthrough", anthropic(), "/v1/files", "", anthropicVersion},
		{"anthropic, the client's", anthropic(), "/v1/messages", "2023-01-01", "2023-01-01"},
		{"foundry claude", azure("foundry", nil), "/anthropic/v1/messages", "", anthropicVersion},
		{"foundry gpt", azure("foundry", nil), "/api/projects/res/openai/v1/chat/completions", "", ""},
		{"azure openAI", azure("openAI", nil), "/anthropic/v1/messages", "", ""},
		{"openAI", openAI(), "/v1/messages", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, named(tt.provider), nil)
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			req.SetRequestURI(tt.target)
			if tt.client != "" {
				req.Header.Set("Anthropic-Version", tt.client)
			}
			if err := p.Authorize(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := string(req.Header.Peek("Anthropic-Version")); got != tt.want {
				t.Errorf("anthropic-version %q, want %q", got, tt.want)
			}
		})
	}
}
