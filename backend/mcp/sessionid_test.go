package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/config"
)

func testBackend(t *testing.T, name string, key []byte) *Backend {
	t.Helper()
	b, err := New(Options{Name: name, SessionKey: key, Config: &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: "http://127.0.0.1:1/mcp"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func TestSessionIDRoundTrip(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	for _, tc := range []struct {
		desc string
		key  []byte
	}{{"the process's key", nil}, {"configured key", key}} {
		t.Run(tc.desc, func(t *testing.T) {
			b := testBackend(t, "route", tc.key)
			st := &sessionState{Upstream: map[string]string{"a": "up-1"}, Version: "2025-06-18", Init: json.RawMessage(`{"protocolVersion":"2025-06-18"}`)}
			id, err := b.encodeSessionID(st)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.decodeSessionID(id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Upstream["a"] != "up-1" || got.Version != st.Version || string(got.Init) != string(st.Init) {
				t.Fatalf("decoded %+v", got)
			}
			again, _ := b.encodeSessionID(&sessionState{Upstream: st.Upstream})
			if again == id {
				t.Fatal("two sessions got the same id")
			}
			raw, _ := base64.RawURLEncoding.DecodeString(id)
			if bytes.Contains(raw, []byte("up-1")) {
				t.Fatal("the id shows the upstream session id")
			}
		})
	}
}

func TestSessionIDRefused(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	b := testBackend(t, "route", key)
	id, err := b.encodeSessionID(&sessionState{Upstream: map[string]string{"a": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(id)
	raw[len(raw)-1] ^= 1
	otherKey := testBackend(t, "route", bytes.Repeat([]byte{8}, 32))
	otherRoute := testBackend(t, "other", key)
	plain := testBackend(t, "route", nil)
	for _, tc := range []struct {
		desc string
		b    *Backend
		id   string
	}{
		{"tampered", b, base64.RawURLEncoding.EncodeToString(raw)},
		{"other key", otherKey, id},
		{"other route", otherRoute, id},
		{"not base64", b, "!!!"},
		{"empty", b, ""},
		{"too long", b, string(bytes.Repeat([]byte("a"), maxSessionIDBytes+1))},
		{"unsealed, without a key", plain, base64.RawURLEncoding.EncodeToString([]byte(`{"n":"x","t":1,"u":{"a":"x"}}`))},
		{"unsealed, not json", plain, base64.RawURLEncoding.EncodeToString([]byte(`nope`))},
		{"sealed by another scope", testBackendScope(t, "route", "other", key), id},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := tc.b.decodeSessionID(tc.id); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func testBackendScope(t *testing.T, name, scope string, key []byte) *Backend {
	t.Helper()
	b, err := New(Options{Name: name, Scope: scope, SessionKey: key, Config: &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: "http://127.0.0.1:1/mcp"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func FuzzDecodeSessionID(f *testing.F) {
	b, err := New(Options{Name: "r", Config: &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a"}}}})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	id, _ := b.encodeSessionID(&sessionState{Upstream: map[string]string{"a": "b"}})
	f.Add(id)
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := b.decodeSessionID(s)
		if err == nil && st.Nonce == "" {
			t.Fatal("accepted a state without nonce")
		}
	})
}

// TestRelaySessionIDStaysSmall: a session id carries only what a resume
// needs of the client's initialize params, so a client's icons (a data
// URI of any size) do not grow it: a 13 KB icon made a 17.8 KB id that
// Node's HTTP client refused, 28 KB one the gateway's own request head
// limit refused, 90 KB one curl would not read. Capabilities too large
// for an id fail the initialize with an error naming the bound, and leave
// no session. Another replica resumes the small id and initializes its
// stdio target again with what the id kept.
func TestRelaySessionIDStaysSmall(t *testing.T) {
	url, _ := target(t, "a", "count")
	cmd, args, env := mcptest.StdioCommand("s")
	cfg := &config.MCPBackend{Targets: []config.MCPTarget{
		{Name: "a", Kind: config.MCPTargetStreamable, URL: url},
		{Name: "s", Kind: config.MCPTargetStdio, Stdio: &config.MCPStdio{Cmd: cmd, Args: args, Env: env}},
	}}
	key := []byte("0123456789abcdef0123456789abcdef")
	replica := func() (*Backend, string) {
		b, err := New(Options{Name: "route", Config: cfg, SessionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b, serveBackend(t, b, nil)
	}
	first, endpoint := replica()
	_, second := replica()
	initialize := func(clientInfo, capabilities string) (int, http.Header, string) {
		return rpc{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + capabilities + `,"clientInfo":` + clientInfo + `}}`}.post(t, endpoint)
	}
	for _, n := range []int{13_000, 28_000, 90_000, 1 << 20} {
		icon := `{"name":"c","title":"Client","version":"1","description":"` + strings.Repeat("d", 500) + `","icons":[{"src":"data:image/png;base64,` + strings.Repeat("A", n) + `","mimeType":"image/png"}]}`
		status, h, body := initialize(icon, `{"roots":{"listChanged":true}}`)
		id := h.Get("Mcp-Session-Id")
		if status != http.StatusOK || id == "" {
			t.Fatalf("icon of %d bytes: %d %.200s", n, status, body)
		}
		if len(id) > 1024 {
			t.Fatalf("icon of %d bytes: a session id of %d bytes", n, len(id))
		}
		for _, ep := range []string{endpoint, second} {
			if status, _, body := (rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"s_echo","arguments":{"message":"x"}}}`}).post(t, ep); status != http.StatusOK || strings.Contains(body, `"error"`) {
				t.Fatalf("icon of %d bytes, a call on %s: %d %s", n, ep, status, body)
			}
		}
	}
	sessions := first.SessionCount()
	status, h, body := initialize(`{"name":"c","version":"1"}`, `{"experimental":{"x":"`+strings.Repeat("x", 10_000)+`"}}`)
	if status != http.StatusOK || h.Get("Mcp-Session-Id") != "" || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "8192 bytes") {
		t.Fatalf("capabilities too large for an id: %d %v %.300s", status, h, body)
	}
	if got := first.SessionCount(); got != sessions {
		t.Fatalf("%d sessions after a refused initialize, want %d", got, sessions)
	}
}

func TestResumeInitKeepsWhatTargetsNeed(t *testing.T) {
	got := resumeInit(json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"c","title":"T","version":"1","icons":[{"src":"data:x"}],"websiteUrl":"https://x"},"_meta":{"a":1}}`))
	want := `{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"c","title":"T","version":"1"}}`
	if string(got) != want {
		t.Fatalf("resumeInit = %s, want %s", got, want)
	}
	if got := resumeInit(json.RawMessage(`[1]`)); string(got) != `[1]` {
		t.Fatalf("resumeInit of an array = %s", got)
	}
}
