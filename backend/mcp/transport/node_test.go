package transport

import (
	"errors"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/relaygate/gateway/backend/mcp/mcptest/nodemcp"
)

// TestStreamableTypeScriptRefusesMessageNotSession: the TypeScript SDK's
// streamable HTTP server (the "everything" reference server) answers a
// message its schema refuses ("_meta": null, a progress token that is an
// object) with HTTP 400, -32700 and id null. That refuses the request: its
// error is the call's answer and the upstream session goes on. It used to
// be taken for a refusal of the session (ErrSessionExpired), which ended
// the client's session on every target.
func TestStreamableTypeScriptRefusesMessageNotSession(t *testing.T) {
	endpoint := nodemcp.StartEverythingHTTP(t)
	conn := dial(t, StreamableOptions{URL: endpoint, Client: &http.Client{}})
	d := newDriver(t, conn)
	if r := d.call("initialize", initParams(testVersion)); r.Error != nil {
		t.Fatalf("initialize: %v", r.Error)
	}
	d.notify("notifications/initialized", map[string]any{})
	echo := func() {
		t.Helper()
		if got := d.tool("echo", map[string]any{"message": "hi"}, nil); got != "Echo: hi" {
			t.Fatalf("echo = %q", got)
		}
	}
	echo()
	for _, meta := range []any{nil, map[string]any{"progressToken": map[string]any{}}, map[string]any{"progressToken": 1.5}} {
		params := map[string]any{"name": "echo", "arguments": map[string]any{"message": "hi"}, "_meta": meta}
		r := d.call("tools/call", params)
		if r.Error == nil {
			t.Fatalf("_meta %v: the target took it: %s", meta, r.Result)
		}
		if errors.Is(r.Error, ErrSessionExpired) {
			t.Fatalf("_meta %v: taken for a refused session: %v", meta, r.Error)
		}
		var w *jsonrpc.Error
		if !errors.As(r.Error, &w) || w.Code != jsonrpc.CodeParseError {
			t.Fatalf("_meta %v: error %v, want the target's -32700", meta, r.Error)
		}
		echo() // the upstream session goes on
	}
	if conn.SessionID() == "" {
		t.Fatal("no upstream session")
	}
}
