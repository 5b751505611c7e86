package ratelimit

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

// benchLimiter is a limiter on the real clock that never runs dry, so every
// admission takes the allowed path.
func benchLimiter(b *testing.B, buckets ...config.RateLimitBucket) *Limiter {
	l, err := New(&config.LocalRateLimit{Buckets: buckets}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkAdmit(b *testing.B) {
	l := benchLimiter(b, spec(1<<50, 1<<20, time.Millisecond, ""))
	b.ReportAllocs()
	for b.Loop() {
		if !l.Admit(nil, 0).Allowed {
			b.Fatal("refused")
		}
	}
}

func BenchmarkAdmitRefused(b *testing.B) {
	l := benchLimiter(b, spec(1, 1, time.Hour, ""))
	l.Admit(nil, 0)
	b.ReportAllocs()
	for b.Loop() {
		if l.Admit(nil, 0).Allowed {
			b.Fatal("allowed")
		}
	}
}

func BenchmarkAdmitThreeBuckets(b *testing.B) {
	l := benchLimiter(b,
		spec(1<<50, 1<<20, time.Millisecond, ""),
		spec(1<<50, 1<<30, time.Second, ""),
		spec(1<<50, 1<<30, time.Second, "tokens"))
	b.ReportAllocs()
	for b.Loop() {
		if !l.Admit(nil, 0).Allowed {
			b.Fatal("refused")
		}
	}
}

// BenchmarkAdmitContended: every goroutine takes from the same bucket.
func BenchmarkAdmitContended(b *testing.B) {
	l := benchLimiter(b, spec(1<<50, 1<<20, time.Millisecond, ""))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !l.Admit(nil, 0).Allowed {
				b.Error("refused")
				return
			}
		}
	})
}

// BenchmarkAdmitConditional: one CEL condition evaluated per admission
// (the request's facts are copied for it, as for authorization rules).
func BenchmarkAdmitConditional(b *testing.B) {
	l, err := New(&config.LocalRateLimit{Conditional: []config.ConditionalRateLimit{
		cond(`request.headers["x-tier"] == "free"`, spec(1<<50, 1<<20, time.Millisecond, "")),
		cond("", spec(1<<50, 1<<20, time.Millisecond, "")),
	}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := requestCtx("/v1/chat/completions", nil, "X-Tier", "free", "Content-Type", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		if !l.Admit(c, 0).Allowed {
			b.Fatal("refused")
		}
	}
}

func BenchmarkWriteHeaders(b *testing.B) {
	l := benchLimiter(b, spec(1<<50, 1<<20, time.Millisecond, ""))
	d := l.Admit(nil, 0)
	var resp fasthttp.Response
	b.ReportAllocs()
	for b.Loop() {
		d.WriteHeaders(&resp.Header)
	}
}
