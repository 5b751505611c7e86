package telemetry

import (
	"strconv"
	"testing"
)

func BenchmarkLLMObserve(b *testing.B) {
	m := NewRegistry().LLM()
	o := chat()
	m.Observe(&o)
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(&o)
	}
}

func BenchmarkLLMObserveParallel(b *testing.B) {
	m := NewRegistry().LLM()
	o := chat()
	m.Observe(&o)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		o := chat()
		for pb.Next() {
			m.Observe(&o)
		}
	})
}

// BenchmarkLLMObserveUnknownModels is a client sending a new model name on
// every request once the first bound is full: each lookup misses, then
// finds the folded series.
func BenchmarkLLMObserveUnknownModels(b *testing.B) {
	m := NewRegistry().LLM()
	o := chat()
	for i := range maxLLMSeries + 1 {
		o.RequestModel = "m" + strconv.Itoa(i)
		m.Observe(&o)
	}
	models := make([]string, 4096)
	for i := range models {
		models[i] = "unknown-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		o.RequestModel = models[i%len(models)]
		i++
		m.Observe(&o)
	}
}

func BenchmarkLLMWritePrometheus(b *testing.B) {
	r := goldenLLMRegistry()
	m := r.LLM()
	o := chat()
	for i := range 100 {
		o.RequestModel = "m" + strconv.Itoa(i)
		m.Observe(&o)
	}
	var buf bytesWriter
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		r.WritePrometheus(&buf)
	}
}
