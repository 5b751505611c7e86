//lint:file-ignore SA1019 the gateway must still relay sampling, deprecated or not, while clients and servers use it
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
)

// target starts a streamable HTTP MCP server with the given tools on
// 127.0.0.1; every tool answers "<server>:<tool>". It counts the calls it
// receives.
func target(t *testing.T, name string, tools ...string) (string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	var counts sync.Map            // *sdk.ServerSession -> *atomic.Int64
	release := make(chan struct{}) // closed before the servers close
	srv := sdk.NewServer(&sdk.Implementation{Name: name, Version: "1"}, nil)
	for _, tool := range tools {
		srv.AddTool(&sdk.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			calls.Add(1)
			if tool == "progress" {
				for i := range 3 {
					_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3})
				}
			}
			if tool == "count" {
				n, _ := counts.LoadOrStore(req.Session, new(atomic.Int64))
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.FormatInt(n.(*atomic.Int64).Add(1), 10)}}}, nil
			}
			if tool == "block" {
				// Waits until the call is cancelled (or the test ends: a
				// cancellation that never comes fails the test instead of
				// hanging its server's Close).
				select {
				case <-ctx.Done():
					cancelled.Add(1)
					return nil, ctx.Err()
				case <-release:
					return nil, errors.New("never cancelled")
				}
			}
			if tool == "roots" {
				res, err := req.Session.ListRoots(ctx, nil)
				if err != nil {
					return nil, err
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: res.Roots[0].URI}}}, nil
			}
			if tool == "elicit" {
				res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "sure?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
				if err != nil {
					return nil, err
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: res.Action}}}, nil
			}
			if tool == "sample" {
				res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 10, Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "hi"}}}})
				if err != nil {
					return nil, err
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "sampled:" + res.Content.(*sdk.TextContent).Text}}}, nil
			}
			if tool == "link" {
				return &sdk.CallToolResult{Content: []sdk.Content{
					&sdk.ResourceLink{URI: "mem://doc", Name: "doc"},
					&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://doc", Text: name + ":doc"}},
				}}, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name + ":" + tool}}}, nil
		})
	}
	if slices.Contains(tools, "link") {
		srv.AddPrompt(&sdk.Prompt{Name: "linked"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://doc", Text: name + ":doc"}}}}}, nil
		})
	}
	srv.AddPrompt(&sdk.Prompt{Name: "greet"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: name + ":greet"}}}}, nil
	})
	srv.AddResource(&sdk.Resource{Name: "doc", URI: "mem://doc", MIMEType: "text/plain"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: name + ":doc"}}}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "item", URITemplate: "mem://items/{id}"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: name + ":" + req.Params.URI}}}, nil
	})
	sseTS := httptest.NewServer(sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(sseTS.Close)
	sseURLs.Store(ts.URL+"/mcp", sseTS.URL)
	t.Cleanup(func() { close(release) }) // runs first: cleanups run last-in first-out
	return ts.URL + "/mcp", &calls
}

// sseURLs maps a target's streamable URL to the legacy SSE endpoint of the
// same server.
var sseURLs sync.Map

// cancelled counts "block" calls that saw their cancellation.
var cancelled atomic.Int64

// serveBackend puts b behind a fasthttp server on 127.0.0.1 and returns the
// endpoint URL.
func serveBackend(t *testing.T, b *Backend, authz Authorizer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveBackendOn(t, b, ln, func(r *Request) { r.Authz = authz })
}

// serveBackendOn serves b on ln; with each request adjusted by set.
func serveBackendOn(t *testing.T, b *Backend, ln net.Listener, set func(*Request)) string {
	t.Helper()
	srv := &fasthttp.Server{Handler: func(fctx *fasthttp.RequestCtx) {
		r := &Request{Fast: fctx, Timeout: 10 * time.Second}
		set(r)
		b.Serve(r)
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/mcp"
}

func connect(t *testing.T, url string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("empty result")
	}
	return res.Content[0].(*sdk.TextContent).Text
}

func newTestBackend(t *testing.T, cfg *config.MCPBackend) *Backend {
	t.Helper()
	b, err := New(Options{Name: "test", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func TestRelayMultiplexesWithPrefixesAndAuthorization(t *testing.T) {
	aURL, aCalls := target(t, "a", "echo", "secret", "progress", "sample")
	bURL, bCalls := target(t, "b", "echo", "other")
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "a", Kind: config.MCPTargetStreamable, URL: aURL},
		{Name: "b", Kind: config.MCPTargetStreamable, URL: bURL},
	}})
	deny := func(kind ItemKind, name, target string) bool { return !(kind == Tool && name == "secret") }
	cs := connect(t, serveBackend(t, b, deny), &sdk.ClientOptions{
		CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Model: "m", Role: "assistant", Content: &sdk.TextContent{Text: "from-client"}}, nil
		},
	})

	if got, want := mcptest.ListedToolNames(t, cs), []string{"a_echo", "a_progress", "a_sample", "b_echo", "b_other"}; !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	for _, tc := range []struct{ tool, want string }{{"a_echo", "a:echo"}, {"b_echo", "b:echo"}, {"b_other", "b:other"}} {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tc.tool})
		if err != nil || text(t, res) != tc.want {
			t.Fatalf("call %s = %v, %v; want %s", tc.tool, res, err, tc.want)
		}
	}
	before := aCalls.Load()
	for _, name := range []string{"a_secret", "c_echo", "echo"} {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name})
		if err == nil || !strings.Contains(err.Error(), "Unknown tool: "+name) {
			t.Fatalf("call %s: %v, want Unknown tool", name, err)
		}
	}
	if aCalls.Load() != before {
		t.Fatalf("target a saw %d calls for refused tools", aCalls.Load()-before)
	}
	// A name the target does not know reaches it and comes back as its error.
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "a_missing"}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("call a_missing: %v", err)
	}

	// Progress notifications reach the caller during the call.
	var progress atomic.Int64
	cs2 := connect(t, serveBackend(t, b, nil), &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	params := &sdk.CallToolParams{Name: "a_progress"}
	params.SetProgressToken("tok")
	if _, err := cs2.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	// Progress may come on the call's stream or, when the target sends it on
	// its own stream, on the client's: poll, with a bound.
	for deadline := time.Now().Add(5 * time.Second); progress.Load() != 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d progress notifications, want 3", progress.Load())
		}
	}
	// A target's request to the client during a call is answered by the client.
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "a_sample"})
	if err != nil || text(t, res) != "sampled:from-client" {
		t.Fatalf("sample: %v %v", res, err)
	}
	if bCalls.Load() != 2 {
		t.Fatalf("target b saw %d calls, want 2", bCalls.Load())
	}
}

func TestRelaySingleTargetHasNoPrefix(t *testing.T) {
	url, _ := target(t, "a", "echo")
	for _, tc := range []struct {
		mode string
		want string
	}{{"", "echo"}, {"always", "a_echo"}} {
		b := newTestBackend(t, &config.MCPBackend{PrefixMode: tc.mode, Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
		cs := connect(t, serveBackend(t, b, nil), nil)
		if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{tc.want}) {
			t.Fatalf("prefixMode %q: tools %v", tc.mode, got)
		}
		if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tc.want}); err != nil || text(t, res) != "a:echo" {
			t.Fatalf("call: %v %v", res, err)
		}
	}
}

func TestRelayPrefixModeNeverRoutesByName(t *testing.T) {
	aURL, _ := target(t, "a", "one")
	bURL, _ := target(t, "b", "two")
	b := newTestBackend(t, &config.MCPBackend{PrefixMode: "never", Targets: []config.MCPTarget{
		{Name: "a", Kind: config.MCPTargetStreamable, URL: aURL},
		{Name: "b", Kind: config.MCPTargetStreamable, URL: bURL},
	}})
	cs := connect(t, serveBackend(t, b, nil), nil)
	// No list first: the gateway learns the names itself.
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "two"}); err != nil || text(t, res) != "b:two" {
		t.Fatalf("call two: %v %v", res, err)
	}
	if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("tools %v", got)
	}
}

// TestRelayPrefixModeNeverLeavesOutSharedNames: under prefixMode never a
// tool that two targets list cannot be routed (no prefix says which one a
// call means). As agentgateway does, it is left out of tools/list, a call
// to it is refused naming the targets (or, hidden from the caller on both
// by the rules, answered as unknown), and the session logs a warning
// once. tools/list used to show "echo" twice, and calls went to the last
// target listed.
func TestRelayPrefixModeNeverLeavesOutSharedNames(t *testing.T) {
	aURL, aCalls := target(t, "a", "echo", "one")
	bURL, bCalls := target(t, "b", "echo", "two")
	core, logs := observer.New(zap.InfoLevel)
	b, err := New(Options{Name: "route", Logger: zap.New(core), Config: &config.MCPBackend{PrefixMode: "never", Targets: []config.MCPTarget{
		{Name: "a", Kind: config.MCPTargetStreamable, URL: aURL},
		{Name: "b", Kind: config.MCPTargetStreamable, URL: bURL},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	noEcho := func(kind ItemKind, name, _ string) bool { return kind != Tool || name != "echo" }
	for _, tt := range []struct {
		name  string
		authz Authorizer
		want  string
	}{
		{"allowed", nil, "tool echo is served by several targets (a, b)"},
		{"hidden by the rules", noEcho, "Unknown tool: echo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs.TakeAll()
			cs := connect(t, serveBackend(t, b, tt.authz), nil)
			for range 2 {
				if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"one", "two"}) {
					t.Fatalf("tools %v, want each once, without the shared echo", got)
				}
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("call echo: %v %v, want %q", res, err, tt.want)
			}
			for name, want := range map[string]string{"one": "a:one", "two": "b:two"} {
				if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name}); err != nil || text(t, res) != want {
					t.Fatalf("call %s: %v %v", name, res, err)
				}
			}
			if a, b := aCalls.Load(), bCalls.Load(); a != b {
				t.Fatalf("calls reached a %d times, b %d times", a, b)
			}
			warned := logs.FilterMessageSnippet("served by several targets").All()
			if len(warned) != 1 || !slices.Equal(warned[0].ContextMap()["names"].([]any), []any{"echo (a, b)"}) {
				t.Fatalf("warnings: %v, want one naming echo (a, b)", warned)
			}
		})
	}
}

func TestRelayFailureModes(t *testing.T) {
	good, _ := target(t, "good", "echo")
	dead := "http://127.0.0.1:1/mcp"
	targets := []config.MCPTarget{
		{Name: "good", Kind: config.MCPTargetStreamable, URL: good},
		{Name: "dead", Kind: config.MCPTargetStreamable, URL: dead},
	}
	closed := newTestBackend(t, &config.MCPBackend{Targets: targets})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	if _, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: serveBackend(t, closed, nil), MaxRetries: -1}, nil); err == nil {
		t.Fatal("failClosed: initialize succeeded with a dead target")
	}
	open := newTestBackend(t, &config.MCPBackend{FailureMode: "failOpen", Targets: targets})
	cs := connect(t, serveBackend(t, open, nil), nil)
	if got := mcptest.ListedToolNames(t, cs); !slices.Equal(got, []string{"good_echo"}) {
		t.Fatalf("failOpen tools %v", got)
	}
}

func TestRelaySessionsEndAndExpire(t *testing.T) {
	url, _ := target(t, "a", "echo")
	b, err := New(Options{Name: "test", SessionTTL: 50 * time.Millisecond, Config: &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	endpoint := serveBackend(t, b, nil)
	cs := connect(t, endpoint, nil)
	if b.SessionCount() != 1 {
		t.Fatalf("%d sessions", b.SessionCount())
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.SessionCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle session did not expire")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Fatal("expired session still answered")
	}
	// Without a session id, and with an unknown one.
	for _, tc := range []struct {
		id   string
		want int
	}{{"", http.StatusBadRequest}, {"bm9wZQ", http.StatusNotFound}} {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.id != "" {
			req.Header.Set("Mcp-Session-Id", tc.id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("session %q: status %d, want %d", tc.id, resp.StatusCode, tc.want)
		}
	}
}

func TestRelayStatelessOpensSessionsPerRequest(t *testing.T) {
	url, _ := target(t, "a", "count")
	b := newTestBackend(t, &config.MCPBackend{StatefulMode: "stateless", Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
	cs := connect(t, serveBackend(t, b, nil), nil)
	if cs.ID() != "" {
		t.Fatalf("stateless backend returned session id %q", cs.ID())
	}
	for range 3 {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "count"})
		if err != nil || text(t, res) != "1" {
			t.Fatalf("count = %v %v, want 1 (a fresh upstream session)", res, err)
		}
	}
	stateful := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
	cs2 := connect(t, serveBackend(t, stateful, nil), nil)
	for want := 1; want <= 3; want++ {
		res, err := cs2.CallTool(context.Background(), &sdk.CallToolParams{Name: "count"})
		if err != nil || text(t, res) != strconv.Itoa(want) {
			t.Fatalf("stateful count = %v %v, want %d", res, err, want)
		}
	}
}

// TestRelayResumesSessionOnAnotherReplica: a second backend with the same
// key (another replica) takes over a session by its id alone and continues
// the same upstream session.
func TestRelayResumesSessionOnAnotherReplica(t *testing.T) {
	url, _ := target(t, "a", "count")
	cfg := &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}}
	key := []byte("0123456789abcdef0123456789abcdef")
	replica := func() string {
		b, err := New(Options{Name: "route", Config: cfg, SessionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return serveBackend(t, b, nil)
	}
	first, second := replica(), replica()
	cs := connect(t, first, nil)
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "count"}); err != nil || text(t, res) != "1" {
		t.Fatalf("first call: %v %v", res, err)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"count","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, second, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"text":"2"`) {
		t.Fatalf("second replica: %d %s; want the same upstream session's count 2", resp.StatusCode, got)
	}
}

func TestRelayMultiplexesPromptsAndResources(t *testing.T) {
	aURL, _ := target(t, "a", "echo")
	bURL, _ := target(t, "b", "echo")
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "a", Kind: config.MCPTargetStreamable, URL: aURL},
		{Name: "b", Kind: config.MCPTargetStreamable, URL: bURL},
	}})
	hideB := func(kind ItemKind, name, target string) bool { return !(kind == Resource && target == "b") }
	cs := connect(t, serveBackend(t, b, hideB), nil)
	ctx := context.Background()
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 2 || prompts.Prompts[0].Name != "a_greet" || prompts.Prompts[1].Name != "b_greet" {
		t.Fatalf("prompts: %v %v", prompts, err)
	}
	got, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "b_greet"})
	if err != nil || got.Messages[0].Content.(*sdk.TextContent).Text != "b:greet" {
		t.Fatalf("get b_greet: %v %v", got, err)
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "a+mem://doc" {
		t.Fatalf("resources (b's hidden): %+v %v", res, err)
	}
	read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "a+mem://doc"})
	if err != nil || read.Contents[0].Text != "a:doc" {
		t.Fatalf("read: %v %v", read, err)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "b+mem://doc"}); err == nil || !strings.Contains(err.Error(), "Unknown resource") {
		t.Fatalf("read of a hidden resource: %v", err)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "a+mem://items/{id}" {
		t.Fatalf("templates (b's hidden): %+v %v", templates, err)
	}
	item, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "a+mem://items/7"})
	if err != nil || item.Contents[0].Text != "a:mem://items/7" {
		t.Fatalf("read a templated resource: %v %v", item, err)
	}
	if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
}

// TestRelayPassesClientFeaturesThrough: cancellation reaches the target,
// and the targets' requests for roots and elicitation reach the client, over
// a legacy SSE target as well as a streamable one.
func TestRelayPassesClientFeaturesThrough(t *testing.T) {
	url, calls := target(t, "a", "block", "roots", "elicit")
	sseURL, _ := sseURLs.Load(url)
	for _, tc := range []struct {
		desc string
		t    config.MCPTarget
	}{
		{"streamable", config.MCPTarget{Name: "a", Kind: config.MCPTargetStreamable, URL: url}},
		{"legacy SSE", config.MCPTarget{Name: "a", Kind: config.MCPTargetSSE, URL: sseURL.(string)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{tc.t}})
			endpoint := serveBackend(t, b, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
				ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
				},
			})
			c.AddRoots(&sdk.Root{URI: "file:///work"})
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "roots"}); err != nil || text(t, res) != "file:///work" {
				t.Fatalf("roots: %v %v", res, err)
			}
			if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "elicit"}); err != nil || text(t, res) != "accept" {
				t.Fatalf("elicit: %v %v", res, err)
			}
			before, callsBefore := cancelled.Load(), calls.Load()
			callCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(callCtx, &sdk.CallToolParams{Name: "block"})
				done <- err
			}()
			// Cancel once the call is in flight at the target: poll the
			// target's count (a cancellation that overtakes its call is
			// dropped by the target, which has no such request yet).
			for deadline := time.Now().Add(5 * time.Second); calls.Load() == callsBefore || b.pendingCalls() == 0; time.Sleep(2 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the call never reached the target")
				}
			}
			stop()
			if err := <-done; err == nil {
				t.Fatal("a cancelled call succeeded")
			}
			for deadline := time.Now().Add(5 * time.Second); cancelled.Load() == before; time.Sleep(2 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the target never saw the cancellation")
				}
			}
		})
	}
}

// TestRelayDuplicateNameCannotSmuggleACall: with duplicate "name" keys the
// target gets the name the rule checked, whatever its JSON parser prefers.
func TestRelayDuplicateNameCannotSmuggleACall(t *testing.T) {
	var got atomic.Value
	srv := sdk.NewServer(&sdk.Implementation{Name: "a", Version: "1"}, nil)
	for _, name := range []string{"allowed", "secret"} {
		srv.AddTool(&sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			got.Store(name)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name}}}, nil
		})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var raw atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "tools/call") {
			raw.Store(string(body))
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: ts.URL + "/mcp"}}})
	onlyAllowed := func(kind ItemKind, name, target string) bool { return name == "allowed" }
	endpoint := serveBackend(t, b, onlyAllowed)
	cs := connect(t, endpoint, nil)
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"secret","name":"allowed","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Load() != "allowed" || strings.Count(raw.Load().(string), `"name"`) != 1 {
		t.Fatalf("target ran %v from %v", got.Load(), raw.Load())
	}
}

// pendingCalls counts the calls in flight to targets, over all sessions.
func (b *Backend) pendingCalls() int {
	b.mu.Lock()
	sessions := make([]*Session, 0, len(b.sessions))
	for _, s := range b.sessions {
		sessions = append(sessions, s)
	}
	b.mu.Unlock()
	n := 0
	for _, s := range sessions {
		s.mu.Lock()
		n += len(s.pending)
		s.mu.Unlock()
	}
	return n
}

// startProgressTarget is a streamable HTTP target on 127.0.0.1 whose one
// tool, report, answers with an event stream: a progress notification
// with the token in its "token" argument (whichever call's), then its
// result.
func startProgressTarget(t *testing.T) string {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Token any `json:"token"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Mcp-Session-Id", "progress-session")
		answer := func(result any) []byte {
			data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
			return data
		}
		switch msg.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer(map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "progress", "version": "1"}}))
		case "tools/call":
			progress, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": msg.Params.Arguments.Token, "progress": 1, "message": "from the progress target"}})
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\nevent: message\ndata: %s\n\n", progress, answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "reported"}}}))
		default:
			w.Header().Set("Content-Type", "application/json")
			data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
			_, _ = w.Write(data)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestRelayProgressStaysWithItsTarget: a target's progress notification
// reaches the client with that target's call whose token it carries, and
// never another target's: one that names another target's call in flight
// is dropped. Progress was matched by token alone, so one target could
// report progress on another's call (the tokens are the client's, often
// small numbers).
func TestRelayProgressStaysWithItsTarget(t *testing.T) {
	victim, _ := target(t, "v", "block")
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "p", Kind: config.MCPTargetStreamable, URL: startProgressTarget(t)},
		{Name: "v", Kind: config.MCPTargetStreamable, URL: victim},
	}})
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)

	// Its own call's progress comes on the call's stream.
	status, h, body := rpc{session: id, body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"p_report","arguments":{"token":"own"},"_meta":{"progressToken":"own"}}}`}.post(t, endpoint)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") || !strings.Contains(body, `"progressToken":"own"`) || !strings.Contains(body, "reported") {
		t.Fatalf("a call with its own progress: %d %s %s", status, h.Get("Content-Type"), body)
	}

	// A call to the other target is in flight with token 1.
	type answer struct {
		status      int
		contentType string
		body        string
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"v_block","arguments":{},"_meta":{"progressToken":1}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(data)}
	}()
	mcptest.WaitFor(t, func() bool { return inFlight(b) == 1 })
	// The progress target reports on token 1, from a call of its own
	// answered in plain JSON (its notification has nowhere else to go).
	if status, _, body := (rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"p_report","arguments":{"token":1}}}`}).post(t, endpoint); status != http.StatusOK || !strings.Contains(body, "reported") {
		t.Fatalf("the reporting call: %d %s", status, body)
	}
	if status, _, body := (rpc{session: id, body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`}).post(t, endpoint); status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", status, body)
	}
	a := <-answered
	if a.status != http.StatusOK || strings.Contains(a.body, "from the progress target") || !strings.Contains(a.body, "cancelled") {
		t.Fatalf("the other target's call answered %d %s: %s", a.status, a.contentType, a.body)
	}
}
