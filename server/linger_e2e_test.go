package server

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
)

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
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        apiKey: {keys: [{key: k-123}]}
      backends: [{host: 127.0.0.1:1}]
`, nil, tr)
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
