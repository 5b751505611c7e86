package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEnvOverridesTheConfigSection runs the binary with agentgateway's
// environment variables over a config section that lacks or contradicts
// them: the tracing endpoint, protocol and headers, the worker threads and
// IPv6 come from the environment.
func TestEnvOverridesTheConfigSection(t *testing.T) {
	var (
		mu   sync.Mutex
		hits []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.URL.Path+" "+r.Header.Get("X-Env-Token"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	port := freePort(t)
	path := filepath.Join(t.TempDir(), "c.yaml")
	// No endpoint, and gRPC, which the HTTP collector would not take.
	writeConfig(t, path, fmt.Sprintf(`config:
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
  workerThreads: 1
  tracing:
    otlpProtocol: grpc
    randomSampling: true
binds:
- port: %d
  listeners:
  - routes:
    - policies: { directResponse: { status: 200, body: ok } }
`, port))
	p := startProc(t, path,
		"OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL,
		"OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTLP_HEADERS=x-env-token=from-env", "OTEL_EXPORTER_OTLP_TRACES_HEADERS=", "OTEL_EXPORTER_OTLP_HEADERS=",
		"WORKER_THREADS=3", "IPV6_ENABLED=false")
	p.waitLog(`starting.*"worker_threads": 3`)
	// IPv6 off: the bind listens on IPv4's every-interface address.
	p.waitLog(fmt.Sprintf(`listening.*"address": "0\.0\.0\.0:%d"`, port))
	if code, body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); code != 200 || body != "ok" {
		t.Fatalf("got %d %q", code, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := append([]string(nil), hits...)
		mu.Unlock()
		if len(got) > 0 {
			if got[0] != "/v1/traces from-env" {
				t.Fatalf("collector got %q, want /v1/traces with the header", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no spans exported to the environment's endpoint:\n%s", p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEnvValidated: --validate-only refuses a bad value of a variable the
// config section takes, naming the variable, and accepts a config section
// the environment completes.
func TestEnvValidated(t *testing.T) {
	const tracing = "config:\n  tracing: {}\nbinds: []\n"
	for _, tc := range []struct {
		desc, cfg string
		env       map[string]string
		want      string // in the error; "" means valid
	}{
		{desc: "endpoint from the environment", cfg: tracing, env: map[string]string{"OTLP_ENDPOINT": "http://127.0.0.1:4317"}},
		{desc: "no endpoint", cfg: tracing, want: "config.tracing.otlpEndpoint: required (or set OTLP_ENDPOINT"},
		{desc: "bad protocol", cfg: tracing, env: map[string]string{"OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTLP_PROTOCOL": "udp"}, want: "environment variable OTLP_PROTOCOL: must be grpc or http/protobuf"},
		{desc: "bad session key", cfg: "binds: []\n", env: map[string]string{"SESSION_KEY": "abc"}, want: "environment variable SESSION_KEY: must be 64 hex digits"},
		{desc: "bad worker threads", cfg: "binds: []\n", env: map[string]string{"WORKER_THREADS": "many"}, want: "environment variable WORKER_THREADS: must be"},
		{desc: "bad IPv6 switch", cfg: "binds: []\n", env: map[string]string{"IPV6_ENABLED": "maybe"}, want: "environment variable IPV6_ENABLED: must be true or false"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, name := range []string{"OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", "SESSION_KEY", "WORKER_THREADS", "IPV6_ENABLED"} {
				t.Setenv(name, tc.env[name])
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"-c", tc.cfg, "--validate-only"}, nil, &stdout, &stderr)
			if tc.want == "" {
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, stderr.String())
				}
				return
			}
			if code != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, want 1 with %q:\n%s", code, tc.want, stderr.String())
			}
		})
	}
}
