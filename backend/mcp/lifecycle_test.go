package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/config"
)

// rpc is one raw JSON-RPC POST to a backend endpoint.
type rpc struct {
	session, version, accept string
	body                     string
}

// post sends r and returns the status, the response headers and the body.
func (r rpc) post(t *testing.T, endpoint string) (int, http.Header, string) {
	t.Helper()
	return send(t, http.MethodPost, endpoint, r)
}

func send(t *testing.T, method, endpoint string, r rpc) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, endpoint, strings.NewReader(r.body))
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json, text/event-stream"
	}
	req.Header.Set("Accept", accept)
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
	}
	if r.version != "" {
		req.Header.Set("Mcp-Protocol-Version", r.version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

const toolsList = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// initSession opens a session with a raw initialize and returns its id.
func initSession(t *testing.T, endpoint string) string {
	t.Helper()
	status, h, body := rpc{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`}.post(t, endpoint)
	if status != http.StatusOK || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	return h.Get("Mcp-Session-Id")
}

// methodRecorder wraps a target's handler and records the JSON-RPC methods
// it receives.
type methodRecorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []string
}

func (m *methodRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		data, _ := io.ReadAll(r.Body)
		var msg struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(data, &msg) == nil && msg.Method != "" {
			m.mu.Lock()
			m.seen = append(m.seen, msg.Method)
			m.mu.Unlock()
		}
		r.Body = io.NopCloser(strings.NewReader(string(data)))
	}
	m.next.ServeHTTP(w, r)
}

func (m *methodRecorder) got(method string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.seen {
		if s == method {
			return true
		}
	}
	return false
}

// toolsOnlyTarget serves one tool and declares only the tools capability,
// as the filesystem reference server declares no prompts, resources or
// logging.
func toolsOnlyTarget(t *testing.T) (string, *methodRecorder) {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "tools-only", Version: "1"}, &sdk.ServerOptions{Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}})
	srv.AddTool(&sdk.Tool{Name: "ls", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ls"}}}, nil
	})
	rec := &methodRecorder{next: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: rec}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp", rec
}

// TestRelayRoutesByCapability: a method goes only to the targets that
// declared its capability; one no target serves is the gateway's own
// "method not found".
func TestRelayRoutesByCapability(t *testing.T) {
	full, _ := target(t, "full", "echo")
	only, rec := toolsOnlyTarget(t)
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "full", Kind: config.MCPTargetStreamable, URL: full},
		{Name: "fs", Kind: config.MCPTargetStreamable, URL: only},
	}})
	endpoint := serveBackend(t, b, nil)
	cs := connect(t, endpoint, nil)
	ctx := context.Background()
	if res, err := cs.ListPrompts(ctx, nil); err != nil || len(res.Prompts) != 1 || res.Prompts[0].Name != "full_greet" {
		t.Fatalf("prompts/list = %+v, %v", res, err)
	}
	if res, err := cs.ListResources(ctx, nil); err != nil || len(res.Resources) != 1 {
		t.Fatalf("resources/list = %+v, %v", res, err)
	}
	if res, err := cs.ListResourceTemplates(ctx, nil); err != nil || len(res.ResourceTemplates) != 1 {
		t.Fatalf("resources/templates/list = %+v, %v", res, err)
	}
	// Raw, as the SDK marks logging deprecated (it remains in the protocol).
	if status, _, body := (rpc{session: cs.ID(), accept: "application/json", body: `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"info"}}`}).post(t, endpoint); status != http.StatusOK || !strings.Contains(body, `"result":{}`) {
		t.Fatalf("logging/setLevel: %d %s", status, body)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools/list = %+v, %v", tools, err)
	}
	for _, m := range []string{"prompts/list", "resources/list", "resources/templates/list", "logging/setLevel"} {
		if rec.got(m) {
			t.Errorf("the tools-only target received %s", m)
		}
	}
	if !rec.got("tools/list") {
		t.Error("the tools-only target was not asked for its tools")
	}

	// Only targets without prompts: the gateway answers -32601 itself.
	other, _ := toolsOnlyTarget(t)
	b2 := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "x", Kind: config.MCPTargetStreamable, URL: only},
		{Name: "y", Kind: config.MCPTargetStreamable, URL: other},
	}})
	endpoint = serveBackend(t, b2, nil)
	id := initSession(t, endpoint)
	for _, m := range []string{"prompts/list", "resources/list", "logging/setLevel"} {
		status, _, body := rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":3,"method":"` + m + `","params":{"level":"info"}}`}.post(t, endpoint)
		if status != http.StatusOK || !strings.Contains(body, `"code":-32601`) {
			t.Errorf("%s with no target serving it: %d %s, want -32601", m, status, body)
		}
	}
}

// TestRelaySessionEnds: a session that was deleted or expired answers 404
// here and on every replica, and is never rebuilt from its id.
func TestRelaySessionEnds(t *testing.T) {
	url, _ := target(t, "a", "count")
	key := []byte("0123456789abcdef0123456789abcdef")
	cfg := &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}}
	replica := func(ttl time.Duration) (*Backend, string) {
		b, err := New(Options{Name: "route", Config: cfg, SessionKey: key, SessionTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b, serveBackend(t, b, nil)
	}
	call := rpc{body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"count","arguments":{}}}`, accept: "application/json"}
	gone := func(t *testing.T, where, endpoint, id string) {
		t.Helper()
		c := call
		c.session = id
		if status, _, body := c.post(t, endpoint); status != http.StatusNotFound {
			t.Errorf("%s: POST after the end: %d %s, want 404", where, status, body)
		}
		if status, _, body := send(t, http.MethodGet, endpoint, rpc{session: id, accept: "text/event-stream"}); status != http.StatusNotFound {
			t.Errorf("%s: GET after the end: %d %s, want 404", where, status, body)
		}
	}

	t.Run("delete", func(t *testing.T) {
		_, first := replica(time.Hour)
		_, second := replica(time.Hour)
		id := initSession(t, first)
		c := call
		c.session = id
		if status, _, body := c.post(t, first); status != http.StatusOK || !strings.Contains(body, `"text":"1"`) {
			t.Fatalf("call: %d %s", status, body)
		}
		if status, _, _ := send(t, http.MethodDelete, first, rpc{session: id}); status != http.StatusOK {
			t.Fatalf("DELETE: %d", status)
		}
		gone(t, "the replica that held it", first, id)
		gone(t, "another replica", second, id)
		if status, _, _ := send(t, http.MethodDelete, first, rpc{session: id}); status != http.StatusNotFound {
			t.Errorf("second DELETE: %d, want 404", status)
		}
	})
	t.Run("delete on another replica", func(t *testing.T) {
		_, first := replica(time.Hour)
		_, second := replica(time.Hour)
		id := initSession(t, first)
		c := call
		c.session = id
		if status, _, body := c.post(t, first); status != http.StatusOK {
			t.Fatalf("call: %d %s", status, body)
		}
		if status, _, _ := send(t, http.MethodDelete, second, rpc{session: id}); status != http.StatusOK {
			t.Fatalf("DELETE on the other replica: %d", status)
		}
		gone(t, "the replica that got the DELETE", second, id)
		// The holder learns it from the target, which no longer has the
		// upstream session once the DELETE reached it.
		mcptest.WaitFor(t, func() bool {
			status, _, _ := c.post(t, first)
			return status == http.StatusNotFound
		})
		gone(t, "the replica that held it", first, id)
	})
	t.Run("expiry", func(t *testing.T) {
		b, first := replica(200 * time.Millisecond)
		_, second := replica(200 * time.Millisecond)
		id := initSession(t, first)
		mcptest.WaitFor(t, func() bool { return b.SessionCount() == 0 })
		gone(t, "the replica that held it", first, id)
		gone(t, "another replica", second, id)
	})
	t.Run("forged", func(t *testing.T) {
		_, first := replica(time.Hour)
		gone(t, "unsealed id", first, "eyJuIjoieCIsInQiOjEsInUiOnsiYSI6IngifX0")
	})
}

// TestRelaySessionBoundToRouteAndSubject: an id works only on the route it
// was issued on and for the identity that opened it.
func TestRelaySessionBoundToRouteAndSubject(t *testing.T) {
	url, _ := target(t, "a", "count")
	key := []byte("0123456789abcdef0123456789abcdef")
	cfg := &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}}
	serve := func(scope string, subject string) string {
		b, err := New(Options{Name: "route", Scope: scope, Config: cfg, SessionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return serveBackendOn(t, b, ln, func(r *Request) { r.Subject = subject })
	}
	alice := serve("3000/route", "alice")
	aliceOtherBind := serve("3001/route", "alice")
	bob := serve("3000/route", "bob")
	anonymous := serve("3000/route", "")
	aliceAgain := serve("3000/route", "alice")
	id := initSession(t, alice)
	call := rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"count","arguments":{}}}`}
	for _, tc := range []struct {
		desc, endpoint string
		want           int
	}{
		{"same route, same subject", alice, http.StatusOK},
		{"same route on another replica, same subject", aliceAgain, http.StatusOK},
		{"same-named route of another bind", aliceOtherBind, http.StatusNotFound},
		{"another subject", bob, http.StatusNotFound},
		{"no subject", anonymous, http.StatusNotFound},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if status, _, body := call.post(t, tc.endpoint); status != tc.want {
				t.Fatalf("status %d %s, want %d", status, body, tc.want)
			}
		})
	}
	if status, _, _ := send(t, http.MethodDelete, bob, rpc{session: id}); status != http.StatusNotFound {
		t.Fatalf("another subject's DELETE: %d, want 404", status)
	}
	if status, _, body := call.post(t, alice); status != http.StatusOK {
		t.Fatalf("after another subject's DELETE: %d %s", status, body)
	}
}

// TestRelayDeleteAnswersAtOnce: ending a session does not wait for a busy
// stdio process; the process is stopped in the background.
func TestRelayDeleteAnswersAtOnce(t *testing.T) {
	cmd, args, env := mcptest.StdioCommand("busy")
	pidFile := filepath.Join(t.TempDir(), "pid")
	env[mcptest.EnvLinger] = "1m"
	env[mcptest.EnvPidFile] = pidFile
	b := stdioBackend(t, Options{}, cmd, args, env)
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data))
	if status, _, _ := send(t, http.MethodDelete, endpoint, rpc{session: id}); status != http.StatusOK {
		t.Fatalf("DELETE: %d", status)
	}
	// The SDK gives a process 5 s after stdin closes before SIGTERM: had
	// the DELETE waited for it, the process would be gone by now.
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("DELETE answered only after the process ended")
	}
	mcptest.WaitFor(t, func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestRelayStatelessStreamsProgress: a stateless backend delivers a call's
// progress on the POST's event stream, as the target itself does.
func TestRelayStatelessStreamsProgress(t *testing.T) {
	url, _ := target(t, "a", "progress")
	b := newTestBackend(t, &config.MCPBackend{StatefulMode: "stateless", Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
	endpoint := serveBackend(t, b, nil)
	status, h, body := rpc{body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"progress","arguments":{},"_meta":{"progressToken":"p1"}}}`}.post(t, endpoint)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q: %s", status, h.Get("Content-Type"), body)
	}
	if n := strings.Count(body, `"method":"notifications/progress"`); n != 3 {
		t.Fatalf("%d progress notifications, want 3:\n%s", n, body)
	}
	if !strings.Contains(body, `"text":"a:progress"`) {
		t.Fatalf("no result in the stream:\n%s", body)
	}
	mcptest.WaitFor(t, func() bool { return b.SessionCount() == 0 })
}

// TestRelayPrefixesURIsInResults: URIs in results carry the target's
// prefix, so a client can follow them.
func TestRelayPrefixesURIsInResults(t *testing.T) {
	a, _ := target(t, "a", "link")
	other, _ := target(t, "b", "echo")
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "a", Kind: config.MCPTargetStreamable, URL: a},
		{Name: "b", Kind: config.MCPTargetStreamable, URL: other},
	}})
	cs := connect(t, serveBackend(t, b, nil), nil)
	ctx := context.Background()
	read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "a+mem://doc"})
	if err != nil || read.Contents[0].URI != "a+mem://doc" {
		t.Fatalf("resources/read = %+v, %v; want contents[0].uri a+mem://doc", read, err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "a_link"})
	if err != nil {
		t.Fatal(err)
	}
	link, ok := res.Content[0].(*sdk.ResourceLink)
	if !ok || link.URI != "a+mem://doc" {
		t.Fatalf("resource link = %#v", res.Content[0])
	}
	embedded, ok := res.Content[1].(*sdk.EmbeddedResource)
	if !ok || embedded.Resource.URI != "a+mem://doc" {
		t.Fatalf("embedded resource = %#v", res.Content[1])
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: link.URI}); err != nil {
		t.Fatalf("following the link: %v", err)
	}
	prompt, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "a_linked"})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := prompt.Messages[0].Content.(*sdk.EmbeddedResource); !ok || r.Resource.URI != "a+mem://doc" {
		t.Fatalf("prompt's embedded resource = %#v", prompt.Messages[0].Content)
	}
}

// TestRelayRefusesUnknownProtocolVersion: a version the gateway does not
// speak is 400 (the transport spec's rule); known ones pass.
func TestRelayRefusesUnknownProtocolVersion(t *testing.T) {
	url, _ := target(t, "a", "echo")
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	for _, tc := range []struct {
		desc, version string
		want          int
	}{
		{"unknown", "1999-01-01", http.StatusBadRequest},
		{"garbage", "latest", http.StatusBadRequest},
		{"known", "2025-06-18", http.StatusOK},
		{"absent", "", http.StatusOK},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			status, _, body := rpc{session: id, version: tc.version, accept: "application/json", body: toolsList}.post(t, endpoint)
			if status != tc.want {
				t.Fatalf("status %d %s, want %d", status, body, tc.want)
			}
		})
	}
}

// versionTarget is a streamable HTTP target answering in plain JSON whose
// initialize answers the protocol version answer gives for the requested
// one (which it records); it lists no tools.
func versionTarget(t *testing.T, answer func(requested string) string) (string, *atomic.Value) {
	t.Helper()
	var requested atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&msg) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := map[string]any{"tools": []any{}}
		if msg.Method == "initialize" {
			requested.Store(msg.Params.ProtocolVersion)
			w.Header().Set("Mcp-Session-Id", "v")
			result = map[string]any{"protocolVersion": answer(msg.Params.ProtocolVersion), "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "v", "version": "1"}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp", &requested
}

// TestRelayNegotiatesOnlyKnownVersions: the protocol version an initialize
// negotiates is one the gateway accepts afterwards in Mcp-Protocol-Version.
// A version the gateway does not know is not offered to the targets (the
// newest it knows goes instead), and a target's answer it does not know
// is ignored (failOpen) or replaced. A client's "2024-10-07", taken by a
// target, was refused with 400 on the next request; a target's "1.0" was
// the merged version, being the "oldest".
func TestRelayNegotiatesOnlyKnownVersions(t *testing.T) {
	echo := func(v string) string { return v }
	bogus := func(string) string { return "1.0" }
	tests := []struct {
		name      string
		requested string
		targets   []func(string) string
		want      string
	}{
		{name: "unknown version requested", requested: "2024-10-07", targets: []func(string) string{echo}, want: initializeVersion},
		{name: "known version requested", requested: "2025-03-26", targets: []func(string) string{echo}, want: "2025-03-26"},
		{name: "a target's unknown answer", requested: "2025-06-18", targets: []func(string) string{bogus}, want: "2025-06-18"},
		{name: "a target's unknown answer merged", requested: "2025-03-26", targets: []func(string) string{bogus, echo}, want: "2025-03-26"},
		{name: "unknown everywhere", requested: "2024-10-07", targets: []func(string) string{bogus, bogus}, want: initializeVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.MCPBackend{FailureMode: "failOpen"}
			var got []*atomic.Value
			for i, answer := range tt.targets {
				url, requested := versionTarget(t, answer)
				got = append(got, requested)
				cfg.Targets = append(cfg.Targets, config.MCPTarget{Name: string(rune('a' + i)), Kind: config.MCPTargetStreamable, URL: url})
			}
			endpoint := serveBackend(t, newTestBackend(t, cfg), nil)
			status, h, body := rpc{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + tt.requested + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`}.post(t, endpoint)
			var init struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &init) != nil || init.Result.ProtocolVersion != tt.want {
				t.Fatalf("initialize: %d %s, want version %s", status, body, tt.want)
			}
			for i, requested := range got {
				if v, _ := requested.Load().(string); !supportedVersion([]byte(v)) {
					t.Errorf("target %d was asked for version %q", i, v)
				}
			}
			status, _, body = rpc{session: h.Get("Mcp-Session-Id"), version: init.Result.ProtocolVersion, accept: "application/json", body: toolsList}.post(t, endpoint)
			if status != http.StatusOK {
				t.Fatalf("a request with the negotiated version: %d %s", status, body)
			}
		})
	}
}

// TestRelayLegacySessionEndsWithItsStream: closing a legacy SSE stream
// ends its session (and would stop its processes).
func TestRelayLegacySessionEndsWithItsStream(t *testing.T) {
	url, _ := target(t, "a", "echo")
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
	b.legacyKeepAlive = 20 * time.Millisecond
	endpoint := strings.TrimSuffix(serveBackend(t, b, nil), "/mcp") + "/sse"
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.Split(endpoint, "/sse")[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("GET /sse HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"))
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: endpoint") {
			break
		}
	}
	if b.SessionCount() != 1 {
		t.Fatalf("%d sessions with the stream open", b.SessionCount())
	}
	conn.Close()
	mcptest.WaitFor(t, func() bool { return b.SessionCount() == 0 })
}

// TestRelayParksIdleStdioProcesses: a session's stdio process that has
// been idle stops, and the next call starts it again.
func TestRelayParksIdleStdioProcesses(t *testing.T) {
	cmd, args, env := mcptest.StdioCommand("parked")
	record := filepath.Join(t.TempDir(), "record")
	env[mcptest.EnvRecord] = record
	b := stdioBackend(t, Options{StdioIdle: 50 * time.Millisecond}, cmd, args, env)
	// Raw calls: no GET stream, as with a one-shot client that left.
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	echo := func(msg string) string {
		_, _, body := rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + msg + `"}}}`}.post(t, endpoint)
		return body
	}
	if body := echo("x"); !strings.Contains(body, `"text":"x"`) {
		t.Fatalf("call: %s", body)
	}
	mcptest.WaitFor(t, func() bool { return len(mcptest.ReadStdioRecord(t, record).Closed()) == 1 })
	if b.SessionCount() != 1 {
		t.Fatal("parking the process ended the session")
	}
	if body := echo("again"); !strings.Contains(body, `"text":"again"`) {
		t.Fatalf("call after parking: %s", body)
	}
	if n := len(mcptest.ReadStdioRecord(t, record).Sessions()); n != 2 {
		t.Fatalf("%d processes initialized, want 2 (the first, and the one started again)", n)
	}
}

// TestRelayDeleteRacesAReconnectingStream: a GET that resumes the session
// on a replica while the DELETE is in flight there never leaves the
// session alive or a stdio process running.
func TestRelayDeleteRacesAReconnectingStream(t *testing.T) {
	web, _ := target(t, "web", "count")
	cmd, args, env := mcptest.StdioCommand("local")
	record := filepath.Join(t.TempDir(), "record")
	env[mcptest.EnvRecord] = record
	key := []byte("0123456789abcdef0123456789abcdef")
	cfg := &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "local", Kind: config.MCPTargetStdio, Stdio: &config.MCPStdio{Cmd: cmd, Args: args, Env: env}},
		{Name: "web", Kind: config.MCPTargetStreamable, URL: web},
	}}
	replica := func() string {
		b, err := New(Options{Name: "route", Config: cfg, SessionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return serveBackend(t, b, nil)
	}
	first, second := replica(), replica()
	id := initSession(t, first)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, second, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			// Either 404, or a stream the DELETE ends.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	go func() {
		defer wg.Done()
		send(t, http.MethodDelete, second, rpc{session: id})
	}()
	wg.Wait()
	call := rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"web_count","arguments":{}}}`}
	mcptest.WaitFor(t, func() bool {
		s1, _, _ := call.post(t, first)
		s2, _, _ := call.post(t, second)
		return s1 == http.StatusNotFound && s2 == http.StatusNotFound
	})
	mcptest.WaitFor(t, func() bool {
		rec := mcptest.ReadStdioRecord(t, record)
		return len(rec.Closed()) == len(rec.Sessions())
	})
}

// stdioBackend is a backend of route "route" with one stdio target "s"
// (cmd, args, env), with o's other options, closed at the test's end.
func stdioBackend(t *testing.T, o Options, cmd string, args []string, env map[string]string) *Backend {
	t.Helper()
	o.Name = "route"
	o.Config = &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "s", Kind: config.MCPTargetStdio, Stdio: &config.MCPStdio{Cmd: cmd, Args: args, Env: env}},
	}}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}
