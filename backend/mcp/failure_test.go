package mcp

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
)

// TestRelayTellsTargetFailuresWithoutTopology: a client whose initialize
// fails on a target is told the target's configured name and the class of
// failure; the detail (the target's URL and address, a stdio command's
// path and its stderr) goes to the gateway's log only. Clients used to
// read `target down: streamable HTTP target: Post "http://127.0.0.1:21099/mcp":
// dial tcp ...: connection refused` and `stdio target /tmp/.../fake.py
// exited: exit status 7`.
func TestRelayTellsTargetFailuresWithoutTopology(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	missing := t.TempDir() + "/secret-dir/mcp-server"
	tests := []struct {
		name   string
		target config.MCPTarget
		want   string
		hidden []string // in the log, never in the answer
	}{
		{"refused", config.MCPTarget{Name: "down", Kind: config.MCPTargetStreamable, URL: closed},
			"connection refused", []string{ln.Addr().String()}},
		{"exits", config.MCPTarget{Name: "files", Kind: config.MCPTargetStdio, Stdio: &config.MCPStdio{Cmd: "/bin/sh", Args: []string{"-c", "echo secret-stderr >&2; exit 7"}}},
			"its process exited (exit status 7)", []string{"/bin/sh", "secret-stderr"}},
		{"not found", config.MCPTarget{Name: "files", Kind: config.MCPTargetStdio, Stdio: &config.MCPStdio{Cmd: missing}},
			"its process could not be started", []string{"secret-dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			b, err := New(Options{Name: "route", Logger: zap.New(core), Config: &config.MCPBackend{Targets: []config.MCPTarget{tt.target}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			endpoint := serveBackend(t, b, nil)
			status, _, body := rpc{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`}.post(t, endpoint)
			// "target files: ..." (the write to its stdin failed) or
			// "target files failed: ..." (its output ended), whichever
			// the gateway saw first.
			if status != http.StatusOK || !strings.Contains(body, `"message":"target `+tt.target.Name) || !strings.Contains(body, tt.want+`"`) {
				t.Fatalf("initialize: %d %s, want the message %q", status, body, tt.want)
			}
			var logged strings.Builder
			for _, e := range logs.All() {
				logged.WriteString(e.Message)
				for k, v := range e.ContextMap() {
					logged.WriteString(" " + k + "=")
					if s, ok := v.(string); ok {
						logged.WriteString(s)
					}
				}
				logged.WriteString("\n")
			}
			for _, h := range tt.hidden {
				if strings.Contains(body, h) {
					t.Errorf("the answer shows %q: %s", h, body)
				}
				if !strings.Contains(logged.String(), h) {
					t.Errorf("the log does not have %q:\n%s", h, logged.String())
				}
			}
		})
	}
}
