package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// heldUntilGone is an upstream that holds every request until the
// gateway's connection to it goes away, counting the requests and
// reporting each end on gone.
func heldUntilGone(t *testing.T, reqs *atomic.Int32, gone chan<- string) string {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // (net/http watches the connection once the body is read)
		reqs.Add(1)
		select {
		case <-r.Context().Done(): // the connection closed
			gone <- r.URL.Path
		case <-time.After(30 * time.Second):
		}
	}))
}

// resetAfterUpstream sends req over HTTP/2 and resets its stream (the
// client gives up) once the upstream has it.
func resetAfterUpstream(t *testing.T, req *http.Request, reqs *atomic.Int32) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := h2cClient().Do(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	eventually(t, 10*time.Second, "the request upstream", func() bool { return reqs.Load() == 1 })
	cancel() // RST_STREAM (CANCEL)
	if err := <-errc; err == nil {
		t.Fatal("the request was answered")
	}
}

// TestH2ResetCancelsUpstream: an HTTP/2 client resetting its stream ends
// the HTTP/1.1 upstream request it was waiting on (the upstream's
// connection closes, long before the route's timeout), and no retry
// sends it again.
func TestH2ResetCancelsUpstream(t *testing.T) {
	var reqs atomic.Int32
	gone := make(chan string, 4)
	up := heldUntilGone(t, &reqs, gone)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        timeout: {requestTimeout: 60s}
        retry: {attempts: 3, codes: [502, 503, 504]}
      backends: [{host: '${UP}', policies: {http: {version: HTTP1}}}]
`, map[string]string{"UP": up})
	req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+"/held", nil)
	resetAfterUpstream(t, req, &reqs)
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request outlived the client's stream")
	}
	eventually(t, 10*time.Second, "the request's access line", func() bool {
		return len(tg.accessLogs().FilterMessage("request").All()) == 1
	})
	if n := reqs.Load(); n != 1 {
		t.Fatalf("the upstream got %d requests, want 1 (no retry for a client gone)", n)
	}
}

// TestH2ResetCancelsLLMAttempt: the same for an LLM request, whose
// provider stops working on the answer, and no other provider of the
// failover group is asked.
func TestH2ResetCancelsLLMAttempt(t *testing.T) {
	var held, other atomic.Int32
	gone := make(chan string, 4)
	first := heldUntilGone(t, &held, gone)
	second := heldUntilGone(t, &other, gone)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - ai:
          groups:
          - providers:
            - {name: first, hostOverride: "${FIRST}", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}
          - providers:
            - {name: second, hostOverride: "${SECOND}", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}
`, map[string]string{"FIRST": first, "SECOND": second})
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a long answer, please"}]}`)
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resetAfterUpstream(t, req, &held)
	requireProviderCancelled(t, tg, gone, &other)
}

// requireProviderCancelled: the held provider's request ended (gone), the
// request was logged as client_gone, and the failover's other provider
// (other) was never asked.
func requireProviderCancelled(t *testing.T, tg *testGateway, gone <-chan string, other *atomic.Int32) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider's request outlived the client")
	}
	eventually(t, 10*time.Second, "the request's access line", func() bool {
		return len(tg.accessLogs().FilterMessage("request").All()) == 1
	})
	if n := other.Load(); n != 0 {
		t.Fatalf("the second provider got %d requests, want none", n)
	}
	if f := tg.accessLogs().FilterMessage("request").All()[0].ContextMap(); f["llm.error"] != "client_gone" {
		t.Errorf("llm.error %v, want client_gone", f["llm.error"])
	}
}
