package server

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// TestRetryPreconditionAndConditionE2E: a precondition that does not hold
// makes one attempt only; a condition retries answers codes leave alone.
func TestRetryPreconditionAndConditionE2E(t *testing.T) {
	var calls atomic.Int64
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch r.URL.Path {
		case "/flaky":
			if n%2 == 1 {
				w.WriteHeader(503)
				return
			}
		case "/busy":
			if n%2 == 1 {
				w.Header().Set("X-Retry-Me", "1")
				w.WriteHeader(200)
				w.Write([]byte("busy"))
				return
			}
		}
		w.Write([]byte("ok"))
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        retry:
          attempts: 2
          codes: [503]
          precondition: 'request.method == "GET"'
          condition: 'response.headers["x-retry-me"] == "1"'
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, tc := range []struct {
		desc, method, path string
		wantStatus         int
		wantCalls          int64
	}{
		{"a code, retried", "GET", "/flaky", 200, 2},
		{"the precondition does not hold: one attempt", "DELETE", "/flaky", 503, 1},
		{"the condition holds: retried", "GET", "/busy", 200, 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			calls.Store(0)
			req, _ := http.NewRequest(tc.method, tg.url(3000)+tc.path, nil)
			resp, body := do(t, req)
			if resp.StatusCode != tc.wantStatus || calls.Load() != tc.wantCalls {
				t.Fatalf("%d %q after %d calls, want %d after %d", resp.StatusCode, body, calls.Load(), tc.wantStatus, tc.wantCalls)
			}
		})
	}
}
