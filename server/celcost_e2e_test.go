package server

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// TestCELHeaderReadInALoop: a rule comparing each part of one header with
// another header converts that header once per request, not once per part.
// With 4,000 parts and a 12 KB header the gateway used to copy 48 MB for
// one request (0.6 CPU-s with 15,000 parts and 15 KB); it allocates well
// under a tenth of that now, and still decides.
func TestCELHeaderReadInALoop(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        authorization:
          rules:
          - 'request.headers["x"].split(",").exists(v, v == request.headers["y"])'
      backends: [{ host: '${UP}' }]
`, map[string]string{"UP": up})
	y := strings.Repeat("y", 12<<10)
	commas := strings.Repeat(",", 4000)
	for _, tc := range []struct {
		desc, x string
		want    int
	}{
		{"y among the parts", commas + y, http.StatusOK},
		{"y not among them", commas + "z", http.StatusForbidden},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			get(t, tg.url(3000)+"/warm") // the connection and the pools, outside the measure
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, body := get(t, tg.url(3000)+"/", "X", tc.x, "Y", y)
			runtime.ReadMemStats(&after)
			if resp.StatusCode != tc.want {
				t.Fatalf("%d %q, want %d", resp.StatusCode, body, tc.want)
			}
			if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(6<<20); got > limit {
				t.Errorf("one request allocated %d KiB, want at most %d KiB", got>>10, limit>>10)
			}
		})
	}
}

// TestCELUnboundedBuildsAreConfigErrors: the expressions of a file that
// could build, from one request, a string the product of two of its values
// (a header replaced into itself, a header's characters joined by itself,
// the body replaced into itself: terabytes for a 2 MiB body) are config
// errors naming their fields; none is left to the first request to find.
func TestCELUnboundedBuildsAreConfigErrors(t *testing.T) {
	_, err := config.Parse([]byte(`
binds:
- port: 3000
  listeners:
  - routes:
    - name: e2
      policies:
        transformations:
          request:
            set: { x-o: 'request.headers["x"].replace("a", request.headers["x"]).size()' }
      backends: [{ host: 127.0.0.1:1 }]
    - name: e6
      policies:
        transformations:
          request:
            set: { x-o: 'string(request.body).replace("a", string(request.body)).size()' }
      backends: [{ host: 127.0.0.1:1 }]
    - name: e7
      policies:
        authorization:
          rules: ['request.headers["x"].split("").join(request.headers["x"]).size() > 0']
      backends: [{ host: 127.0.0.1:1 }]
`), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"routes[0].policies.transformations.request.set.x-o: invalid CEL expression: replace() could build a string of up to 4.0 GiB",
		"routes[1].policies.transformations.request.set.x-o: invalid CEL expression: replace() could build a string of up to 4.0 GiB",
		"routes[2].policies.authorization.rules[0]: invalid CEL expression: join() could build a string of up to 4.0 GiB",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\nlacks\n%s", err, want)
		}
	}
}

// TestCELRunawayExpressionsFailClosed: what the load-time estimate cannot
// see is bounded as the gateway runs. A body replaced by a longer string
// is bounded by its real size, not the estimate's: one that would grow a
// 4 MiB body to 40 MiB fails (its header is left out) instead of being
// built; an allow rule whose pattern comes from the request refuses a
// pattern too large for its text (it allowed, after a second's matching);
// an allow rule encoding every header once per character of one refuses
// the request once it has cost MaxCELRuntimeCost (it allowed, after
// building 500 MB); each answers ordinary requests as before.
func TestCELRunawayExpressionsFailClosed(t *testing.T) {
	up, last := bodyRecorder(t, nil) // reads the body before answering
	tg := startGateway(t, `
frontendPolicies:
  http: { maxBufferSize: 8388608 }
binds:
- port: 3000
  listeners:
  - routes:
    - name: grow
      matches: [{ path: { exact: /grow } }]
      policies:
        transformations:
          request:
            set: { x-o: 'string(request.body).replace("a", "0123456789").size()' }
      backends: [{ host: '${UP}' }]
    - name: pattern
      matches: [{ path: { exact: /pattern } }]
      policies:
        authorization:
          rules: ['request.headers["x"].matches(request.headers["p"])']
      backends: [{ host: '${UP}' }]
    - name: loop
      matches: [{ path: { exact: /loop } }]
      policies:
        authorization:
          rules: ['request.headers["x"].split("").map(c, toJson(request.headers)).size() > 0']
      backends: [{ host: '${UP}' }]
`, map[string]string{"UP": up})

	post := func(body string) http.Header {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/grow", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if resp, got := do(t, req); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %q", resp.StatusCode, got)
		}
		seen, _ := last()
		return seen.header
	}
	if got := post("banana").Get("X-O"); got != "33" {
		t.Errorf("a small body: x-o %q, want 33", got)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h := post(strings.Repeat("a", 4<<20))
	runtime.ReadMemStats(&after)
	if got, ok := h["X-O"]; ok {
		t.Errorf("a 4 MiB body grown to 40 MiB: x-o %q, want it left out", got)
	}
	// The body read, the upstream's copy, string(request.body): about 20
	// MiB; the 40 MiB string would be on top.
	if got := after.TotalAlloc - before.TotalAlloc; got > 40<<20 {
		t.Errorf("the request allocated %d MiB, want at most 40", got>>20)
	}

	hostile := "(a|b)*a(a|b){1000}c"
	matching := strings.Repeat("ab", 8000) + "a" + strings.Repeat("b", 1000) + "c"
	for _, tc := range []struct {
		desc    string
		path    string
		headers []string
		want    int
	}{
		{"a small pattern", "/pattern", []string{"X", "abc", "P", "^a"}, http.StatusOK},
		{"a pattern too large for its text", "/pattern", []string{"X", matching, "P", hostile}, http.StatusForbidden},
		{"a loop over a short header", "/loop", []string{"X", "abc"}, http.StatusOK},
		{"a loop over a long one", "/loop", []string{"X", strings.Repeat("x", 5000), "Y", strings.Repeat("y", 20000)}, http.StatusForbidden},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			runtime.ReadMemStats(&before)
			resp, body := get(t, tg.url(3000)+tc.path, tc.headers...)
			runtime.ReadMemStats(&after)
			if resp.StatusCode != tc.want {
				t.Errorf("%d %q, want %d", resp.StatusCode, body, tc.want)
			}
			// The loop stopped at its cost limit allocates some tens of
			// MiB (more under -race, and the process's other goroutines
			// count too); unbounded, it built 500 MB.
			if got := after.TotalAlloc - before.TotalAlloc; got > 160<<20 {
				t.Errorf("the request allocated %d MiB, want at most 160", got>>20)
			}
		})
	}
}
