package mcp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/mcp/mcptest/nodemcp"
	"github.com/relaygate/gateway/config"
)

func TestParamsProblem(t *testing.T) {
	tests := []struct {
		params string
		want   string // a part of the problem; "" for none
	}{
		{``, ""},
		{`null`, ""},
		{`{}`, ""},
		{`{"name":"echo","arguments":{"_meta":null}}`, ""},
		{`{"_meta":{}}`, ""},
		{`{"_meta":{"progressToken":"t"}}`, ""},
		{`{"_meta":{"progressToken":7}}`, ""},
		{`{"_meta":{"progressToken":-7}}`, ""},
		{`{"_meta":{"progressToken":1.0}}`, ""},
		{`{"_meta":{"progressToken":1e3}}`, ""},
		{`{"_meta":{"other":null}}`, ""},
		{`{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"}}}`, ""},
		{`[1]`, "params must be an object"},
		{`"x"`, "params must be an object"},
		{`{"_meta":null}`, "_meta must be an object"},
		{`{"_meta":[]}`, "_meta must be an object"},
		{`{"_meta":"x"}`, "_meta must be an object"},
		{`{"_meta":{"progressToken":null}}`, "progressToken"},
		{`{"_meta":{"progressToken":{}}}`, "progressToken"},
		{`{"_meta":{"progressToken":[1]}}`, "progressToken"},
		{`{"_meta":{"progressToken":true}}`, "progressToken"},
		{`{"_meta":{"progressToken":1.5}}`, "progressToken"},
		{`{"_meta":{"progressToken":1e300}}`, "progressToken"},
		{`{"_meta":{"io.modelcontextprotocol/related-task":5}}`, "related-task"},
		{`{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":1}}}`, "related-task"},
		{`{"_meta":{"io.modelcontextprotocol/related-task":{}}}`, "related-task"},
	}
	for _, tt := range tests {
		got := paramsProblem(json.RawMessage(tt.params))
		if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
			t.Errorf("paramsProblem(%s) = %q, want %q", tt.params, got, tt.want)
		}
	}
}

// TestRelayRefusesInvalidMetaKeepsSession: a call whose params._meta is
// null, or whose progress token is not a string or an integer, is refused
// by the gateway with -32602 and reaches no target. Behind the gateway
// were the TypeScript SDK's "everything" server over streamable HTTP,
// which answered such a call with a 400 the gateway took for the end of
// the upstream session (the client's session ended on every target, 404),
// and over stdio, which dropped it silently (the call waited for the call
// timeout). The session goes on.
func TestRelayRefusesInvalidMetaKeepsSession(t *testing.T) {
	nodemcp.Require(t)
	cmd, args, env := nodemcp.EverythingStdio(t)
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "remote", Kind: config.MCPTargetStreamable, URL: nodemcp.StartEverythingHTTP(t)},
		{Name: "ev", Kind: config.MCPTargetStdio, Stdio: &config.MCPStdio{Cmd: cmd, Args: args, Env: env}},
	}})
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	if status, _, body := (rpc{session: id, body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`}).post(t, endpoint); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	call := func(tool, meta string) (int, string) {
		t.Helper()
		params := `{"name":"` + tool + `","arguments":{"message":"hi"}`
		if meta != "" {
			params += `,"_meta":` + meta
		}
		status, _, body := rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":` + params + `}}`}.post(t, endpoint)
		return status, body
	}
	works := func(tool, meta string) {
		t.Helper()
		if status, body := call(tool, meta); status != http.StatusOK || !strings.Contains(body, `Echo: hi`) {
			t.Fatalf("%s with _meta %s: %d %s", tool, meta, status, body)
		}
	}
	for _, tool := range []string{"remote_echo", "ev_echo"} {
		works(tool, "")
		for _, meta := range []string{`{"progressToken":"tok"}`, `{"progressToken":7}`} {
			works(tool, meta)
		}
		for _, meta := range []string{`null`, `[]`, `{"progressToken":{}}`, `{"progressToken":[1]}`, `{"progressToken":true}`, `{"progressToken":1.5}`, `{"io.modelcontextprotocol/related-task":5}`} {
			status, body := call(tool, meta)
			if status != http.StatusOK || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "_meta") {
				t.Fatalf("%s with _meta %s: %d %s, want -32602 from the gateway", tool, meta, status, body)
			}
			// The session goes on, on both targets.
			works("remote_echo", "")
			works("ev_echo", "")
		}
	}
	status, _, body := rpc{session: id, body: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":null,"progressToken":1,"progress":1}}`}.post(t, endpoint)
	if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32602`) {
		t.Fatalf("notification with _meta null: %d %s, want 400 -32602", status, body)
	}
	works("remote_echo", "")
}

func TestParamsProblemEscapedMeta(t *testing.T) {
	if got := paramsProblem(json.RawMessage(`{"\u005fmeta":null}`)); !strings.Contains(got, "_meta") {
		t.Fatalf("an escaped _meta key: %q", got)
	}
}
