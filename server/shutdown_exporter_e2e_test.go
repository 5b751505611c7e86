package server

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestShutdownDoesNotWaitOnAHungCollector: the exporters' last sending is
// bounded by the drain's deadline (and a second past it), not by their own
// 5 s timeouts: a collector that takes the export and never answers held
// the exit of an idle gateway 10 s past its drain. Shutdown returns while
// the collector still holds the export open.
func TestShutdownDoesNotWaitOnAHungCollector(t *testing.T) {
	got := make(chan struct{}, 16)
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	collector := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-released:
		}
	}))
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	if err := gw.Apply(parseConfig(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: http
    randomSampling: true
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {directResponse: {status: 200}}
`, map[string]string{"COLLECTOR": collector})); err != nil {
		t.Fatal(err)
	}
	tg := &testGateway{t: t, gw: gw}
	if resp, _ := get(t, tg.url(3000)+"/"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The span's batch reaches the collector, which holds it.
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no export reached the collector")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() {
		gw.Shutdown(ctx)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(4 * time.Second):
		t.Fatal("Shutdown still waits on the hung collector 4 s on (its deadline was 100 ms)")
	}
}
