package ratelimit

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

// TestAdmitAllocations: admitting (at once or in two parts), charging and writing the headers or the
// 429 allocate nothing (conditions aside: CEL evaluation allocates).
func TestAdmitAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	tests := []struct {
		desc    string
		buckets []config.RateLimitBucket
	}{
		{"one bucket, allowed", []config.RateLimitBucket{spec(1<<50, 1<<20, time.Second, "")}},
		{"one bucket, refused", []config.RateLimitBucket{spec(1, 1, time.Hour, "")}},
		{"requests and tokens", []config.RateLimitBucket{spec(1<<50, 1<<20, time.Second, ""), spec(1<<50, 1<<20, time.Second, "tokens")}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, _ := newLimiter(t, tc.buckets...)
			var resp fasthttp.Response
			d := l.Admit(nil, 10)
			d.Reject(&resp) // warm the response's buffers
			allocs := testing.AllocsPerRun(1000, func() {
				d := l.Admit(nil, 10)
				l.Charge(&d, 100)
				parts := l.AdmitRequest(nil)
				l.AdmitTokens(&parts, 10)
				l.Charge(&parts, 100)
				if d.Allowed {
					d.WriteHeaders(&resp.Header)
				} else {
					d.Reject(&resp)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per admission", allocs)
			}
		})
	}
}
