package mcp

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/config"
)

// inFlight counts the calls in flight over b's sessions.
func inFlight(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.sessions {
		s.mu.Lock()
		n += len(s.pending)
		s.mu.Unlock()
	}
	return n
}

// holdCall posts a call (JSON-RPC id 1) that does not end by itself; the
// returned func cancels it (notifications/cancelled) and waits for its
// answer.
func holdCall(t *testing.T, endpoint, session, tool, args string) (cancel func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, endpoint,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	return func() {
		rpc{session: session, body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`}.post(t, endpoint)
		<-done
	}
}

// TestRelayBoundsStdioProcesses: past maxStdioProcesses a new session's
// process stops the least recently used idle one, which its session starts
// again on its next call; when every process has a call in flight, the
// start fails with an error naming the bound. Unauthenticated initialize
// requests used to start a process each, without bound.
func TestRelayBoundsStdioProcesses(t *testing.T) {
	cmd, args, env := mcptest.StdioCommand("bounded")
	record := filepath.Join(t.TempDir(), "record")
	env[mcptest.EnvRecord] = record
	b := stdioBackend(t, Options{MaxStdioProcesses: 2}, cmd, args, env)
	endpoint := serveBackend(t, b, nil)
	echo := func(session, msg string) string {
		_, _, body := rpc{session: session, accept: "application/json", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + msg + `"}}}`}.post(t, endpoint)
		return body
	}
	closed := func() int { return len(mcptest.ReadStdioRecord(t, record).Closed()) }

	a := initSession(t, endpoint)
	bb := initSession(t, endpoint)
	if echo(bb, "b") == "" || b.Running() != 2 || closed() != 0 {
		t.Fatalf("two sessions: %d running, %d stopped", b.Running(), closed())
	}
	c := initSession(t, endpoint) // a's process is the least recently used
	mcptest.WaitFor(t, func() bool { return closed() == 1 })
	if b.Running() != 2 || b.SessionCount() != 3 {
		t.Fatalf("third session: %d running, %d sessions", b.Running(), b.SessionCount())
	}
	// a's process starts again, and bb's (now the least recently used) stops.
	if body := echo(a, "again"); !strings.Contains(body, `"text":"again"`) {
		t.Fatalf("call on the session whose process was stopped: %s", body)
	}
	mcptest.WaitFor(t, func() bool { return closed() == 2 })
	if b.Running() != 2 {
		t.Fatalf("%d running", b.Running())
	}
	if body := echo(c, "c"); !strings.Contains(body, `"text":"c"`) {
		t.Fatalf("call on c: %s", body)
	}

	// Both running processes busy: a new session cannot start one.
	slow := `{"steps":100,"delayMs":5000}`
	hangA := holdCall(t, endpoint, a, "slow", slow)
	hangC := holdCall(t, endpoint, c, "slow", slow)
	mcptest.WaitFor(t, func() bool { return inFlight(b) == 2 })
	status, _, body := rpc{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`}.post(t, endpoint)
	if status != http.StatusOK || !strings.Contains(body, `"error"`) || !strings.Contains(body, "maxStdioProcesses") {
		t.Fatalf("initialize with every process busy: %d %s", status, body)
	}
	if b.Running() != 2 {
		t.Fatalf("%d running after the refused start", b.Running())
	}
	hangA()
	hangC()
	mcptest.WaitFor(t, func() bool { return inFlight(b) == 0 })
	initSession(t, endpoint) // an idle process can go again
	if b.Running() != 2 {
		t.Fatalf("%d running", b.Running())
	}
}

// TestRelayBoundsSessions: past maxSessions a new session ends the least
// recently used idle one (its client gets 404, as after expiry); when
// every session is busy the new one is refused with 503 and Retry-After.
func TestRelayBoundsSessions(t *testing.T) {
	url, _ := target(t, "web", "echo", "block")
	b, err := New(Options{Name: "route", MaxSessions: 2, Config: &config.MCPBackend{Targets: []config.MCPTarget{{Name: "web", Kind: config.MCPTargetStreamable, URL: url}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	endpoint := serveBackend(t, b, nil)
	list := func(session string) int {
		status, _, _ := rpc{session: session, body: toolsList}.post(t, endpoint)
		return status
	}
	first := initSession(t, endpoint)
	second := initSession(t, endpoint)
	if list(second) != http.StatusOK {
		t.Fatal("second session")
	}
	third := initSession(t, endpoint)
	if b.SessionCount() != 2 {
		t.Fatalf("%d sessions, want the bound, 2", b.SessionCount())
	}
	if got := list(first); got != http.StatusNotFound {
		t.Fatalf("the least recently used session answered %d, want 404", got)
	}
	if list(second) != http.StatusOK || list(third) != http.StatusOK {
		t.Fatal("the other sessions were ended")
	}

	hang2 := holdCall(t, endpoint, second, "block", "{}")
	hang3 := holdCall(t, endpoint, third, "block", "{}")
	mcptest.WaitFor(t, func() bool { return inFlight(b) == 2 })
	status, h, body := rpc{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`}.post(t, endpoint)
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "too many MCP sessions") {
		t.Fatalf("initialize with every session busy: %d %q %s", status, h.Get("Retry-After"), body)
	}
	if b.SessionCount() != 2 || list(second) != http.StatusOK {
		t.Fatal("a busy session was ended")
	}
	hang2()
	hang3()
	mcptest.WaitFor(t, func() bool { return inFlight(b) == 0 })
	initSession(t, endpoint)
	if b.SessionCount() != 2 {
		t.Fatalf("%d sessions", b.SessionCount())
	}
}
