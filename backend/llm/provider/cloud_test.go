package provider

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/oauth2"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/config"
)

func vertexAt(v *llmtest.Vertex) *config.NamedAIProvider {
	return at(v.Addr(), config.AIProvider{Vertex: &config.VertexProvider{Region: v.Location, ProjectID: v.Project}})
}

func TestVertex(t *testing.T) {
	v := llmtest.NewVertex(t)
	file := v.ServiceAccountFile()
	fileAuth := &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{File: file}}}
	inlineAuth := &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{Inline: string(v.ServiceAccountJSON())}}}
	tests := []struct {
		desc  string
		auth  *config.BackendAuth
		adc   bool // GOOGLE_APPLICATION_CREDENTIALS names the key file
		x     exchange
		op    string
		model string
		check func(t *testing.T, r llmtest.Request)
	}{
		{"gemini, credential file", fileAuth, false, exchange{rt: Completions, body: chatFor("gemini-2.5-flash", false), header: clientCredentials},
			"generateContent", "gemini-2.5-flash", nil},
		{"gemini stream, inline credential", inlineAuth, false, exchange{rt: Completions, body: chatFor("gemini-2.5-flash", true)},
			"streamGenerateContent", "gemini-2.5-flash", func(t *testing.T, r llmtest.Request) {
				if r.Query.Get("alt") != "sse" {
					t.Errorf("alt %q", r.Query.Get("alt"))
				}
			}},
		{"claude, ADC", nil, true, exchange{rt: Messages, body: `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
			"rawPredict", "claude-sonnet-4-5", checkVertexClaudeBody},
		{"claude stream from a chat client, gcp ADC", &config.BackendAuth{GCP: &config.GCPAuth{}}, true, exchange{rt: Completions, body: chatFor("claude-sonnet-4-5", true)},
			"streamRawPredict", "claude-sonnet-4-5", checkVertexClaudeBody},
		{"claude count tokens", fileAuth, false, exchange{rt: AnthropicTokenCount, body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`},
			"count_tokens", "claude-sonnet-4-5", func(t *testing.T, r llmtest.Request) {
				if m := r.JSON(); m["anthropic_version"] != "vertex-2023-10-16" {
					t.Errorf("body %s", r.Body)
				}
			}},
		{"other model, OpenAI-compatible", fileAuth, false, exchange{rt: Completions, body: chatFor("meta/llama-3.3-70b-instruct-maas", false)},
			"chat.completions", "meta/llama-3.3-70b-instruct-maas", nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if tt.adc {
				t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
			} else {
				t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent.json"))
			}
			p := mustNew(t, vertexAt(v), tt.auth)
			r := accepted(t, v.Server, send(t, p, tt.x))
			if r.Op != tt.op || r.Model != tt.model {
				t.Errorf("op %q model %q, want %q %q", r.Op, r.Model, tt.op, tt.model)
			}
			if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ya29.emu-") {
				t.Errorf("Authorization %q", r.Header.Get("Authorization"))
			}
			noClientSecret(t, r)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func checkVertexClaudeBody(t *testing.T, r llmtest.Request) {
	t.Helper()
	m := r.JSON()
	if _, has := m["model"]; has || m["anthropic_version"] != "vertex-2023-10-16" {
		t.Errorf("body %s: want anthropic_version and no model", r.Body)
	}
}

// TestVertexTokenCache: one token serves many requests, concurrent ones
// included, until near its expiry; then a new one is fetched, without
// holding up the requests the old one still serves.
func TestVertexTokenCache(t *testing.T) {
	v := llmtest.NewVertex(t)
	v.TokenLifetime = 10 * time.Minute
	p := mustNew(t, vertexAt(v), &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{File: v.ServiceAccountFile()}}})
	cache := p.creds.(*gcpCredentials).tokens
	var mu sync.Mutex
	now := time.Now()
	cache.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	x := exchange{rt: Completions, body: chatFor("gemini-2.5-flash", false)}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := trySend(t, p, x)
			if err != nil || res.status != 200 {
				t.Errorf("status %d, %v", res.status, err)
			}
		})
	}
	wg.Wait()
	accepted(t, v.Server, send(t, p, x))
	if n := len(v.TokenRequests()); n != 1 {
		t.Fatalf("%d token requests for 9 requests, want 1", n)
	}
	first := v.Last().Header.Get("Authorization")

	advance(v.TokenLifetime - 2*refreshMargin) // still well within
	accepted(t, v.Server, send(t, p, x))
	if n := len(v.TokenRequests()); n != 1 || v.Last().Header.Get("Authorization") != first {
		t.Fatalf("%d token requests, want the first token reused", n)
	}

	// Within a minute of its expiry the token still serves the request
	// that finds it so, while a new one is fetched; the next request has
	// that one.
	advance(refreshMargin + time.Second)
	accepted(t, v.Server, send(t, p, x))
	if v.Last().Header.Get("Authorization") != first {
		t.Fatal("a request waited for the refresh of a token still valid")
	}
	pollUntil(t, "the refresh", func() bool { return string(cache.cur.Load().header) != first })
	accepted(t, v.Server, send(t, p, x))
	if n := len(v.TokenRequests()); n != 2 || v.Last().Header.Get("Authorization") == first {
		t.Fatalf("%d token requests, want a second token near expiry", n)
	}
}

// TestVertexTokenErrors: a credential the token endpoint refuses fails
// Authorize with a message and no secret; the request is not sent.
func TestVertexTokenErrors(t *testing.T) {
	v := llmtest.NewVertex(t)
	other := llmtest.NewVertex(t) // its key file points at its own endpoint
	var key map[string]string
	if err := json.Unmarshal(other.ServiceAccountJSON(), &key); err != nil {
		t.Fatal(err)
	}
	key["token_uri"] = v.TokenURL() // signed by another key
	forged, _ := json.Marshal(key)
	tests := []struct {
		desc string
		auth *config.BackendAuth
		want string
	}{
		{"signed by another key", &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{Inline: string(forged)}}}, "invalid_grant"},
		{"missing file", &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{File: filepath.Join(t.TempDir(), "none.json")}}}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, vertexAt(v), tt.auth)
			before := len(v.Requests())
			_, err := trySend(t, p, exchange{rt: Completions, body: chatFor("gemini-2.5-flash", false)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Authorize = %v, want an error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error %q shows the key", err)
			}
			if len(v.Requests()) != before {
				t.Error("the request was sent")
			}
		})
	}
}

// hungTokenEndpoint is a provider whose token endpoint can hang.
type hungTokenEndpoint struct {
	p             *Provider
	hang          func(on bool)
	hung          func() int // token requests hanging now
	tokenRequests func() int // token requests answered
	token         string     // a token the endpoint issued ("" for any)
}

func hungVertex(t *testing.T) hungTokenEndpoint {
	v := llmtest.NewVertex(t)
	p := mustNew(t, vertexAt(v), &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{File: v.ServiceAccountFile()}}})
	return hungTokenEndpoint{p: p, hang: v.HangTokens, hung: v.HungTokenRequests,
		tokenRequests: func() int { return len(v.TokenRequests()) }}
}

func hungEntra(t *testing.T) hungTokenEndpoint {
	isolateAzure(t)
	e := newEntraID(t)
	p := mustNew(t, azureAt(llmtest.NewAzure(t), "openAI"), clientSecretAuth(e, e.secret))
	p.creds.(*entraCredentials).options = e.options()
	return hungTokenEndpoint{p: p, hang: e.hangTokens, hung: e.hungRequests,
		tokenRequests: func() int { return len(e.tokenRequests()) }, token: e.token}
}

// authorizeAsync runs Authorize with ctx; the channel gets its header or
// error.
func authorizeAsync(p *Provider, ctx context.Context) <-chan authResult {
	done := make(chan authResult, 1)
	go func() {
		req := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(req)
		err := p.Authorize(ctx, req)
		done <- authResult{string(req.Header.Peek("Authorization")), err}
	}()
	return done
}

type authResult struct {
	header string
	err    error
}

func waitAuth(t *testing.T, what string, done <-chan authResult, bound time.Duration) authResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(bound):
		t.Fatalf("%s: Authorize still waiting after %v", what, bound)
		return authResult{}
	}
}

func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTokenEndpointHung: a token endpoint that does not answer (GCP's
// token_uri, Entra ID's) holds a fetch no longer than tokenFetchTimeout,
// however long the requests waiting for it may wait; each waiting request
// stops waiting when its own context ends (its client hung up), without
// ending the fetch the others wait for; a request that joined the hung
// fetch and saw it fail asks again, and gets a token from an endpoint that
// recovered meanwhile; a later request is not handed the failure. Before,
// the fetch ran within the first request's context (a minute), a hang-up
// ended it for all, and its failure reached the requests that had joined
// it.
func TestTokenEndpointHung(t *testing.T) {
	defer func(d time.Duration) { tokenFetchTimeout = d }(tokenFetchTimeout)
	tokenFetchTimeout = 500 * time.Millisecond
	const long = 30 * time.Second // the requests' own deadline
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T) hungTokenEndpoint
	}{
		{"vertex", hungVertex},
		{"azure", hungEntra},
	} {
		t.Run(tt.name+"/fetch bounded", func(t *testing.T) {
			h := tt.setup(t)
			h.hang(true)
			ctx, cancel := context.WithTimeout(context.Background(), long)
			defer cancel()
			start := time.Now()
			r := waitAuth(t, "request", authorizeAsync(h.p, ctx), 5*time.Second)
			if r.err == nil {
				t.Fatalf("Authorize succeeded (%q) with a hung token endpoint", r.header)
			}
			if d := time.Since(start); d < tokenFetchTimeout {
				t.Errorf("failed after %v, before the fetch's bound %v: %v", d, tokenFetchTimeout, r.err)
			}
			pollUntil(t, "the hung token request to end", func() bool { return h.hung() == 0 })

			h.hang(false) // recovered: the next request fetches again
			r = waitAuth(t, "request after the failure", authorizeAsync(h.p, ctx), 5*time.Second)
			if r.err != nil || !strings.HasPrefix(r.header, "Bearer ") {
				t.Fatalf("after the endpoint recovered: %q, %v", r.header, r.err)
			}
		})
		t.Run(tt.name+"/waiters", func(t *testing.T) {
			// Long enough for the fetch to be seen going on after the
			// first request went away.
			tokenFetchTimeout = 2 * time.Second
			defer func() { tokenFetchTimeout = 500 * time.Millisecond }()
			h := tt.setup(t)
			h.hang(true)
			// The first request starts the fetch; its client hangs up.
			firstCtx, hangUp := context.WithCancel(context.Background())
			first := authorizeAsync(h.p, firstCtx)
			pollUntil(t, "the token request", func() bool { return h.hung() == 1 })
			// A second waits for the same fetch; the endpoint recovers.
			ctx, cancel := context.WithTimeout(context.Background(), long)
			defer cancel()
			second := authorizeAsync(h.p, ctx)
			hangUp()
			r := waitAuth(t, "the request whose client hung up", first, time.Second)
			if !errors.Is(r.err, context.Canceled) {
				t.Errorf("first: %q, %v; want its context's end", r.header, r.err)
			}
			if n := h.hung(); n != 1 {
				t.Errorf("%d token requests hanging after the first request went away, want the fetch going on", n)
			}
			h.hang(false)
			r = waitAuth(t, "the request that joined the hung fetch", second, 5*time.Second)
			if r.err != nil || !strings.HasPrefix(r.header, "Bearer "+h.token) {
				t.Fatalf("second: %q, %v; want a token fetched once the endpoint recovered", r.header, r.err)
			}
			if n := h.tokenRequests(); n != 1 {
				t.Errorf("%d token requests answered, want 1", n)
			}
			// The token is cached.
			r = waitAuth(t, "a later request", authorizeAsync(h.p, ctx), time.Second)
			if r.err != nil || h.tokenRequests() != 1 {
				t.Errorf("later: %q, %v after %d token requests", r.header, r.err, h.tokenRequests())
			}
		})
	}
}

// TestTokenCacheFlight: while one fetch runs, other requests wait for it
// within their own context; the fetch is not the first request's: it goes
// on when that one goes away, and its token serves the others.
func TestTokenCacheFlight(t *testing.T) {
	started := make(chan struct{}, 4)
	finish := make(chan *oauth2.Token)
	var fetches atomic.Int32
	c := &tokenCache{what: "test token", now: time.Now, fetch: func(ctx context.Context) (*oauth2.Token, error) {
		fetches.Add(1)
		started <- struct{}{}
		select {
		case tok := <-finish:
			return tok, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	token := func(s string) *oauth2.Token { return &oauth2.Token{AccessToken: s, Expiry: time.Now().Add(time.Hour)} }

	// A first request starts a fetch, then goes away.
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() { _, err := c.header(firstCtx); firstDone <- err }()
	<-started

	// A second one waits for it; a third gives up at its deadline.
	secondDone := make(chan []byte, 1)
	go func() {
		h, err := c.header(context.Background())
		if err != nil {
			t.Errorf("second: %v", err)
		}
		secondDone <- h
	}()
	shortCtx, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := c.header(shortCtx); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("third = %v, want its deadline", err)
	}

	cancelFirst()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Errorf("first: %v, want its context's end", err)
	}
	finish <- token("tok-1") // the fetch went on
	if h := <-secondDone; string(h) != "Bearer tok-1" {
		t.Errorf("second got %q", h)
	}
	if h, err := c.header(context.Background()); err != nil || string(h) != "Bearer tok-1" || fetches.Load() != 1 {
		t.Errorf("cached: %q, %v after %d fetches; want the token of the one fetch", h, err, fetches.Load())
	}
}

const bedrockModel = "anthropic.claude-3-5-sonnet-20240620-v1:0"

func bedrockAt(b *llmtest.Bedrock) *config.NamedAIProvider {
	return at(b.Addr(), config.AIProvider{Bedrock: &config.BedrockProvider{Region: b.Region}})
}

// isolateAWS keeps the default chain to the environment the test sets.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
		"AWS_SESSION_TOKEN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
	} {
		t.Setenv(k, v)
	}
}

func TestBedrock(t *testing.T) {
	b := llmtest.NewBedrock(t)
	const arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20240620-v1:0"
	explicit := func(session string) *config.BackendAuth {
		return &config.BackendAuth{AWS: &config.AWSAuth{AccessKeyID: b.AccessKeyID,
			SecretAccessKey: config.SecretString(b.SecretAccessKey), SessionToken: config.SecretString(session)}}
	}
	tests := []struct {
		desc    string
		auth    *config.BackendAuth
		env     map[string]string
		session string // the emulator's required session token
		x       exchange
		op      string
		model   string
		path    string
	}{
		{"explicit keys", explicit(""), nil, "",
			exchange{rt: Completions, body: chatFor(bedrockModel, false), header: clientCredentials}, "converse", bedrockModel, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"},
		{"session token, stream", explicit("emulated-session-token"), nil, "emulated-session-token",
			exchange{rt: Messages, body: `{"model":"` + bedrockModel + `","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
			"converse-stream", bedrockModel, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"},
		{"ARN", explicit(""), nil, "",
			exchange{rt: Responses, body: `{"model":"` + arn + `","input":"hi"}`}, "converse", arn,
			"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"},
		{"default chain without backendAuth", nil, map[string]string{"AWS_ACCESS_KEY_ID": b.AccessKeyID, "AWS_SECRET_ACCESS_KEY": b.SecretAccessKey}, "",
			exchange{rt: Completions, body: chatFor(bedrockModel, true), path: "/v1/chat/completions?trace=1&a=b%20c"}, "converse-stream", bedrockModel,
			"/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"},
		{"default chain with a session token", &config.BackendAuth{AWS: &config.AWSAuth{}},
			map[string]string{"AWS_ACCESS_KEY_ID": b.AccessKeyID, "AWS_SECRET_ACCESS_KEY": b.SecretAccessKey, "AWS_SESSION_TOKEN": "env-session"}, "env-session",
			exchange{rt: Completions, body: chatFor(bedrockModel, false), header: map[string]string{"X-Amz-Security-Token": "client-secret", "X-Amz-Date": "20000101T000000Z"}},
			"converse", bedrockModel, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			isolateAWS(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			b.SessionToken = tt.session
			p := mustNew(t, bedrockAt(b), tt.auth)
			res := send(t, p, tt.x)
			r := accepted(t, b.Server, res)
			if r.Op != tt.op || r.Model != tt.model || r.Path != tt.path {
				t.Errorf("op %q model %q path %q; want %q %q %q", r.Op, r.Model, r.Path, tt.op, tt.model, tt.path)
			}
			if tt.op == "converse-stream" && res.ctype != "application/vnd.amazon.eventstream" {
				t.Errorf("content type %q", res.ctype)
			}
			if a := r.Header.Get("Authorization"); !strings.Contains(a, "/us-east-1/bedrock/aws4_request") ||
				!strings.Contains(a, "SignedHeaders=content-type;host;x-amz-date") {
				t.Errorf("Authorization %q", a)
			}
			noClientSecret(t, r)
		})
	}
}

// TestBedrockSignatureCoversTheRequest: a request changed after Authorize
// is refused, so the signature covers body, target and AWS headers.
func TestBedrockSignatureCoversTheRequest(t *testing.T) {
	b := llmtest.NewBedrock(t)
	auth := &config.BackendAuth{AWS: &config.AWSAuth{AccessKeyID: b.AccessKeyID, SecretAccessKey: config.SecretString(b.SecretAccessKey)}}
	p := mustNew(t, bedrockAt(b), auth)
	tests := []struct {
		desc   string
		change func(req *fasthttp.Request)
	}{
		{"body", func(req *fasthttp.Request) { req.SetBodyString(`{"messages":[]}`) }},
		{"target", func(req *fasthttp.Request) { req.SetRequestURI("/model/other/converse") }},
		{"aws header", func(req *fasthttp.Request) { req.Header.Set("X-Amz-Date", "20300101T000000Z") }},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			req.SetRequestURIBytes(p.AppendPath(nil, Completions, "m", false, nil))
			req.Header.SetMethod("POST")
			req.Header.SetHost(b.Addr())
			req.UseHostHeader = true
			req.SetBodyString(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
			req.Header.SetContentType("application/json")
			if err := p.Authorize(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			tt.change(req)
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseResponse(resp)
			c := &fasthttp.HostClient{Addr: b.Addr(), DisablePathNormalizing: true}
			if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 403 || b.Last().AuthError == "" {
				t.Errorf("status %d auth error %q: a changed request was accepted", resp.StatusCode(), b.Last().AuthError)
			}
		})
	}
}

// TestBedrockNoCredentials: without any credentials, Authorize says so.
func TestBedrockNoCredentials(t *testing.T) {
	isolateAWS(t)
	p := mustNew(t, bedrockAt(llmtest.NewBedrock(t)), nil)
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.Authorize(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "aws") {
		t.Fatalf("Authorize = %v, want an AWS credentials error", err)
	}
}
