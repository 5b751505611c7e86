package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// keyedRoute is a route that refuses requests without its API key, before
// reading their bodies.
const keyedRoute = `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        apiKey: {keys: [{key: k-123}]}
      backends: [{host: 127.0.0.1:1}]
`

// TestRefusedUploadGetsItsAnswer: a client uploading a large body to a
// route that refuses it before reading it (here a missing API key) gets the
// refusal, not "connection reset": the gateway closes the connection after
// the answer, with the body still coming, and a plain close would reset it
// and take the answer with it (sock.Conn.SetLingerClose). Go's client
// writes the whole body before it looks for the answer, as many do.
func TestRefusedUploadGetsItsAnswer(t *testing.T) {
	const size = 32 << 20
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, keyedRoute, nil, tr)
			for _, chunked := range []bool{false, true} {
				req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/upload", io.LimitReader(zeros{}, size))
				if err != nil {
					t.Fatal(err)
				}
				if !chunked {
					req.ContentLength = size
				}
				resp, body := do(t, req)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("chunked %v: %d %q; want 401", chunked, resp.StatusCode, body)
				}
			}
		})
	}
}

// TestRefusedUploadGetsItsAnswerOverTLS: the same over an HTTPS listener,
// whose socket lingers under the TLS close.
func TestRefusedUploadGetsItsAnswerOverTLS(t *testing.T) {
	const size = 32 << 20
	pki := newTestPKI(t, "linger")
	srv := pki.Server("up.test", "up.test")
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - policies:
        apiKey: {keys: [{key: k-123}]}
      backends: [{host: 127.0.0.1:1}]
`, map[string]string{"CERT": srv.CertFile, "KEY": srv.KeyFile})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: "up.test", RootCAs: pki.Pool}}}
	t.Cleanup(client.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodPost, "https://"+tg.addr(1)+"/upload", io.LimitReader(zeros{}, size))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%d; want 401", resp.StatusCode)
	}
}

// TestRefusedUploadLingersBeforeTheRestCame: a client that has sent only
// the start of a large body when the gateway refuses it, and sends the rest
// after a pause, meets a lingering close (it drains what comes), not a
// reset: the gateway knows the body is owed, even with nothing of it
// waiting at the close (sock.Conn.SetPeerOwes). The close used to linger
// only when bytes were waiting, so a client whose next write came after
// the close (a busy machine, a slow client) got "broken pipe" or a reset
// instead of its answer.
func TestRefusedUploadLingersBeforeTheRestCame(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, keyedRoute, nil, tr)
			c, err := net.Dial("tcp", tg.addr(3000))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			piece := make([]byte, 64<<10)
			io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1073741824\r\n\r\n")
			c.Write(piece[:8<<10])
			// The answer, to its end: the gateway has closed its side.
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			// Then the rest of the body comes, and is taken.
			for i := range 64 {
				if _, err := c.Write(piece); err != nil {
					t.Fatalf("write %d after the answer: %v (a reset, not a lingering close)", i, err)
				}
			}
		})
	}
}
