package main

import (
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	var ts []time.Duration
	for i := 100; i >= 1; i-- {
		ts = append(ts, time.Duration(i)*time.Microsecond)
	}
	got := percentiles(ts)
	if got.p50 != 51*time.Microsecond || got.p99 != 100*time.Microsecond {
		t.Fatalf("p50 %v p99 %v", got.p50, got.p99)
	}
	if (percentiles(nil) != latencies{}) {
		t.Fatal("empty input")
	}
}
