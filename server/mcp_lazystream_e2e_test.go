package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPTargetStreamOnDemand: a session opens its targets' standalone GET
// streams only once its client opens its own: sessions whose clients never
// listen (scripts, one-shot callers, a flood of initializes) hold no
// upstream connection each, where they used to hold one for their life.
// A client that listens still gets what a target sends outside any call.
func TestMCPTargetStreamOnDemand(t *testing.T) {
	var gets atomic.Int64
	target, srv := observedMCPTarget(t, func(r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: '${T}' } }
`, map[string]string{"T": target})
	endpoint := tg.url(3000) + "/mcp"
	call := func(session string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("tools/call: %d", resp.StatusCode)
		}
	}
	var sessions []string
	for i := 0; i < 5; i++ {
		s := initRaw(t, endpoint)
		call(s)
		sessions = append(sessions, s)
	}
	if n := gets.Load(); n != 0 {
		t.Fatalf("%d upstream GET streams for 5 sessions whose clients never listened, want none", n)
	}

	// A client opens its stream: its session's target stream opens, and a
	// target notification (the tool list changed) reaches the client.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessions[0])
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	eventually(t, 5*time.Second, "the target's stream for the listening client", func() bool { return gets.Load() == 1 })
	srv.AddTool(&sdk.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{}, nil
	})
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the client's stream ended before the notification: %v", err)
		}
		if strings.Contains(line, "notifications/tools/list_changed") {
			break
		}
	}
	if n := gets.Load(); n != 1 {
		t.Errorf("%d upstream GET streams, want only the listening session's", n)
	}
}

// TestMCPStreamsEndOnShutdown: a drain ends MCP clients' open streams at
// once, cleanly, instead of waiting for them to its deadline and cutting
// them: they carry no call, and their clients reconnect elsewhere. It used
// to hold every shutdown with a listening MCP client for its whole grace
// period.
func TestMCPStreamsEndOnShutdown(t *testing.T) {
	target, _ := mcpTarget(t, "t", "echo")
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	if err := gw.Apply(parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: '${T}' } }
`, map[string]string{"T": target})); err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + gw.Addrs()[3000].String() + "/mcp"
	session := initRaw(t, endpoint)
	req, _ := http.NewRequest(http.MethodGet, endpoint, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the stream is open
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw.Shutdown(ctx)
	if ctx.Err() != nil {
		t.Fatal("the drain ran to its deadline: the MCP stream held it")
	}
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("the stream was cut (%v), want it ended cleanly", err)
	}
}
