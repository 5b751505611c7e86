package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

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
