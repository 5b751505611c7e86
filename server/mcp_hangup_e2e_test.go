package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
)

// TestMCPClientHangupCancelsCall: a client that goes away while its tool
// call runs (an HTTP/1.1 connection closed, an HTTP/2 stream reset) ends
// the call: the target is told (notifications/cancelled) and its handler
// stops, where it used to run on until the call's timeout (10 minutes
// without a route timeout) for an answer nobody would read.
func TestMCPClientHangupCancelsCall(t *testing.T) {
	const slow = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{"steps":100,"delayMs":5000}}}`
	for _, tr := range e2eTransports {
		for _, accept := range []string{"application/json", "application/json, text/event-stream"} {
			for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
				if proto == "HTTP/2" && tr != TransportStd {
					continue // the HTTP/2 path is the same on both
				}
				t.Run(fmt.Sprintf("%s/%s/%s", tr, proto, strings.ReplaceAll(accept, "/", "_")), func(t *testing.T) {
					cmd, args, env := mcptest.StdioCommand("hangup")
					record := filepath.Join(t.TempDir(), "record")
					env[mcptest.EnvRecord] = record
					tg := startGatewayWith(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - "+stdioYAML("hangup", cmd, args, env)+"\n", nil, tr)
					endpoint := tg.url(3000) + "/mcp"
					session := initRaw(t, endpoint)
					rec := func() *mcptest.Recorder { return mcptest.ReadStdioRecord(t, record) }
					if proto == "HTTP/1.1" {
						c, err := net.Dial("tcp", tg.addr(3000))
						if err != nil {
							t.Fatal(err)
						}
						fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nAccept: %s\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s",
							accept, session, len(slow), slow)
						mcptest.WaitFor(t, func() bool { return rec().CallCount("slow") == 1 })
						c.Close()
					} else {
						ctx, cancel := context.WithCancel(context.Background())
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(slow))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Accept", accept)
						req.Header.Set("Mcp-Session-Id", session)
						req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
						done := make(chan struct{})
						go func() {
							defer close(done)
							if resp, err := h2cClient().Do(req); err == nil {
								resp.Body.Close()
							}
						}()
						mcptest.WaitFor(t, func() bool { return rec().CallCount("slow") == 1 })
						cancel() // a stream reset
						<-done
					}
					mcptest.WaitFor(t, func() bool { return slices.Contains(rec().Cancelled(), "slow") })
				})
			}
		}
	}
}

// initRaw opens an MCP session with plain HTTP requests and returns its id.
func initRaw(t *testing.T, endpoint string) string {
	t.Helper()
	post := func(session, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, id)
	}
	if resp := post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
	return id
}
