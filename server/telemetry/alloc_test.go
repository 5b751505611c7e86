package telemetry

import (
	"testing"
	"time"
)

func TestHotPathDoesNotAllocate(t *testing.T) {
	r := NewRegistry()
	route := r.Route("default/api", "svc")
	backend := r.Backend("svc")
	bind := r.Bind(8080)
	get := []byte("GET")
	odd := []byte("FROB")
	// Warm the series the loops below use.
	route.Observe(get, 200, time.Millisecond, 10, 10)
	route.Observe(odd, 0, time.Millisecond, 10, 10)

	tests := []struct {
		desc string
		fn   func()
	}{
		{"Observe on a warmed series", func() { route.Observe(get, 200, 3*time.Millisecond, 512, 4096) }},
		{"Observe with folded method and status", func() { route.Observe(odd, 0, 3*time.Millisecond, 1, 1) }},
		{"Observe with a status folding onto a warmed slot", func() { route.Observe(odd, 1000, time.Second, 0, 0) }},
		{"ConnectError", backend.ConnectError},
		{"ConnOpened and ConnClosed", func() { bind.ConnOpened(); bind.ConnClosed() }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, tc.fn); n != 0 {
				t.Errorf("%v allocations per call, want 0", n)
			}
		})
	}
}
