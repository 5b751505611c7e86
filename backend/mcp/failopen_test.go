package mcp

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/config"
)

// initRecorder records the initialize calls a backend counts.
type initRecorder struct {
	mu     sync.Mutex
	failed map[string]int // target -> failed initializes
}

func (r *initRecorder) ObserveMCP(method, target, _ string, failed bool, _ time.Duration) {
	if method != "initialize" || !failed {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = map[string]int{}
	}
	r.failed[target]++
}

func (r *initRecorder) failures(target string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[target]
}

// TestRelayFailOpenInitializesDroppedTargetAgain: with failOpen, a target
// whose initialize failed is left out of the session, logged and counted,
// and a later use of it (after a wait that doubles with each failure)
// initializes it again. It used to be left out for the session's whole
// life (its calls answered "target flaky is not available" after it came
// back, while new sessions listed its tools), with nothing logged or
// counted.
func TestRelayFailOpenInitializesDroppedTargetAgain(t *testing.T) {
	good, _ := target(t, "good", "echo")
	flaky := startRestartable(t, http.StatusNotFound)
	flaky.down.Store(true)
	core, logs := observer.New(zap.InfoLevel)
	metrics := &initRecorder{}
	b, err := New(Options{Name: "route", Logger: zap.New(core), Metrics: metrics, Config: &config.MCPBackend{
		FailureMode: "failOpen",
		Targets: []config.MCPTarget{
			{Name: "good", Kind: config.MCPTargetStreamable, URL: good},
			{Name: "flaky", Kind: config.MCPTargetStreamable, URL: flaky.URL},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.dropRetry, b.dropRetryMax = 20*time.Millisecond, 40*time.Millisecond
	t.Cleanup(b.Close)
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	if n := metrics.failures("flaky"); n != 1 {
		t.Fatalf("%d failed initializes of flaky counted, want 1", n)
	}
	if lines := logs.FilterMessage("mcp target initialize failed").FilterField(zap.String("target", "flaky")).All(); len(lines) != 1 {
		t.Fatalf("%d log lines of flaky's failed initialize, want 1: %v", len(lines), logs.All())
	}
	list := func() string {
		_, _, body := rpc{session: id, accept: "application/json", body: toolsList}.post(t, endpoint)
		return body
	}
	if body := list(); !strings.Contains(body, "good_echo") || strings.Contains(body, "flaky_") {
		t.Fatalf("tools/list with flaky down: %s", body)
	}
	count := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"flaky_count","arguments":{}}}`
	if _, _, body := (rpc{session: id, accept: "application/json", body: count}).post(t, endpoint); !strings.Contains(body, `"error"`) || !strings.Contains(body, "flaky") {
		t.Fatalf("a call to flaky while down: %s", body)
	}
	flaky.down.Store(false)
	mcptest.WaitFor(t, func() bool { return strings.Contains(list(), "flaky_count") })
	if _, _, body := (rpc{session: id, accept: "application/json", body: count}).post(t, endpoint); !strings.Contains(body, `"text":"1"`) {
		t.Fatalf("a call to flaky once back: %s", body)
	}
}

// TestRelayBoundsTargetInitialize: a target that never answers initialize
// (a stdio process that reads and says nothing) is given up after the
// target's own bound, not the call's: with failOpen the session opens
// without it, with failClosed the initialize fails naming it. Either way
// used to wait for the call's timeout (10 minutes without a route
// timeout), for every session.
func TestRelayBoundsTargetInitialize(t *testing.T) {
	good, _ := target(t, "good", "echo")
	for _, mode := range []string{"failOpen", "failClosed"} {
		t.Run(mode, func(t *testing.T) {
			b, err := New(Options{Name: "route", TargetInitTimeout: 200 * time.Millisecond, Config: &config.MCPBackend{
				FailureMode: mode,
				Targets: []config.MCPTarget{
					{Name: "good", Kind: config.MCPTargetStreamable, URL: good},
					{Name: "mute", Kind: config.MCPTargetStdio, Stdio: &config.MCPStdio{Cmd: "/bin/sh", Args: []string{"-c", "cat >/dev/null; exit 0"}}},
				},
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			endpoint := serveBackend(t, b, nil)
			start := time.Now()
			status, h, body := rpc{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`}.post(t, endpoint)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("initialize took %v", took)
			}
			if mode == "failClosed" {
				if status != http.StatusOK || !strings.Contains(body, `"error"`) || !strings.Contains(body, "mute") {
					t.Fatalf("initialize: %d %s, want an error naming mute", status, body)
				}
				return
			}
			if status != http.StatusOK || h.Get("Mcp-Session-Id") == "" {
				t.Fatalf("initialize: %d %s", status, body)
			}
			_, _, body = rpc{session: h.Get("Mcp-Session-Id"), accept: "application/json", body: toolsList}.post(t, endpoint)
			if !strings.Contains(body, "good_echo") {
				t.Fatalf("tools/list: %s", body)
			}
		})
	}
}
