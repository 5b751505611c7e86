package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/tlstest"
)

// TestBackendTLSStalePooledConnection: a TLS backend that closed an idle
// pooled connection (close_notify, then the socket) does not cost a POST,
// which the gateway never sends twice: the closed connection is found
// before the request goes on it, and a new one carries it. A healthy
// pooled connection is kept (the check does not take a TLS 1.3 session
// ticket for staleness).
func TestBackendTLSStalePooledConnection(t *testing.T) {
	pki := newBackendTLSPKI(t)
	up := tlstest.NewServer(t, tlstest.ServerOptions{Cert: pki.leaf})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {backendTLS: {root: '${ROOT}'}}
      backends: [{host: '${UP}'}]
`, pki.with("UP", up.Addr))
	post := func(path string) {
		t.Helper()
		resp, err := http.Post(tg.url(3000)+path, "text/plain", strings.NewReader("once"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	post("/a")
	post("/b")
	if n := up.Conns(); n != 1 {
		t.Fatalf("%d upstream connections for two POSTs in a row, want 1", n)
	}
	// The server marks the connection idle only after the answer went
	// out, which may come after the client read it: closing is asked
	// again until the connection was idle to close.
	eventually(t, 10*time.Second, "the upstream closing its idle connection", func() bool {
		up.CloseIdle()
		return up.Closed() == 1
	})
	post("/c")
	if n := up.Conns(); n != 2 {
		t.Fatalf("%d upstream connections, want a second one", n)
	}
}
