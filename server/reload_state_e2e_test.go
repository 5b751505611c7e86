package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// TestReloadKeepsRuntimeState checks that runtime state lives beside the
// snapshot: a reload that changes nothing fetches nothing, two routes
// naming one key set share it, validating a config fetches nothing, and
// state only a removed route used is let go.
func TestReloadKeepsRuntimeState(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	keys := jwttest.ServeJWKS(t, iss.JWKS())
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	cfg := `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /a}}]
      policies:
        jwtAuth: {issuer: '${ISS}', jwks: {url: '${KEYS_URL}'}}
        localRateLimit: [{maxTokens: 2, tokensPerFill: 1, fillInterval: 1h}]
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /b}}]
      policies:
        jwtAuth: {issuer: '${ISS}', jwks: {url: '${KEYS_URL}'}}
      backends: [{host: '${UP}'}]
`
	vars := map[string]string{"ISS": iss.Iss, "KEYS_URL": keys.URL, "UP": up}

	// Validating fetches nothing and leaves nothing running.
	if err := Validate(parseConfig(t, cfg, vars)); err != nil {
		t.Fatal(err)
	}
	if keys.Hits() != 0 {
		t.Fatalf("validating fetched the key set %d times", keys.Hits())
	}

	tg := startGateway(t, cfg, vars)
	eventually(t, 5*time.Second, "the first key set fetch", func() bool { return keys.Hits() >= 1 })
	tok := iss.Sign(iss.Claims("alice"))
	for _, path := range []string{"/a", "/b"} {
		if resp, body := get(t, tg.url(3000)+path, "Authorization", "Bearer "+tok); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if keys.Hits() != 1 {
		t.Fatalf("two routes naming one key set fetched it %d times", keys.Hits())
	}
	held := tg.gw.usage.Len()

	// The same config again: the same state, nothing fetched, the rate
	// limit's bucket as it was (one of its two tokens spent above).
	tg.apply(cfg, vars)
	if resp, _ := get(t, tg.url(3000)+"/a", "Authorization", "Bearer "+tok); resp.StatusCode != 200 {
		t.Fatalf("after reload: %d", resp.StatusCode)
	}
	if resp, _ := get(t, tg.url(3000)+"/a", "Authorization", "Bearer "+tok); resp.StatusCode != 429 {
		t.Fatalf("the reload refilled the rate limit bucket: %d, want 429", resp.StatusCode)
	}
	if keys.Hits() != 1 {
		t.Fatalf("a reload that changed nothing fetched the key set (%d fetches)", keys.Hits())
	}
	eventually(t, 5*time.Second, "the previous snapshot's release", func() bool { return tg.gw.usage.Len() == held })

	// Route /a goes: its rate limit is let go; the key set, still named by
	// /b, stays without a fetch.
	tg.apply(`
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /b}}]
      policies:
        jwtAuth: {issuer: '${ISS}', jwks: {url: '${KEYS_URL}'}}
      backends: [{host: '${UP}'}]
`, vars)
	eventually(t, 5*time.Second, "the removed route's state let go", func() bool { return tg.gw.usage.Len() == held-1 })
	if resp, _ := get(t, tg.url(3000)+"/b", "Authorization", "Bearer "+tok); resp.StatusCode != 200 || keys.Hits() != 1 {
		t.Fatalf("after removing /a: %d, %d fetches", resp.StatusCode, keys.Hits())
	}
}

// TestReloadAppliesBindSettings checks that a reload changing a per-bind
// setting (frontendPolicies.http) applies it to the running port, and that
// a reload's outcome is visible in metrics and on the admin page.
func TestReloadAppliesBindSettings(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	cfg := func(maxHeaders, maxBuffer int) string {
		return `
frontendPolicies:
  http: {http1MaxHeaders: ` + itoa(maxHeaders) + `, maxBufferSize: ` + itoa(maxBuffer) + `}
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`
	}
	vars := map[string]string{"UP": up}
	tg := startGateway(t, cfg(4, 1000), vars)
	headers := []string{"X-1", "a", "X-2", "b", "X-3", "c", "X-4", "d"}
	if resp, _ := get(t, tg.url(3000), headers...); resp.StatusCode != 431 {
		t.Fatalf("%d headers under http1MaxHeaders 4: %d, want 431", len(headers)/2, resp.StatusCode)
	}
	tg.apply(cfg(20, 5000), vars)
	if resp, _ := get(t, tg.url(3000), headers...); resp.StatusCode != 200 {
		t.Fatalf("after raising http1MaxHeaders: %d, want 200", resp.StatusCode)
	}
	tg.gw.mu.Lock()
	srv := tg.gw.binds[3000].srv.Load()
	tg.gw.mu.Unlock()
	if srv.MaxRequestBodySize != 5000 {
		t.Fatalf("the bind still reads bodies up to %d before the handler, want the new maxBufferSize 5000", srv.MaxRequestBodySize)
	}

	// Reload outcomes: metrics and the admin page. Before any failure the
	// last reload counts as successful (the start's load).
	var metrics strings.Builder
	tg.metrics().WritePrometheus(&metrics)
	if !strings.Contains(metrics.String(), "agentgateway_config_last_reload_successful 1") {
		t.Errorf("a started gateway's last reload is not successful:\n%s", metrics.String())
	}
	metrics.Reset()
	tg.gw.NoteReload("gateway.yaml", errors.New("binds[0].port: must be >= 1"))
	tg.metrics().WritePrometheus(&metrics)
	for _, want := range []string{
		`agentgateway_config_reloads_total{result="failure"} 1`,
		"agentgateway_config_last_reload_successful 0",
	} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	page, err := tg.gw.UIPage()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "The last reload failed") || !strings.Contains(string(page), "binds[0].port: must be &gt;= 1") {
		t.Errorf("the admin page does not show the failed reload:\n%s", page)
	}
	tg.gw.NoteReload("gateway.yaml", nil)
	metrics.Reset()
	tg.metrics().WritePrometheus(&metrics)
	if !strings.Contains(metrics.String(), "agentgateway_config_last_reload_successful 1") || !strings.Contains(metrics.String(), `agentgateway_config_reloads_total{result="success"} 1`) {
		t.Errorf("a successful reload is not counted:\n%s", metrics.String())
	}
	if page, _ := tg.gw.UIPage(); strings.Contains(string(page), "failed") {
		t.Error("the admin page still shows the failure after a good reload")
	}
}
