package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// seenRequests records what an upstream was sent.
type seenRequests struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seenRequests) handler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	s.mu.Unlock()
	io.WriteString(w, "ok")
}

func (s *seenRequests) last(t *testing.T) *http.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the upstream got no request")
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *seenRequests) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// rotate writes a key file anew, dated an hour ahead so that its change
// shows whatever the file system's time resolution.
func rotate(t *testing.T, path, key string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
}

// TestBackendAuthKeyAndCredentials: backendAuth key and credentials on host
// backends put their secrets where they say (Authorization: Bearer by
// default, any header, a query parameter, a cookie), replacing what the
// client sent there; a backend's own backendAuth wins over its route's; a
// key file is read again when it changes, and one that cannot be read
// answers 502 without sending the request. These were refused as not
// implemented for backends other than ai ones.
func TestBackendAuthKeyAndCredentials(t *testing.T) {
	var up seenRequests
	addr := upstream(t, http.HandlerFunc(up.handler))
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("file-key-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - name: default-location
      matches: [{path: {pathPrefix: /bearer}}]
      policies: {backendAuth: {key: route-key}}
      backends: [{host: '${UP}'}]
    - name: backend-wins
      matches: [{path: {pathPrefix: /own}}]
      policies: {backendAuth: {key: route-key}}
      backends:
      - host: '${UP}'
        policies:
          backendAuth:
            key: {value: backend-key, location: {header: {name: X-Api-Key}}}
            credentials:
            - {location: {queryParameter: {name: api_key}}, key: query-secret}
            - {location: {cookie: {name: session}}, key: cookie-secret}
            - {location: {header: {name: X-Tenant, prefix: 'Tenant '}}, key: t1}
    - name: file
      matches: [{path: {pathPrefix: /file}}]
      policies: {backendAuth: {key: {file: '${KEY}'}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": addr, "KEY": keyFile})

	get := func(path string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", tg.url(3000)+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}

	if st, _ := get("/bearer", "Authorization", "Bearer client-token"); st != 200 {
		t.Fatalf("/bearer: %d", st)
	}
	if got := up.last(t).Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer route-key" {
		t.Errorf("Authorization %q, want only the route's key", got)
	}

	if st, _ := get("/own?q=1&api_key=client", "X-Api-Key", "client", "X-Api-Key", "client2", "Cookie", "session=client; other=kept", "Cookie", "session=client2"); st != 200 {
		t.Fatalf("/own: %d", st)
	}
	r := up.last(t)
	if got := r.Header.Values("X-Api-Key"); len(got) != 1 || got[0] != "backend-key" {
		t.Errorf("X-Api-Key %q, want only the backend's key, no prefix", got)
	}
	var sessions []string
	for _, c := range r.Cookies() {
		if c.Name == "session" {
			sessions = append(sessions, c.Value)
		}
	}
	if len(sessions) != 1 {
		t.Errorf("session cookies %q, want only the backend's", sessions)
	}
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization %q: the route's key went to a backend with its own", got)
	}
	if got := r.URL.Query(); got.Get("q") != "1" || len(got["api_key"]) != 1 || got.Get("api_key") != "query-secret" {
		t.Errorf("query %q, want q=1 and api_key=query-secret only", r.URL.RawQuery)
	}
	if c, err := r.Cookie("session"); err != nil || c.Value != "cookie-secret" {
		t.Errorf("session cookie %v %v, want cookie-secret", c, err)
	}
	if c, err := r.Cookie("other"); err != nil || c.Value != "kept" {
		t.Errorf("the client's other cookie: %v %v", c, err)
	}
	if got := r.Header.Get("X-Tenant"); got != "Tenant t1" {
		t.Errorf("X-Tenant %q", got)
	}

	if st, _ := get("/file"); st != 200 || up.last(t).Header.Get("Authorization") != "Bearer file-key-1" {
		t.Fatalf("/file: %d, Authorization %q", st, up.last(t).Header.Get("Authorization"))
	}
	// Rotated: the new key within the recheck period.
	rotate(t, keyFile, "file-key-2")
	eventually(t, 5*time.Second, "the rotated key", func() bool {
		st, _ := get("/file")
		return st == 200 && up.last(t).Header.Get("Authorization") == "Bearer file-key-2"
	})
	// A key file that holds no key (emptied mid-rotation) keeps the last
	// one; a gateway started on a missing file sends nothing.
	missing := filepath.Join(dir, "missing")
	tg.apply(`
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {backendAuth: {key: {file: '${KEY}'}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": addr, "KEY": missing})
	before := up.count()
	st, body := get("/x")
	if st != 502 || !strings.Contains(body, "backend credentials unavailable") || strings.Contains(body, missing) {
		t.Errorf("missing key file: %d %q, want 502 naming no file", st, body)
	}
	if up.count() != before {
		t.Errorf("the request went without its credentials")
	}
}

// TestMCPBackendAuthKey: an MCP backend's backendAuth key reaches its HTTP
// targets on every request of a session, a rotated key file too, and a
// reload that changes the key opens the session's targets again with the
// new one. A location other than a header is refused: an MCP target's URL
// is its own.
func TestMCPBackendAuthKey(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	target, _ := observedMCPTarget(t, func(r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
	})
	lastAuth := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := append([]string(nil), seen...)
		seen = seen[:0]
		return out
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("mcp-key-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(key string) string {
		return `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: '${T}' } }
        policies: {backendAuth: {key: ` + key + `}}
`
	}
	vars := map[string]string{"T": target, "KEY": keyFile}
	tg := startGateway(t, config("{file: '${KEY}'}"), vars)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: tg.url(3000) + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func() {
		t.Helper()
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"}); err != nil {
			t.Fatal(err)
		}
	}
	call()
	for _, s := range lastAuth() {
		if !strings.HasSuffix(s, " Bearer mcp-key-1") {
			t.Fatalf("a target request %q, want the key on each", s)
		}
	}
	// The file rotates: the open session's next requests carry the new
	// key.
	rotate(t, keyFile, "mcp-key-2")
	eventually(t, 5*time.Second, "the rotated key on the session's calls", func() bool {
		call()
		got := lastAuth()
		return len(got) > 0 && strings.HasSuffix(got[len(got)-1], " Bearer mcp-key-2")
	})
	// A reload with another key: the session goes on with it.
	tg.apply(config("inline-key"), vars)
	call()
	got := lastAuth()
	if len(got) == 0 || !strings.HasSuffix(got[len(got)-1], " Bearer inline-key") {
		t.Fatalf("after a reload with another key the target saw %q", got)
	}

	err = tg.gw.Apply(parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp: {targets: [{ name: t, mcp: { host: 'http://127.0.0.1:1/mcp' } }]}
        policies: {backendAuth: {key: {value: k, location: {queryParameter: {name: key}}}}}
`, nil))
	if err == nil || !strings.Contains(err.Error(), "backends[0].policies.backendAuth: an MCP backend takes credentials in headers only") {
		t.Errorf("a query location on an MCP backend: %v", err)
	}
}

// TestBackendAuthFixedRefusedOnDynamic: a dynamic backend goes wherever
// the client's Host says, so a fixed secret there would go to any host a
// client names (an attacker's included): key and credentials are refused
// on it, at either level; passthrough (the client's own token) and aws (a
// signature bound to the destination's name) are not.
func TestBackendAuthFixedRefusedOnDynamic(t *testing.T) {
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	t.Cleanup(func() { gw.Shutdown(expiredContext()) })
	for _, tc := range []struct {
		policies, backend string
		want              string
	}{
		{"", "{dynamic: {}, policies: {backendAuth: {key: k}}}", "routes[0].backends[0].policies.backendAuth: a dynamic backend's destination is the client's to choose"},
		{"{backendAuth: {credentials: [{location: {header: {name: x}}, key: k}]}}", "{dynamic: {}}", "routes[0].policies.backendAuth: a dynamic backend's destination is the client's to choose, so key and credentials would go wherever it asks: give the destinations that take them host backends (backends[0])"},
		{"{backendAuth: {key: k}}", "{dynamic: {}, policies: {backendAuth: {passthrough: {}}}}", ""},
		{"", "{dynamic: {}, policies: {backendAuth: {aws: {region: eu-west-3}}}}", ""},
	} {
		yaml := "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends: [" + tc.backend + "]\n"
		if tc.policies != "" {
			yaml += "      policies: " + tc.policies + "\n"
		}
		err := gw.Apply(parseConfig(t, yaml, nil))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v", tc.policies, tc.backend, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: %v, want %q", tc.policies, tc.backend, err, tc.want)
		}
	}
}

// TestBackendAuthAWSOnHostBackends: backendAuth aws signs a host backend's
// requests with SigV4 (an API Gateway behind IAM, say) as the AWS SDK's
// signer would have them: the emulated service checks every signature,
// queries and bodies included, a chunked body (read whole, since the
// signature covers its hash) and one from an HTTP/2 client too. A client's
// own signature is replaced; a body over maxBufferSize is refused 413
// without reaching the backend; an MCP backend cannot take aws. It was
// refused as implemented for ai backends only.
func TestBackendAuthAWSOnHostBackends(t *testing.T) {
	check := &llmtest.SigV4Check{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		Region: "eu-west-3", Service: "execute-api", MaxClockSkew: 5 * time.Minute}
	var mu sync.Mutex
	var verdicts []string
	addr := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reason, _, _ := check.Verify(r, body)
		mu.Lock()
		verdicts = append(verdicts, reason)
		mu.Unlock()
		if reason != "" {
			http.Error(w, reason, http.StatusForbidden)
			return
		}
		w.Write(body)
	}))
	tg := startGateway(t, `
frontendPolicies:
  http: {maxBufferSize: 65536}
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - host: '${UP}'
        policies:
          backendAuth:
            aws: {accessKeyId: AKIDEXAMPLE, secretAccessKey: wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, region: eu-west-3, serviceName: execute-api}
          http: {version: HTTP1}
`, map[string]string{"UP": addr})
	do := func(client *http.Client, method, path string, body io.Reader, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, tg.url(3000)+path, body)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(got)
	}
	big := strings.Repeat("x", 40000)
	for _, tc := range []struct {
		desc   string
		client *http.Client
		method string
		path   string
		body   func() io.Reader
		header []string
	}{
		{"GET with a query", http.DefaultClient, "GET", "/prod/items?b=2&a=1&sp=a%20b", nil, nil},
		{"POST by length", http.DefaultClient, "POST", "/prod/items", func() io.Reader { return strings.NewReader(`{"n":1}`) }, []string{"Content-Type", "application/json"}},
		{"POST chunked", http.DefaultClient, "POST", "/prod/items", func() io.Reader {
			return io.MultiReader(strings.NewReader(big[:20000]), strings.NewReader(big[20000:]))
		}, nil},
		{"the client's own signature", http.DefaultClient, "POST", "/prod/x", func() io.Reader { return strings.NewReader("b") },
			[]string{"Authorization", "AWS4-HMAC-SHA256 Credential=AKIDCLIENT/20200101/us-east-1/execute-api/aws4_request, SignedHeaders=host, Signature=00", "X-Amz-Date", "20200101T000000Z", "X-Amz-Security-Token", "client"}},
		{"h2c POST", h2cClient(), "POST", "/prod/h2", func() io.Reader { return io.MultiReader(strings.NewReader("h2 "), strings.NewReader("body")) }, nil},
	} {
		var body io.Reader
		want := ""
		if tc.body != nil {
			b, _ := io.ReadAll(tc.body())
			want = string(b)
			body = tc.body()
		}
		st, got := do(tc.client, tc.method, tc.path, body, tc.header...)
		if st != 200 || got != want {
			t.Errorf("%s: %d %.80q, want 200 and the body echoed", tc.desc, st, got)
		}
	}
	mu.Lock()
	n := len(verdicts)
	mu.Unlock()
	st, body := do(http.DefaultClient, "POST", "/prod/big", io.MultiReader(strings.NewReader(big), strings.NewReader(big)))
	if st != 413 {
		t.Errorf("a body over maxBufferSize: %d %q, want 413", st, body)
	}
	mu.Lock()
	if len(verdicts) != n {
		t.Errorf("the refused body reached the backend")
	}
	mu.Unlock()

	err := tg.gw.Apply(parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp: {targets: [{ name: t, mcp: { host: 'http://127.0.0.1:1/mcp' } }]}
        policies: {backendAuth: {aws: {region: eu-west-3}}}
`, nil))
	if err == nil || !strings.Contains(err.Error(), "backends[0].policies.backendAuth: an MCP backend does not sign its targets' requests") {
		t.Errorf("aws on an MCP backend: %v", err)
	}
}

// TestMCPCredentialsStayWithTheTarget: an MCP target that redirects the
// gateway to another host does not get its credentials sent there: they
// are the target's (a key in a header of its own, which net/http's
// redirects would carry to any host, and a passthrough token).
func TestMCPCredentialsStayWithTheTarget(t *testing.T) {
	var leaked atomic.Value
	leaked.Store("")
	elsewhere := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Authorization"))
		http.Error(w, "no", http.StatusNotFound)
	}))
	target := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+elsewhere+"/mcp", http.StatusTemporaryRedirect)
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: 'http://${T}/mcp' } }
        policies: {backendAuth: {key: {value: secret-key, location: {header: {name: X-Api-Key}}}}}
`, map[string]string{"T": target})
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := leaked.Load().(string); got != "" && got != "|" {
		t.Fatalf("the redirect's other host got the target's credentials: %q", got)
	}
	if got := leaked.Load().(string); got == "" {
		t.Fatal("the redirect was not followed: the test proves nothing")
	}
}

// swappableBearer is an MCP client's token, which it refreshes.
type swappableBearer struct{ token atomic.Value }

func (b *swappableBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token.Load().(string))
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPPassthroughFollowsTheClientsToken: with backendAuth passthrough,
// a session's targets get the token of the client's latest request: a
// client that refreshes its expiring token keeps working upstream, where
// the token of the request that opened the session used to go on until
// the target refused it.
func TestMCPPassthroughFollowsTheClientsToken(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	var seen atomic.Value
	seen.Store("")
	target, _ := observedMCPTarget(t, func(r *http.Request) {
		if r.Method == http.MethodPost {
			seen.Store(r.Header.Get("Authorization"))
		}
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        jwtAuth: { issuer: i, jwks: { file: '${JWKS}' } }
        backendAuth: { passthrough: {} }
      backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: '${T}' } }
`, map[string]string{"JWKS": iss.WriteJWKSFile(t), "T": target})
	first := iss.Sign(jwt.MapClaims{"iss": "i", "sub": "u", "exp": time.Now().Add(time.Hour).Unix(), "jti": "1"})
	second := iss.Sign(jwt.MapClaims{"iss": "i", "sub": "u", "exp": time.Now().Add(2 * time.Hour).Unix(), "jti": "2"})
	rt := &swappableBearer{}
	rt.token.Store(first)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: tg.url(3000) + "/mcp", HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"}); err != nil {
		t.Fatal(err)
	}
	if got := seen.Load(); got != "Bearer "+first {
		t.Fatalf("the target saw %q, want the first token", got)
	}
	rt.token.Store(second)
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"}); err != nil {
		t.Fatal(err)
	}
	if got := seen.Load(); got != "Bearer "+second {
		t.Fatalf("after the client refreshed its token the target saw %q, want the new one", got)
	}
}

// TestLLMProviderCredentials: backendAuth credentials on an ai backend go
// with the provider's own key (an API manager's subscription key beside
// it, say), replacing what the client sent there; on a Bedrock provider
// they go before the SigV4 signature, which the emulator still accepts.
// They were refused as not implemented for LLM providers.
func TestLLMProviderCredentials(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	b := llmtest.NewBedrock(t)
	o.SetDefault(llmtest.Reply{Text: "ok"})
	b.SetDefault(llmtest.Reply{Text: "ok"})
	tg := startGateway(t, `
binds:
- port: 8080
  listeners:
  - routes:
    - name: openai
      matches: [{path: {pathPrefix: /openai}}]
      policies: {urlRewrite: {path: {prefix: /}}}
      backends:
      - ai:
          name: o
          hostOverride: '${O}'
          provider: {openAI: {}}
          policies:
            backendAuth:
              key: '${OKEY}'
              credentials: [{location: {header: {name: Ocp-Apim-Subscription-Key}}, key: sub-1}]
    - name: bedrock
      matches: [{path: {pathPrefix: /bedrock}}]
      policies: {urlRewrite: {path: {prefix: /}}}
      backends:
      - ai:
          name: b
          hostOverride: '${B}'
          provider: {bedrock: {region: '${REGION}'}}
          policies:
            backendAuth:
              aws: {accessKeyId: '${AK}', secretAccessKey: '${SK}'}
              credentials: [{location: {header: {name: X-Tenant}}, key: tenant-1}]
`, map[string]string{"O": o.Addr(), "OKEY": o.APIKey, "B": b.Addr(), "REGION": b.Region, "AK": b.AccessKeyID, "SK": b.SecretAccessKey})
	for _, tc := range []struct {
		prefix, model string
		emu           *llmtest.Server
		header, want  string
	}{
		{"/openai", "gpt-4o-mini", o.Server, "Ocp-Apim-Subscription-Key", "sub-1"},
		{"/bedrock", "anthropic.claude-3-haiku-20240307-v1:0", b.Server, "X-Tenant", "tenant-1"},
	} {
		req, _ := http.NewRequest("POST", tg.url(8080)+tc.prefix+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+tc.model+`","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add(tc.header, "client-value")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.prefix, resp.StatusCode, body)
		}
		reqs := tc.emu.Requests()
		last := reqs[len(reqs)-1]
		if got := last.Header.Values(tc.header); len(got) != 1 || got[0] != tc.want || last.AuthError != "" {
			t.Errorf("%s: %s %q (auth error %q), want only %q", tc.prefix, tc.header, got, last.AuthError, tc.want)
		}
	}
}
