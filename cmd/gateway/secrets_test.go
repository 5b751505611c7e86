package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestSideServersHideSecrets runs the binary with an inline config (-c)
// holding secrets where a config may hold them: config.session.key, header
// values set by request and response header modifiers (route, route
// backend, named backend), a route's header match, the password of an MCP
// target's URL. No admin, stats or readiness endpoint shows any of them:
// /debug/pprof/cmdline showed the whole command line, -c's config included,
// and /config_dump the header values (item 14 of issue 17).
func TestSideServersHideSecrets(t *testing.T) {
	secrets := []string{
		"deadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeef", // config.session.key
		"REQSETAUTH-1", "REQADD-APIKEY-2", "RESPSET-COOKIE-3", "BACKEND-APIKEY-4",
		"NAMED-TOKEN-5", "MATCH-BEARER-6", "PROXYAUTH-7", "MCP-PASSWORD-8", "FORWARDED-COOKIE-9",
	}
	port := freePort(t)
	cfg := fmt.Sprintf(`config:
  adminAddr: 127.0.0.1:0
  statsAddr: 127.0.0.1:0
  readinessAddr: 127.0.0.1:0
  session: {key: %s}
backends:
- name: named
  host: 127.0.0.1:1
  policies:
    requestHeaderModifier: {set: {x-auth-token: NAMED-TOKEN-5}}
binds:
- port: %d
  listeners:
  - routes:
    - name: secretive
      matches: [{path: {pathPrefix: /s}, headers: [{name: Authorization, value: {exact: "Bearer MATCH-BEARER-6"}}]}]
      policies:
        requestHeaderModifier:
          set: {authorization: "Bearer sk-live-REQSETAUTH-1", proxy-authorization: "Basic PROXYAUTH-7", cookie: "a=FORWARDED-COOKIE-9"}
          add: {x-api-key: REQADD-APIKEY-2, x-visible: shown-in-dump}
        responseHeaderModifier: {set: {set-cookie: "sid=RESPSET-COOKIE-3"}}
      backends:
      - host: 127.0.0.1:1
        policies:
          requestHeaderModifier: {set: {X-Api-Key: BACKEND-APIKEY-4}}
    - name: named-route
      matches: [{path: {pathPrefix: /n}}]
      backends: [{backend: named}]
    - name: mcp
      matches: [{path: {exact: /mcp}}]
      backends:
      - mcp: {targets: [{name: t, mcp: {host: "http://user:MCP-PASSWORD-8@127.0.0.1:1/mcp"}}]}
`, secrets[0], port)
	p := startProcArgs(t, []string{"-c", cfg})
	admin := strings.TrimSuffix(p.waitLog(`admin UI available at (http://\S+/ui/)`)[1], "/ui/")
	admin = strings.Replace(admin, "localhost", "127.0.0.1", 1)
	stats := "http://" + p.waitLog(`listener established.*"address": "(\S+)", "component": "stats"`)[1]
	ready := "http://" + p.waitLog(`listener established.*"address": "(\S+)", "component": "readiness"`)[1]

	const red = `"\u003credacted\u003e"` // "<redacted>" as encoding/json writes it
	tests := []struct {
		desc string
		url  string
		want []string // shown: the endpoint does carry what the secrets were in
	}{
		{desc: "index", url: admin + "/", want: []string{"/config_dump"}},
		{desc: "UI", url: admin + "/ui/", want: []string{"secretive", "named-route"}},
		{desc: "config dump", url: admin + "/config_dump", want: []string{`"key": ` + red, `"authorization": ` + red, `"x-api-key": ` + red, `"X-Api-Key": ` + red, `"set-cookie": ` + red, `"cookie": ` + red, `"x-visible": "shown-in-dump"`, `"exact": ` + red, "user:xxxxx@127.0.0.1:1"}},
		{desc: "pprof index", url: admin + "/debug/pprof/", want: []string{"cmdline"}},
		{desc: "pprof cmdline", url: admin + "/debug/pprof/cmdline", want: []string{"gateway\x00-c\x00<redacted>"}},
		{desc: "pprof goroutines", url: admin + "/debug/pprof/goroutine?debug=2", want: []string{"goroutine"}},
		{desc: "pprof heap", url: admin + "/debug/pprof/heap?debug=1", want: []string{"heap profile"}},
		{desc: "pprof allocs", url: admin + "/debug/pprof/allocs?debug=1", want: []string{"heap profile"}},
		{desc: "pprof threads", url: admin + "/debug/pprof/threadcreate?debug=1", want: []string{"threadcreate profile"}},
		{desc: "pprof symbol", url: admin + "/debug/pprof/symbol", want: []string{"num_symbols"}},
		{desc: "metrics", url: stats + "/metrics", want: []string{"agentgateway_"}},
		{desc: "readiness", url: ready + "/healthz/ready", want: []string{"ready"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			code, body := httpGet(t, tc.url)
			if code != 200 {
				t.Fatalf("%s: %d\n%s", tc.url, code, body)
			}
			for _, s := range secrets {
				if strings.Contains(body, s) {
					t.Errorf("%s shows the secret %q", tc.url, s)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("%s lacks %q:\n%.2000s", tc.url, w, body)
				}
			}
		})
	}
}

// TestRedactArgs hides the inline config in every form the flag package
// reads, and nothing else.
func TestRedactArgs(t *testing.T) {
	tests := []struct {
		desc string
		args []string
		want []string
	}{
		{"-c value", []string{"gw", "-c", "s", "--transport", "std"}, []string{"gw", "-c", "<redacted>", "--transport", "std"}},
		{"--c value", []string{"gw", "--c", "s"}, []string{"gw", "--c", "<redacted>"}},
		{"-config value", []string{"gw", "-config", "s"}, []string{"gw", "-config", "<redacted>"}},
		{"--config value", []string{"gw", "--config", "s"}, []string{"gw", "--config", "<redacted>"}},
		{"-c=value", []string{"gw", "-c=s=t"}, []string{"gw", "-c=<redacted>"}},
		{"--config=value", []string{"gw", "--config=s"}, []string{"gw", "--config=<redacted>"}},
		{"--config= empty", []string{"gw", "--config="}, []string{"gw", "--config=<redacted>"}},
		{"-c last", []string{"gw", "-c"}, []string{"gw", "-c"}},
		{"-f kept", []string{"gw", "-f", "c", "--validate-only"}, []string{"gw", "-f", "c", "--validate-only"}},
		{"after --", []string{"gw", "--", "-c", "s"}, []string{"gw", "--", "-c", "s"}},
		{"program name", []string{"-c"}, []string{"-c"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := redactArgs(tc.args)
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Fatalf("redactArgs(%q) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}
