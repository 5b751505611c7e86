package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// mcpTarget starts a streamable HTTP MCP server on 127.0.0.1 whose tools
// answer "<name>:<tool>"; calls counts the calls that reached it.
func mcpTarget(t *testing.T, name string, tools ...string) (url string, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	srv := sdk.NewServer(&sdk.Implementation{Name: name, Version: "1"}, nil)
	for _, tool := range tools {
		srv.AddTool(&sdk.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			calls.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name + ":" + tool}}}, nil
		})
	}
	return upstream(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)) + "/mcp", calls
}

// observedMCPTarget is an MCP server with the tool echo whose every
// request observe sees first; it returns its endpoint and the server (to
// change its tools).
func observedMCPTarget(t *testing.T, observe func(*http.Request)) (string, *sdk.Server) {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		observe(r)
		h.ServeHTTP(w, r)
	})) + "/mcp", srv
}

// bearer adds a token to every request of an MCP client.
type bearer struct {
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func mcpConnect(t *testing.T, endpoint, token string) (*sdk.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

const specExample = `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{ path: { exact: /mcp } }]
      policies:
        cors:
          allowOrigins: ["*"]
          allowHeaders: ["*"]
          exposeHeaders: [Mcp-Session-Id]
        jwtAuth:
          issuer: agentgateway.dev
          audiences: [test.agentgateway.dev]
          jwks: { file: '${JWKS}' }
        mcpAuthorization:
          rules:
          - 'mcp.tool.name == "echo"'
          - 'jwt.sub == "test-user" && mcp.tool.name == "add"'
          - 'mcp.tool.name == "printEnv" && jwt.nested.key == "value"'
          - '"admin" in jwt.roles && mcp.tool.name == "tool-admin"'
          - 'jwt.email.endsWith("@example.com") && mcp.tool.name == "tool-mail"'
      backends:
      - mcp:
          targets:
          - name: everything
            mcp: { host: '${TARGET}' }
`

// TestMCPSpecExample: the spec's three-rule example, with the role and
// e-mail rules beside it, through the real gateway, the official SDK client
// and a real MCP server.
func TestMCPSpecExample(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	target, calls := mcpTarget(t, "everything", "echo", "add", "printEnv", "tool-admin", "tool-mail", "hidden-1", "hidden-2")
	tg := startGateway(t, specExample, map[string]string{"JWKS": iss.WriteJWKSFile(t), "TARGET": target})
	endpoint := tg.url(3000) + "/mcp"
	claims := func(extra jwt.MapClaims) string {
		c := jwt.MapClaims{"iss": "agentgateway.dev", "aud": "test.agentgateway.dev", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range extra {
			c[k] = v
		}
		return iss.Sign(c)
	}
	tests := []struct {
		desc  string
		extra jwt.MapClaims
		want  []string
	}{
		{"three rules", jwt.MapClaims{"sub": "test-user", "nested": map[string]any{"key": "value"}}, []string{"add", "echo", "printEnv"}},
		{"public only", jwt.MapClaims{"sub": "someone"}, []string{"echo"}},
		{"role", jwt.MapClaims{"sub": "x", "roles": []string{"dev", "admin"}}, []string{"echo", "tool-admin"}},
		{"e-mail domain", jwt.MapClaims{"sub": "x", "email": "a@example.com"}, []string{"echo", "tool-mail"}},
		{"e-mail elsewhere", jwt.MapClaims{"sub": "x", "email": "a@example.org"}, []string{"echo"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			cs, err := mcpConnect(t, endpoint, claims(tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, tc.want) {
				t.Fatalf("tools = %v, want %v", got, tc.want)
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo"})
			if err != nil || res.Content[0].(*sdk.TextContent).Text != "everything:echo" {
				t.Fatalf("echo: %v %v", res, err)
			}
			before := calls.Load()
			for _, hidden := range []string{"hidden-1", "tool-admin", "add"} {
				if slices.Contains(tc.want, hidden) {
					continue
				}
				_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: hidden})
				if err == nil || !strings.Contains(err.Error(), "Unknown tool: "+hidden) {
					t.Fatalf("call %s: %v, want Unknown tool", hidden, err)
				}
			}
			if calls.Load() != before {
				t.Fatalf("a denied call reached the target")
			}
		})
	}
}

// TestMCPRefusedTokens: every bad token is refused before MCP runs, with
// 401 and WWW-Authenticate.
func TestMCPRefusedTokens(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	other := jwttest.NewIssuer(t, "RS256")
	target, calls := mcpTarget(t, "everything", "echo")
	tg := startGateway(t, specExample, map[string]string{"JWKS": iss.WriteJWKSFile(t), "TARGET": target})
	endpoint := tg.url(3000) + "/mcp"
	good := jwt.MapClaims{"iss": "agentgateway.dev", "aud": "test.agentgateway.dev", "sub": "u", "exp": time.Now().Add(time.Hour).Unix()}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for key, val := range good {
			c[key] = val
		}
		c[k] = v
		return c
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, good).SignedString(jwt.UnsafeAllowNoneSignatureType)
	tests := []struct{ desc, token string }{
		{"no token", ""},
		{"garbage", "not.a.jwt"},
		{"expired", iss.Sign(with("exp", time.Now().Add(-time.Hour).Unix()))},
		{"not yet valid", iss.Sign(with("nbf", time.Now().Add(time.Hour).Unix()))},
		{"wrong issuer", iss.Sign(with("iss", "evil"))},
		{"wrong audience", iss.Sign(with("aud", "elsewhere"))},
		{"alg none", none},
		{"signed by another key", other.Sign(good)},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	if calls.Load() != 0 {
		t.Fatal("a refused request reached the target")
	}
	// CORS preflight is answered before authentication.
	req, _ := http.NewRequest(http.MethodOptions, endpoint, nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, _ := do(t, req)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestMCPMultiplexAndMetrics: two targets behind one endpoint, prefixed;
// calls show in the MCP metrics by target and tool.
func TestMCPMultiplexAndMetrics(t *testing.T) {
	a, _ := mcpTarget(t, "a", "echo")
	b, bCalls := mcpTarget(t, "b", "echo", "sum")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - name: tools
      backends:
      - mcp:
          targets:
          - { name: a, mcp: { host: '${A}' } }
          - { name: b, mcp: { host: '${B}' } }
`, map[string]string{"A": a, "B": b})
	cs, err := mcpConnect(t, tg.url(3000)+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"a_echo", "b_echo", "b_sum"}) {
		t.Fatalf("tools %v", got)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "b_sum"})
	if err != nil || res.Content[0].(*sdk.TextContent).Text != "b:sum" || bCalls.Load() != 1 {
		t.Fatalf("b_sum: %v %v (b saw %d calls)", res, err, bCalls.Load())
	}
	eventually(t, 5*time.Second, "an access log line for the call", func() bool {
		for _, e := range tg.accessLogs().FilterMessage("request").All() {
			f := e.ContextMap()
			if f["mcp.method"] == "tools/call" && f["mcp.target"] == "b" && f["mcp.tool"] == "sum" {
				return true
			}
		}
		return false
	})
	var text strings.Builder
	tg.metrics().WritePrometheus(&text)
	want := `agentgateway_mcp_requests_total{route="tools",method="tools/call",target="b",tool="sum"} 1`
	if !strings.Contains(text.String(), want) {
		t.Fatalf("metrics lack %s", want)
	}
}

// stdioTarget is the YAML of a stdio target running this test binary as an
// MCP server.
func stdioTarget(name string) string {
	return "{ name: " + name + ", stdio: { cmd: '" + os.Args[0] + "', args: ['-test.run=^$'], env: { " + stdioServerEnv + ": " + name + " } } }"
}

// TestMCPStdioTargets: a stdio target and an HTTP one multiplexed; sessions
// keep their process (count goes on), a new session gets a new one; a
// target that crashes mid-call answers the call with an error instead of
// hanging, the other target keeps working, and the crashed one is started
// again by its next call; DELETE ends the session.
func TestMCPStdioTargets(t *testing.T) {
	web, _ := mcpTarget(t, "web", "echo")
	tg := startGateway(t, `
config:
  mcp: { sessionTtl: 1m }
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          failureMode: failOpen
          targets:
          - `+stdioTarget("local")+`
          - { name: web, mcp: { host: '${WEB}' } }
`, map[string]string{"WEB": web})
	endpoint := tg.url(3000) + "/mcp"
	cs, err := mcpConnect(t, endpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"local_count", "local_crash", "local_echo", "local_pid", "web_echo"}) {
		t.Fatalf("tools %v", got)
	}
	call := func(cs *sdk.ClientSession, name string) (string, error) {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name})
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", errors.New(res.Content[0].(*sdk.TextContent).Text)
		}
		return res.Content[0].(*sdk.TextContent).Text, nil
	}
	for want := 1; want <= 2; want++ {
		if got, err := call(cs, "local_count"); err != nil || got != itoa(want) {
			t.Fatalf("count = %q %v, want %d (one process per session)", got, err, want)
		}
	}
	other, err := mcpConnect(t, endpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := call(other, "local_count"); err != nil || got != "1" {
		t.Fatalf("a new session's count = %q %v, want 1", got, err)
	}
	if _, err := call(cs, "local_crash"); err == nil || !strings.Contains(err.Error(), "local") {
		t.Fatalf("crash: %v, want an error naming the target", err)
	}
	if got, err := call(cs, "web_echo"); err != nil || got != "web:echo" {
		t.Fatalf("web after the crash: %q %v", got, err)
	}
	if got, err := call(cs, "local_count"); err != nil || got != "1" {
		t.Fatalf("count after the crash = %q %v, want 1 (a new process)", got, err)
	}
	eventually(t, 5*time.Second, "the crash logged", func() bool {
		return tg.accessLogs().FilterMessage("mcp target failed").Len() > 0
	})
	// DELETE ends the session: its id is unknown afterwards.
	req, _ := http.NewRequest(http.MethodDelete, endpoint, nil)
	req.Header.Set("Mcp-Session-Id", other.ID())
	if resp, _ := do(t, req); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if _, err := call(other, "local_count"); err == nil {
		t.Fatal("a deleted session still answered")
	}
}

// TestMCPStdioProcessBound: config.mcp.maxStdioProcesses reaches the
// backend: with a bound of one, a second session's process stops the
// first's, which its next call starts again (its count starts over); a
// process that crashed gives its place back until its session's next call
// starts it again.
func TestMCPStdioProcessBound(t *testing.T) {
	tg := startGateway(t, `
config:
  mcp: { maxStdioProcesses: 1 }
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - `+stdioTarget("local")+`
`, nil)
	endpoint := tg.url(3000) + "/mcp"
	call := func(cs *sdk.ClientSession, name string) string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name})
		if err != nil {
			return "error: " + err.Error()
		}
		return res.Content[0].(*sdk.TextContent).Text
	}
	first, err := mcpConnect(t, endpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := call(first, "count"), call(first, "count"); a != "1" || b != "2" {
		t.Fatalf("first session counts %q %q", a, b)
	}
	second, err := mcpConnect(t, endpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := call(second, "count"); got != "1" {
		t.Fatalf("second session counts %q", got)
	}
	if got := call(first, "count"); got != "1" {
		t.Fatalf("first session after its process was stopped counts %q, want 1 (a new process)", got)
	}
	if got := call(first, "crash"); !strings.Contains(got, "local") {
		t.Fatalf("crash: %q", got)
	}
	if got := call(second, "count"); got != "1" {
		t.Fatalf("second session after the crash counts %q, want 1 (a new process)", got)
	}
	// The crashed process gave its place back; second's is the one to stop.
	third, err := mcpConnect(t, endpoint, "")
	if err != nil {
		t.Fatalf("a session after the crash: %v", err)
	}
	if got := call(third, "count"); got != "1" {
		t.Fatalf("third session counts %q", got)
	}
	// The crashed target's next call starts it again, in third's place.
	if got := call(first, "count"); got != "1" {
		t.Fatalf("the crashed target's next call counts %q, want 1 (a new process)", got)
	}
	if got := call(third, "count"); got != "1" {
		t.Fatalf("third session after its process was stopped counts %q, want 1", got)
	}
}

// TestMCPLegacySSEClient: the legacy SSE transport towards clients.
func TestMCPLegacySSEClient(t *testing.T) {
	web, _ := mcpTarget(t, "web", "echo")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - { name: web, mcp: { host: '${WEB}' } }
`, map[string]string{"WEB": web})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "legacy", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.SSEClientTransport{Endpoint: tg.url(3000) + "/sse"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("tools %v", got)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"})
	if err != nil || res.Content[0].(*sdk.TextContent).Text != "web:echo" {
		t.Fatalf("echo: %v %v", res, err)
	}
}

// TestMCPTopLevelSection: agentgateway's mcp-authorization example, which
// uses the top-level `mcp:` section, works unchanged.
func TestMCPTopLevelSection(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	target, _ := mcpTarget(t, "mcp2", "echo", "get-sum", "get-env", "other")
	tg := startGateway(t, `
mcp:
  port: 3000
  policies:
    cors:
      allowOrigins:
      - "*"
      allowHeaders:
      - "*"
      exposeHeaders:
      - "Mcp-Session-Id"
    backendAuth:
      passthrough: {}
    jwtAuth:
      issuer: agentgateway.dev
      audiences: [test.agentgateway.dev]
      jwks:
        file: '${JWKS}'
    mcpAuthorization:
      rules:
      # Allow anyone to call 'echo'
      - 'mcp.tool.name == "echo"'
      # Only the test-user can call 'get-sum'
      - 'jwt.sub == "test-user" && mcp.tool.name == "get-sum"'
      # Any authenticated user with the claim nested.key == value can access 'get-env'
      - 'mcp.tool.name == "get-env" && jwt.nested.key == "value"'
  targets:
  - name: mcp2
    mcp:
      host: '${TARGET}'
`, map[string]string{"JWKS": iss.WriteJWKSFile(t), "TARGET": target})
	token := iss.Sign(jwt.MapClaims{"iss": "agentgateway.dev", "aud": "test.agentgateway.dev", "sub": "test-user", "nested": map[string]any{"key": "value"}, "exp": time.Now().Add(time.Hour).Unix()})
	cs, err := mcpConnect(t, tg.url(3000)+"/mcp", token)
	if err != nil {
		t.Fatal(err)
	}
	if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"echo", "get-env", "get-sum"}) {
		t.Fatalf("tools %v", got)
	}
	if _, err := mcpConnect(t, tg.url(3000)+"/mcp", ""); err == nil {
		t.Fatal("connected without a token")
	}
}

// TestMCPPassthroughAndReload: with backendAuth passthrough the client's
// token reaches HTTP targets (and without it, it does not); a reload that
// leaves the MCP backend alone keeps its sessions, and one that changes it
// closes them, after which the client's session is resumed from its id.
func TestMCPPassthroughAndReload(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	var seen atomic.Value
	target, _ := observedMCPTarget(t, func(r *http.Request) { seen.Store(r.Header.Get("Authorization")) })
	config := func(passthrough, extra string) string {
		return `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        jwtAuth: { issuer: i, jwks: { file: '${JWKS}' } }` + passthrough + `
      backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: '${T}' } }` + extra + `
`
	}
	vars := map[string]string{"JWKS": iss.WriteJWKSFile(t), "T": target}
	token := iss.Sign(jwt.MapClaims{"iss": "i", "sub": "u", "exp": time.Now().Add(time.Hour).Unix()})
	tg := startGateway(t, config("", ""), vars)
	// This client reconnects its stream (the SDK's default), as it must to
	// follow a session that moves to another backend.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: tg.url(3000) + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo"}); err != nil {
		t.Fatal(err)
	}
	if got := seen.Load(); got != "" {
		t.Fatalf("the target saw Authorization %q without passthrough", got)
	}
	// An unrelated change keeps the MCP backend and its sessions.
	tg.apply(config("", "")+"  # reloaded\n", vars)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo"}); err != nil {
		t.Fatalf("session lost on a reload that kept the backend: %v", err)
	}
	// Changing the backend closes its sessions; the client's session id
	// carries the upstream session, so the new backend resumes it.
	tg.apply(config("\n        backendAuth: { passthrough: {} }", "\n          failureMode: failOpen"), vars)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo"}); err != nil {
		var why []string
		for _, e := range tg.accessLogs().FilterMessage("mcp session not resumed").All() {
			why = append(why, fmt.Sprint(e.ContextMap()))
		}
		t.Fatalf("session not resumed after the backend changed: %v (%v)", err, why)
	}
	eventually(t, 5*time.Second, "the resumption logged", func() bool {
		return tg.accessLogs().FilterMessage("mcp session resumed").Len() > 0
	})
	if got := seen.Load(); got != "Bearer "+token {
		t.Fatalf("the target saw Authorization %q, want the client's token", got)
	}
}

// TestMCPStdioStopsOnReload: a reload that replaces the MCP backend stops
// the stdio processes of its sessions.
func TestMCPStdioStopsOnReload(t *testing.T) {
	cfg := func(mode string) string {
		return `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          failureMode: ` + mode + `
          targets:
          - ` + stdioTarget("local") + `
`
	}
	tg := startGateway(t, cfg("failClosed"), nil)
	cs, err := mcpConnect(t, tg.url(3000)+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "pid"})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(res.Content[0].(*sdk.TextContent).Text)
	if err != nil || syscall.Kill(pid, 0) != nil {
		t.Fatalf("no live stdio process: %v %v", res, err)
	}
	tg.apply(cfg("failOpen"), nil)
	eventually(t, 10*time.Second, "the stdio process to stop", func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}
