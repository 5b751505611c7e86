package server

import (
	"net/http"
	"testing"
	"time"
)

// TestFaultInjectionE2E: an opted-in request waits, and a conditional
// direct response answers the requests its condition picks while the
// others reach the backend.
func TestFaultInjectionE2E(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("backend")) }))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        delay: {duration: 'request.headers["x-chaos"] == "delay" ? 60 : 0'}
        directResponse:
          conditional:
          - condition: 'request.headers["x-chaos"] == "abort"'
            status: 503
            body: injected fault
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	if resp, body := get(t, tg.url(3000)+"/", "X-Chaos", "abort"); resp.StatusCode != 503 || body != "injected fault" {
		t.Fatalf("abort: %d %q", resp.StatusCode, body)
	} else if ct := resp.Header.Values("Content-Type"); len(ct) != 0 {
		// As the plain form: the body goes as configured, no type added.
		t.Fatalf("abort: Content-Type %q added", ct)
	}
	if resp, body := get(t, tg.url(3000)+"/"); resp.StatusCode != 200 || body != "backend" {
		t.Fatalf("no fault: %d %q", resp.StatusCode, body)
	}
	start := time.Now()
	if resp, body := get(t, tg.url(3000)+"/", "X-Chaos", "delay"); resp.StatusCode != 200 || body != "backend" {
		t.Fatalf("delay: %d %q", resp.StatusCode, body)
	}
	if waited := time.Since(start); waited < 60*time.Millisecond {
		t.Fatalf("answered after %v, want at least the 60ms delay", waited)
	}
}

// TestFaultDelayEndsAtTheRequestTimeout: a delay longer than the route's
// request timeout ends at the timeout, answered 504 as the timeout answers
// it, and the backend never sees the request. It used to run its whole
// length (2 s past a 300 ms timeout).
func TestFaultDelayEndsAtTheRequestTimeout(t *testing.T) {
	hits := make(chan struct{}, 1)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits <- struct{}{} }))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        timeout: {requestTimeout: 300ms}
        delay: {duration: '2000'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	start := time.Now()
	resp, _ := get(t, tg.url(3000)+"/")
	if waited := time.Since(start); resp.StatusCode != http.StatusGatewayTimeout || waited > 1500*time.Millisecond {
		t.Fatalf("%d after %v; want 504 at the 300ms timeout", resp.StatusCode, waited)
	}
	select {
	case <-hits:
		t.Fatal("the backend got the request")
	default:
	}
}
