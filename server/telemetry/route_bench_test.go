package telemetry

import (
	"bytes"
	"testing"
	"time"
)

func BenchmarkObserve(b *testing.B) {
	r := NewRegistry()
	m := r.Route("default/api", "svc")
	get := []byte("GET")
	m.Observe(get, 200, time.Millisecond, 1, 1)
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(get, 200, 3*time.Millisecond, 512, 4096)
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	r := NewRegistry()
	m := r.Route("default/api", "svc")
	get := []byte("GET")
	m.Observe(get, 200, time.Millisecond, 1, 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe(get, 200, 3*time.Millisecond, 512, 4096)
		}
	})
}

func BenchmarkConnOpenClose(b *testing.B) {
	bind := NewRegistry().Bind(8080)
	b.ReportAllocs()
	for b.Loop() {
		bind.ConnOpened()
		bind.ConnClosed()
	}
}

func BenchmarkWritePrometheus(b *testing.B) {
	r := goldenRegistry()
	for _, route := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		m := r.Route(route, "svc")
		for _, s := range []int{200, 201, 204, 301, 400, 404, 500, 503} {
			m.Observe([]byte("GET"), s, time.Millisecond, 1, 1)
		}
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		r.WritePrometheus(&buf)
	}
}
