package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
)

func hashOf(key string) string {
	d := sha256.Sum256([]byte(key))
	return "sha256:" + strings.ToUpper(hex.EncodeToString(d[:]))
}

func newPolicy(t testing.TB, cfg config.APIKeyAuth) *APIKeyAuth {
	t.Helper()
	p, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAPIKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := []config.APIKeyEntry{
		{Key: &config.Secret{Inline: "k-alpha"}, Metadata: map[string]any{"group": "eng", "tier": 2}},
		{KeyHash: hashOf("k-hashed")},
		{Key: &config.Secret{File: keyFile}, Metadata: "not an object"},
	}
	strict := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{List: keys}})
	optional := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{List: keys}, Mode: config.AuthModeOptional})
	permissive := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{List: keys}, Mode: config.AuthModePermissive})
	prefix := "Key "
	inHeader := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{List: keys}, Location: &config.AuthLocation{Header: &config.HeaderLocation{Name: "x-api-key"}}})
	inQuery := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{List: keys}, Location: &config.AuthLocation{QueryParameter: &config.NamedLocation{Name: "key"}}})
	keyScheme := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{List: keys}, Location: &config.AuthLocation{Header: &config.HeaderLocation{Name: "Authorization", Prefix: &prefix}}})
	const missing, invalid = "authentication failure: no API key\n", "authentication failure: invalid API key\n"
	tests := []struct {
		desc      string
		p         *APIKeyAuth
		uri       string
		headers   []string
		wantMeta  map[string]any // nil: no key authenticated
		wantBody  string
		challenge string
		wantURI   string // the forwarded target, when it changes
	}{
		{desc: "inline key with metadata", p: strict, headers: []string{"Authorization", "Bearer k-alpha"}, wantMeta: map[string]any{"group": "eng", "tier": 2}},
		{desc: "hashed key", p: strict, headers: []string{"Authorization", "Bearer k-hashed"}, wantMeta: map[string]any{}},
		{desc: "key from a file, metadata not an object", p: strict, headers: []string{"Authorization", "bearer from-file"}, wantMeta: map[string]any{}},
		{desc: "wrong key", p: strict, headers: []string{"Authorization", "Bearer k-alph"}, wantBody: invalid},
		{desc: "the hash itself is not a key", p: strict, headers: []string{"Authorization", "Bearer " + hashOf("k-hashed")}, wantBody: invalid},
		{desc: "missing", p: strict, wantBody: missing},
		{desc: "two keys", p: inHeader, headers: []string{"X-Api-Key", "k-hashed", "X-Api-Key", "k-alpha"}, wantBody: invalid, challenge: `APIKey realm="gateway"`},
		{desc: "query parameter twice", p: inQuery, uri: "/x?key=k-hashed&key=other", wantBody: invalid, challenge: `APIKey realm="gateway"`},
		{desc: "another scheme", p: strict, headers: []string{"Authorization", "Basic k-alpha"}, wantBody: missing},
		{desc: "optional without key", p: optional},
		{desc: "optional with a wrong key", p: optional, headers: []string{"Authorization", "Bearer nope"}, wantBody: invalid},
		{desc: "permissive with a wrong key", p: permissive, headers: []string{"Authorization", "Bearer nope"}},
		{desc: "permissive with a key", p: permissive, headers: []string{"Authorization", "Bearer k-alpha"}, wantMeta: map[string]any{"group": "eng", "tier": 2}},
		{desc: "own header", p: inHeader, headers: []string{"X-Api-Key", "k-hashed"}, wantMeta: map[string]any{}},
		{desc: "own header missing", p: inHeader, headers: []string{"Authorization", "Bearer k-hashed"}, wantBody: missing, challenge: `APIKey realm="gateway"`},
		{desc: "query parameter", p: inQuery, uri: "/x?a=1&key=k-hashed&b=2", wantMeta: map[string]any{}, wantURI: "/x?a=1&b=2"},
		{desc: "prefix scheme in the challenge", p: keyScheme, wantBody: missing, challenge: `Key realm="gateway"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			uri := tc.uri
			if uri == "" {
				uri = "/"
			}
			c := policytest.Ctx(policytest.NewRequest("GET", uri, tc.headers...))
			res := tc.p.OnRequest(c)
			if tc.wantBody != "" {
				if res != policy.Done || c.Fast.Response.StatusCode() != 401 {
					t.Fatalf("result %v status %d, want a 401", res, c.Fast.Response.StatusCode())
				}
				if got := string(c.Fast.Response.Body()); got != tc.wantBody {
					t.Errorf("body %q, want %q", got, tc.wantBody)
				}
				want := tc.challenge
				if want == "" {
					want = `Bearer realm="gateway"`
				}
				if got := string(c.Fast.Response.Header.Peek("WWW-Authenticate")); got != want {
					t.Errorf("WWW-Authenticate %q, want %q", got, want)
				}
				return
			}
			if res != policy.Continue {
				t.Fatalf("refused: %d %s", c.Fast.Response.StatusCode(), c.Fast.Response.Body())
			}
			if tc.wantMeta == nil {
				if c.APIKey != nil {
					t.Errorf("apiKey set to %v", c.APIKey)
				}
				return
			}
			if c.APIKey == nil || len(c.APIKey) != len(tc.wantMeta) {
				t.Fatalf("apiKey = %v, want %v", c.APIKey, tc.wantMeta)
			}
			for k, v := range tc.wantMeta {
				if c.APIKey[k] != v {
					t.Errorf("apiKey.%s = %v, want %v", k, c.APIKey[k], v)
				}
			}
			// The key is gone from what is forwarded, and kept for passthrough.
			for i := 0; i+1 < len(tc.headers); i += 2 {
				if v := c.Fast.Request.Header.Peek(tc.headers[i]); len(v) != 0 {
					t.Errorf("%s still forwarded: %q", tc.headers[i], v)
				}
			}
			if len(c.Token) == 0 {
				t.Error("the key was not kept for passthrough")
			}
			if tc.wantURI != "" {
				if got := string(c.Fast.Request.Header.RequestURI()); got != tc.wantURI {
					t.Errorf("forwarded target %q, want %q", got, tc.wantURI)
				}
			}
		})
	}
}

func TestAPIKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// The spec's key secret: entry names to a plain key or {key, metadata}.
	secret := write("secret.yaml", "alice: plain-alice\nbob: {key: bob-key, metadata: {group: eng}}\n")
	list := write("list.json", `["k1", {"keyHash": "`+hashOf("k2")+`", "metadata": {"n": 2}}]`)
	for _, tc := range []struct {
		file, key string
		meta      map[string]any
	}{
		{secret, "plain-alice", map[string]any{}},
		{secret, "bob-key", map[string]any{"group": "eng"}},
		{list, "k1", map[string]any{}},
		{list, "k2", map[string]any{"n": int64(2)}},
	} {
		p := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{File: tc.file}})
		c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", "Bearer "+tc.key))
		if p.OnRequest(c) != policy.Continue || len(c.APIKey) != len(tc.meta) {
			t.Fatalf("%s: key %q: refused or apiKey %v", tc.file, tc.key, c.APIKey)
		}
		for k, v := range tc.meta {
			if c.APIKey[k] != v {
				t.Errorf("%s: apiKey.%s = %v (%T), want %v", tc.file, k, c.APIKey[k], c.APIKey[k], v)
			}
		}
	}
	for _, tc := range []struct{ desc, text, want string }{
		{"empty", "", "no keys"},
		{"not a list or map", "42", "expected"},
		{"bad entry", "a: {keyHash: nope}", "a.keyHash: must be sha256"},
		{"twice", "a: k\nb: k\n", "b: the same key as keys[0]"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(&config.APIKeyAuth{Keys: config.APIKeys{File: write(tc.desc, tc.text)}})
			fe, ok := err.(*policy.FieldError)
			if !ok || fe.Field != "keys.file" || !strings.Contains(fe.Msg, tc.want) {
				t.Fatalf("err = %v, want keys.file: ...%s...", err, tc.want)
			}
		})
	}
}

func TestAPIKeyConfigErrors(t *testing.T) {
	tests := []struct {
		desc, wantField, wantMsg string
		cfg                      config.APIKeyAuth
	}{
		{"missing file", "keys[0].key.file", "cannot read", config.APIKeyAuth{Keys: config.APIKeys{List: []config.APIKeyEntry{{Key: &config.Secret{File: "/nonexistent/key"}}}}}},
		{"hash form", "keys[0].keyHash", "sha256:<64 hex digits>", config.APIKeyAuth{Keys: config.APIKeys{List: []config.APIKeyEntry{{KeyHash: "sha256:zz"}}}}},
		{"key twice (once hashed)", "keys[1]", "the same key", config.APIKeyAuth{Keys: config.APIKeys{List: []config.APIKeyEntry{{Key: &config.Secret{Inline: "a"}}, {KeyHash: hashOf("a")}}}}},
		{"mode", "mode", "must be one of", config.APIKeyAuth{Mode: "lax", Keys: config.APIKeys{List: []config.APIKeyEntry{{Key: &config.Secret{Inline: "a"}}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(&tc.cfg)
			fe, ok := err.(*policy.FieldError)
			if !ok {
				t.Fatalf("err = %v, want a FieldError", err)
			}
			if fe.Field != tc.wantField || !strings.Contains(fe.Msg, tc.wantMsg) {
				t.Errorf("got %s: %s, want %s: ...%s...", fe.Field, fe.Msg, tc.wantField, tc.wantMsg)
			}
		})
	}
}

// A key check allocates nothing, accepted or refused.
func TestAPIKeyAllocations(t *testing.T) {
	p := newPolicy(t, config.APIKeyAuth{Keys: config.APIKeys{List: []config.APIKeyEntry{{Key: &config.Secret{Inline: "k"}}}}})
	for _, h := range []string{"Bearer k", "Bearer wrong"} {
		c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", h))
		p.OnRequest(c)
		if n := testing.AllocsPerRun(100, func() {
			c.Fast.Request.Header.Set("Authorization", h)
			c.Fast.Response.Reset()
			p.OnRequest(c)
		}); n != 0 {
			t.Errorf("%q: %v allocations per check", h, n)
		}
	}
}

func BenchmarkAPIKey(b *testing.B) {
	var keys []config.APIKeyEntry
	for i := range 1000 {
		keys = append(keys, config.APIKeyEntry{Key: &config.Secret{Inline: "key-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + hashOf(string(rune(i)))[10:20]}})
	}
	keys = append(keys, config.APIKeyEntry{Key: &config.Secret{Inline: "the-key"}})
	p := newPolicy(b, config.APIKeyAuth{Keys: config.APIKeys{List: keys}})
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	b.ReportAllocs()
	for b.Loop() {
		c.Fast.Request.Header.Set("Authorization", "Bearer the-key")
		if p.OnRequest(c) != policy.Continue {
			b.Fatal("refused")
		}
	}
}
