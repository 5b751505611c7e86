package mcp

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/config"
)

// restartable is a streamable HTTP target (the SDK's server with a count
// tool, counting per upstream session) that can restart: it then forgets
// every session. It refuses a session id it does not know with refusal:
// 404 as the SDK and the spec do, or 400 as servers built on the
// TypeScript SDK's examples do.
type restartable struct {
	URL     string
	refusal int
	srv     *sdk.Server
	handler atomic.Pointer[http.Handler]
	down    atomic.Bool // initialize fails with 503

	mu       sync.Mutex
	sessions map[string]bool
	inits    int
}

func startRestartable(t *testing.T, refusal int) *restartable {
	t.Helper()
	r := &restartable{refusal: refusal, sessions: map[string]bool{}}
	r.srv = sdk.NewServer(&sdk.Implementation{Name: "restartable", Version: "1"}, nil)
	var counts sync.Map // *sdk.ServerSession -> *atomic.Int64
	r.srv.AddTool(&sdk.Tool{Name: "count", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		n, _ := counts.LoadOrStore(req.Session, new(atomic.Int64))
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.FormatInt(n.(*atomic.Int64).Add(1), 10)}}}, nil
	})
	r.restart()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: r}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	r.URL = "http://" + ln.Addr().String() + "/mcp"
	return r
}

// restart forgets every session, as a restarted process does.
func (r *restartable) restart() {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return r.srv }, &sdk.StreamableHTTPOptions{JSONResponse: true})
	var hh http.Handler = h
	r.mu.Lock()
	r.sessions = map[string]bool{}
	r.handler.Store(&hh)
	r.mu.Unlock()
}

func (r *restartable) initializes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inits
}

func (r *restartable) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	sid := req.Header.Get("Mcp-Session-Id")
	r.mu.Lock()
	known := sid == "" || r.sessions[sid]
	if sid == "" && req.Method == http.MethodPost {
		r.inits++
	}
	r.mu.Unlock()
	switch {
	case !known && r.refusal == http.StatusBadRequest:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`))
		return
	case !known:
		http.Error(w, "session not found", http.StatusNotFound)
		return
	case sid == "" && r.down.Load():
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	(*r.handler.Load()).ServeHTTP(w, req)
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		r.mu.Lock()
		r.sessions[id] = true
		r.mu.Unlock()
	}
}

// TestRelayRenewsRefusedUpstreamSession: a target that restarted refuses
// the upstream session (404, or 400 as the TypeScript SDK's examples do).
// Without a shared session key the target is initialized again and the
// call, which it did not process, sent once more: the client sees a new
// upstream session's answer, not an error. When the renewal fails, and
// with a shared key (the refusal may be how another replica's DELETE
// arrives), the client's session ends: it gets 404 and initializes again.
// A 400 used to count as an ordinary failure: every later call failed, and
// the session never ended.
func TestRelayRenewsRefusedUpstreamSession(t *testing.T) {
	tests := []struct {
		name    string
		refusal int
		key     bool // the backend has config.session.key
		down    bool // the restarted target refuses initialize
		renewed bool
	}{
		{name: "404 renewed", refusal: http.StatusNotFound, renewed: true},
		{name: "400 renewed", refusal: http.StatusBadRequest, renewed: true},
		{name: "400 renewal fails", refusal: http.StatusBadRequest, down: true},
		{name: "404 with a shared key", refusal: http.StatusNotFound, key: true},
		{name: "400 with a shared key", refusal: http.StatusBadRequest, key: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := startRestartable(t, tt.refusal)
			o := Options{Name: "route", Config: &config.MCPBackend{
				FailureMode: "failClosed",
				Targets:     []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: target.URL}},
			}}
			if tt.key {
				o.SessionKey = []byte("0123456789abcdef0123456789abcdef")
			}
			b, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			endpoint := serveBackend(t, b, nil)
			id := initSession(t, endpoint)
			count := func() (int, string) {
				status, _, body := rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"count","arguments":{}}}`}.post(t, endpoint)
				return status, body
			}
			if status, body := count(); status != http.StatusOK || !strings.Contains(body, `"text":"1"`) {
				t.Fatalf("count: %d %s", status, body)
			}
			target.down.Store(tt.down)
			target.restart()
			inits := target.initializes()
			status, body := count()
			if !tt.renewed {
				if status != http.StatusNotFound {
					t.Fatalf("a call after the restart: %d %s, want 404 (the session ended)", status, body)
				}
				if status, _, body := (rpc{session: id, accept: "application/json", body: toolsList}).post(t, endpoint); status != http.StatusNotFound {
					t.Fatalf("tools/list after the session ended: %d %s, want 404", status, body)
				}
				target.down.Store(false)
				initSession(t, endpoint) // the client starts again
				return
			}
			// The call reached the target once, on a new upstream session.
			if status != http.StatusOK || !strings.Contains(body, `"text":"1"`) {
				t.Fatalf("a call after the restart: %d %s, want the new upstream session's count 1", status, body)
			}
			if n := target.initializes() - inits; n != 1 {
				t.Fatalf("%d initializes after the restart, want 1", n)
			}
			if status, body := count(); status != http.StatusOK || !strings.Contains(body, `"text":"2"`) {
				t.Fatalf("the next call: %d %s", status, body)
			}
			if status, _, body := (rpc{session: id, accept: "application/json", body: toolsList}).post(t, endpoint); status != http.StatusOK || !strings.Contains(body, `"name":"count"`) {
				t.Fatalf("tools/list: %d %s", status, body)
			}
		})
	}
}

// TestRelayRestartsExitedStdioTarget: a stdio target whose process exited
// (a crash) is started again on the session's next use of it, initialized
// with the client's params; when it cannot be, the call says why, naming
// the target. The process used to stay dead: every later call, tools/list
// included, failed with "exit status 3" until the session expired.
func TestRelayRestartsExitedStdioTarget(t *testing.T) {
	cmd, args, env := mcptest.StdioCommand("crasher")
	record := filepath.Join(t.TempDir(), "record")
	env[mcptest.EnvRecord] = record
	// The process runs the test's MCP server while the file "up" exists.
	up := filepath.Join(t.TempDir(), "up")
	if err := os.WriteFile(up, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `[ -e "` + up + `" ] || { echo "not starting again" >&2; exit 1; }; exec "$0" "$@"`
	b := stdioBackend(t, Options{}, "/bin/sh", append([]string{"-c", script, cmd}, args...), env)
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	call := func(body string) string {
		_, _, out := rpc{session: id, accept: "application/json", body: body}.post(t, endpoint)
		return out
	}
	countCall := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"count","arguments":{}}}`
	crashCall := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"crash","arguments":{}}}`
	for _, want := range []string{"1", "2"} {
		if out := call(countCall); !strings.Contains(out, `"text":"`+want+`"`) {
			t.Fatalf("count: %s, want %s", out, want)
		}
	}
	if out := call(crashCall); !strings.Contains(out, "target s failed") || !strings.Contains(out, "exit status 3") {
		t.Fatalf("the crashing call: %s", out)
	}
	if out := call(toolsList); !strings.Contains(out, `"name":"count"`) {
		t.Fatalf("tools/list after the crash: %s", out)
	}
	if out := call(countCall); !strings.Contains(out, `"text":"1"`) {
		t.Fatalf("count after the crash: %s, want 1 (a new process)", out)
	}
	rec := mcptest.ReadStdioRecord(t, record)
	if n := len(rec.Sessions()); n != 2 {
		t.Fatalf("%d processes initialized, want 2", n)
	}

	// A process that cannot start again: the call is answered with why.
	if err := os.Remove(up); err != nil {
		t.Fatal(err)
	}
	if out := call(crashCall); !strings.Contains(out, "exit status 3") {
		t.Fatalf("the second crashing call: %s", out)
	}
	for range 2 { // each use tries again
		out := call(toolsList)
		if !strings.Contains(out, `"code":-32603`) || !strings.Contains(out, "target s") || !strings.Contains(out, "exit status 1") {
			t.Fatalf("tools/list when the target cannot start: %s", out)
		}
	}
	mcptest.WaitFor(t, func() bool { return b.Running() == 0 }) // the failed starts gave their slots back
}
