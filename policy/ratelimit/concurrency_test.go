package ratelimit

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
)

// admitConcurrently runs goroutines that each try attempts admissions and
// returns how many were allowed.
func admitConcurrently(l *Limiter, goroutines, attempts int) int64 {
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range goroutines {
		wg.Go(func() {
			<-start
			for range attempts {
				if l.Admit(nil, 0).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return allowed.Load()
}

// TestConcurrentAdmit: goroutines racing for a bucket get exactly its
// capacity, no more and no fewer, and with several buckets exactly the
// smallest one's, the others keeping the rest.
func TestConcurrentAdmit(t *testing.T) {
	goroutines := max(8, 4*runtime.GOMAXPROCS(0))
	tests := []struct {
		desc     string
		buckets  []config.RateLimitBucket
		want     int64
		wantHeld []int64
	}{
		{"one bucket", []config.RateLimitBucket{spec(1000, 1, time.Hour, "")}, 1000, []int64{0}},
		{"the first is smallest", []config.RateLimitBucket{spec(300, 1, time.Hour, ""), spec(1000, 1, time.Hour, "")}, 300, []int64{0, 700}},
		{"the last is smallest", []config.RateLimitBucket{spec(1000, 1, time.Hour, ""), spec(300, 1, time.Hour, "")}, 300, []int64{700, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, clock := newLimiter(t, tc.buckets...)
			// Four times as many attempts as tokens.
			got := admitConcurrently(l, goroutines, int(4*tc.want)/goroutines+1)
			if got != tc.want {
				t.Fatalf("%d admitted, want %d", got, tc.want)
			}
			for i, want := range tc.wantHeld {
				if h := held(l, clock, i); h != want {
					t.Errorf("bucket %d holds %d, want %d", i, h, want)
				}
			}
		})
	}
}

// TestConcurrentCharge: concurrent charges all count.
func TestConcurrentCharge(t *testing.T) {
	l, clock := newLimiter(t, spec(10000, 1, time.Hour, "tokens"))
	d := l.Admit(nil, 0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				l.Charge(&d, 3)
			}
		})
	}
	wg.Wait()
	if got := held(l, clock, 0); got != 10000-8*500*3 {
		t.Fatalf("holds %d, want %d", got, 10000-8*500*3)
	}
}

// TestConcurrentRefill: while the clock moves, goroutines racing for a
// bucket get exactly what it held plus what it gained: a refill is never
// lost or counted twice.
func TestConcurrentRefill(t *testing.T) {
	l, clock := newLimiter(t, spec(10, 5, time.Second, ""))
	const seconds = 100
	var allowed atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if l.Admit(nil, 0).Allowed {
					allowed.Add(1)
				} else {
					runtime.Gosched() // let the clock move
				}
			}
		})
	}
	// Let the admitters drain the bucket before each fill, so none
	// overflows: poll with a bound instead of sleeping.
	drained := func() {
		for deadline := time.Now().Add(10 * time.Second); held(l, clock, 0) > 0; {
			if time.Now().After(deadline) {
				t.Fatal("admitters did not drain the bucket")
			}
			runtime.Gosched()
		}
	}
	drained()
	for range seconds {
		clock.advance(time.Second)
		drained()
	}
	close(stop)
	wg.Wait()
	if got, want := allowed.Load(), int64(10+5*seconds); got != want {
		t.Fatalf("%d admitted, want %d", got, want)
	}
}
