package server

import (
	"io"
	"net/http"
	"testing"
)

// TestConnectIntoPortZeroWildcardBind: `port: 0` on an internal bind is the
// bind of every port, as a bind without a port is (and as agentgateway
// reads it): a tunnel to any port reaches its routes.
func TestConnectIntoPortZeroWildcardBind(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain "+r.Host)
	}))
	tg := startGateway(t, `
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- port: 0
  mode: internal
  listeners:
  - routes:
    - policies: {responseHeaderModifier: {set: {x-via: wildcard}}}
      backends: [{dynamic: {}}]
`, nil)
	c, br, status := connectRaw(t, tg.addr(1), up)
	if status != 200 {
		t.Fatalf("CONNECT %s: %d", up, status)
	}
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: "+up+"\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "plain "+up || resp.Header.Get("x-via") != "wildcard" {
		t.Fatalf("%d %q %q", resp.StatusCode, body, resp.Header.Get("x-via"))
	}
}
