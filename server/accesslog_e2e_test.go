package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/relaygate/gateway/codec/logline"
)

// TestAccessLogPolicyE2E: frontendPolicies.accessLog leaves out the
// requests its filter refuses, adds its fields, computed from the request,
// its credentials and its response (one named like a built-in field
// replaces it), and removes the built-in fields it names.
func TestAccessLogPolicyE2E(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Served-By", "up-1")
		w.Write([]byte("ok"))
	}))
	tg := startGateway(t, `
frontendPolicies:
  accessLog:
    filter: '!request.path.startsWith("/healthz")'
    add:
      client.team: apiKey.team
      upstream.server: response.headers["x-served-by"]
      request.query: request.query
      missing: jwt.sub
      route: '"replaced"'
    remove: [src, bytes_in]
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        apiKey:
          mode: optional
          location: {header: {name: x-api-key}}
          keys: [{key: k1, metadata: {team: blue}}]
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	get(t, tg.url(3000)+"/healthz")
	get(t, tg.url(3000)+"/a?x=1", "X-Api-Key", "k1")
	line := lastAccessLine(t, tg.accessLogs(), 1) // the health check is not logged
	for k, want := range map[string]string{
		"path": "/a", "client.team": "blue", "upstream.server": "up-1",
		"route": "replaced", // an added field named like a built-in one replaces it
	} {
		if got, _ := line[k].(string); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// A map is written as JSON, not as a string holding it.
	// (The observer keeps the field zap was given, json.RawMessage.)
	if q, _ := json.Marshal(line["request.query"]); string(q) != `{"x":"1"}` {
		t.Errorf("request.query = %#v, want the map {\"x\":\"1\"}", line["request.query"])
	}
	if _, ok := line["missing"]; ok {
		t.Error("a field whose expression failed is in the line")
	}
	for _, removed := range []string{"src", "bytes_in"} {
		if _, ok := line[removed]; ok {
			t.Errorf("removed field %s is in the line", removed)
		}
	}
	if _, ok := line["bytes_out"]; !ok {
		t.Error("a field not removed is missing")
	}
}

// lockedBuffer gathers what access writers write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Sync() error { return nil }

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAccessLogAddedFieldTypes: a field accessLog.add computes is written
// with its value's type in the binary's access line (logline.AccessWriter),
// as agentgateway writes it: a number or a bool bare ("code":200, where it
// was "code":"200"), a string quoted. The text format's fields are the
// same JSON object as its built-in ones ("status": 200). A list, a map or
// null is its JSON, not a string holding it.
func TestAccessLogAddedFieldTypes(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	for _, tc := range []struct {
		format string
		want   []string
	}{
		{"json", []string{`"status":200,`, `"code":200,`, `"ok":true,`, `"ratio":0.5}`, `"big":18446744073709551615,`, `"q":"7",`,
			`"list":["a","7"],`, `"m":{"k":1},`, `"n":null,`}},
		{"text", []string{`"status": 200,`, `"code": 200,`, `"ok": true,`, `"ratio": 0.5}`, `"big": 18446744073709551615,`, `"q": "7",`,
			`"list": ["a","7"],`, `"m": {"k":1},`, `"n": null,`}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var out lockedBuffer
			w := logline.NewAccessWriter(tc.format, &out, logline.AccessWriterOptions{})
			gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }, AccessLog: w})
			t.Cleanup(func() { gw.Shutdown(expiredContext()) })
			if err := gw.Apply(parseConfig(t, `
frontendPolicies:
  accessLog:
    add:
      code: 'response.code'
      ok: 'response.code == 200'
      ratio: 'double(response.code) / 400.0'
      big: '18446744073709551615u'
      q: 'request.query["q"]'
      list: '["a", request.query["q"]]'
      m: '{"k": 1}'
      n: 'null'
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})); err != nil {
				t.Fatal(err)
			}
			tg := &testGateway{t: t, gw: gw}
			if resp, body := get(t, tg.url(3000)+"/a?q=7"); resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			settleRecords(t, gw)
			line := out.String()
			for _, want := range tc.want {
				if !strings.Contains(line, want) {
					t.Errorf("line %s lacks %s", line, want)
				}
			}
			if tc.format != "json" {
				return
			}
			var fields map[string]any
			if err := json.Unmarshal([]byte(line), &fields); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			for k, want := range map[string]any{"code": 200.0, "ok": true, "ratio": 0.5, "q": "7"} {
				if fields[k] != want {
					t.Errorf("%s = %#v, want %#v", k, fields[k], want)
				}
			}
		})
	}
}
