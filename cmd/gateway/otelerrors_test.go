package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestTelemetryExportErrorsInTheLog: an OTLP collector that refuses the
// gateway's spans is reported in the gateway's own log, in its format,
// where the OpenTelemetry SDK wrote plain-text lines to stderr with the
// standard log package.
func TestTelemetryExportErrorsInTheLog(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no spans today", http.StatusBadRequest) // not retried
	}))
	t.Cleanup(collector.Close)
	port := freePort(t)
	cfg := fmt.Sprintf(`config:
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
  logging: { format: json }
  tracing:
    otlpEndpoint: %s
    otlpProtocol: http
    randomSampling: true
binds:
- port: %d
  listeners:
  - routes:
    - policies: { directResponse: { status: 200, body: ok } }
`, collector.URL, port)
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, path)
	p.waitLog(fmt.Sprintf(`"port":%d`, port))
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	p.waitLog(`^\{.*"msg":"telemetry export failed".*400`)
}
