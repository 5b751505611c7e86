package mcp

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// TestRelaySessionOfTokenWithoutSubject: a session opened with a validated
// token that has no sub is bound to that token (and its issuer): another
// such token, a token with a subject and an anonymous client all get 404.
// Subject used to be "" for such tokens, so they shared their sessions
// with each other and with anonymous clients.
func TestRelaySessionOfTokenWithoutSubject(t *testing.T) {
	url, _ := target(t, "a", "count")
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The test's "authentication": X-Token is a validated token whose
	// claims are X-Iss and, when set, X-Sub.
	endpoint := serveBackendOn(t, b, ln, func(r *Request) {
		h := &r.Fast.Request.Header
		if tok := h.Peek("X-Token"); len(tok) > 0 {
			claims := map[string]any{"iss": string(h.Peek("X-Iss"))}
			if sub := h.Peek("X-Sub"); len(sub) > 0 {
				claims["sub"] = string(sub)
			}
			r.Subject = Subject(claims, tok)
		}
	})
	post := func(headers map[string]string, session, body string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	opener := map[string]string{"X-Token": "token-a", "X-Iss": "issuer"}
	status, h := post(opener, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	id := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d", status)
	}
	for _, tc := range []struct {
		desc    string
		headers map[string]string
		want    int
	}{
		{"the opener's token", opener, http.StatusOK},
		{"another token without sub", map[string]string{"X-Token": "token-b", "X-Iss": "issuer"}, http.StatusNotFound},
		{"the same token bytes from another issuer", map[string]string{"X-Token": "token-a", "X-Iss": "other"}, http.StatusNotFound},
		{"a token with a subject", map[string]string{"X-Token": "token-c", "X-Iss": "issuer", "X-Sub": "alice"}, http.StatusNotFound},
		{"anonymous", nil, http.StatusNotFound},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if status, _ := post(tc.headers, id, toolsList); status != tc.want {
				t.Fatalf("status %d, want %d", status, tc.want)
			}
		})
	}
}

// TestSubjectFingerprints: subjects and tokens without one never share a
// fingerprint; only a request without claims has none.
func TestSubjectFingerprints(t *testing.T) {
	withSub := Subject(map[string]any{"iss": "i", "sub": "s"}, []byte("t1"))
	if withSub != Subject(map[string]any{"iss": "i", "sub": "s"}, []byte("t2")) {
		t.Fatal("a subject's fingerprint depends on the token")
	}
	noSub := Subject(map[string]any{"iss": "i"}, []byte("t1"))
	for _, other := range []string{"", withSub, Subject(map[string]any{"iss": "i"}, []byte("t2")), Subject(map[string]any{"iss": "i", "sub": 7}, []byte("t2"))} {
		if noSub == other {
			t.Fatalf("a token without sub shares the fingerprint %q", other)
		}
	}
	if Subject(nil, nil) != "" || Subject(nil, []byte("t")) != "" {
		t.Fatal("no claims has a fingerprint")
	}
}
