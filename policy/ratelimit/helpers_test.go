package ratelimit

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// fakeClock is a clock tests move by hand; safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

var epoch = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func (f *fakeClock) now() time.Time               { return epoch.Add(time.Duration(f.ns.Load())) }
func (f *fakeClock) advance(d time.Duration)      { f.ns.Add(int64(d)) }
func (f *fakeClock) set(sinceStart time.Duration) { f.ns.Store(int64(sinceStart)) }

// spec is a bucket's config in one line: maxTokens, tokensPerFill,
// fillInterval, type.
func spec(maxTokens, perFill uint64, interval time.Duration, typ string) config.RateLimitBucket {
	return config.RateLimitBucket{MaxTokens: maxTokens, TokensPerFill: perFill, FillInterval: config.Duration{Duration: interval}, Type: typ}
}

// newLimiter compiles the list form on a fake clock.
func newLimiter(t testing.TB, buckets ...config.RateLimitBucket) (*Limiter, *fakeClock) {
	t.Helper()
	clock := new(fakeClock)
	l, err := New(&config.LocalRateLimit{Buckets: buckets}, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	return l, clock
}

// cond is a conditional entry; an empty condition makes the fallback.
func cond(condition string, b config.RateLimitBucket) config.ConditionalRateLimit {
	e := config.ConditionalRateLimit{RateLimitBucket: b}
	if condition != "" {
		c := config.CELCondition(condition)
		e.Condition = &c
	}
	return e
}

// requestCtx is a policy context for GET path from 10.1.2.3:4567 with the
// given header pairs and claims, set up as the server does.
func requestCtx(path string, claims map[string]any, headers ...string) *policy.Ctx {
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI(path)
	req.Header.SetHost("api.example.com")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	fc := new(fasthttp.RequestCtx)
	fc.Init(&req, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4567}, nil)
	return &policy.Ctx{
		Fast:   fc,
		Host:   []byte("api.example.com"),
		Path:   fc.Request.URI().PathOriginal(),
		Scheme: []byte("http"),
		Claims: claims,
	}
}

// held is what bucket i of the list form holds now.
func held(l *Limiter, clock *fakeClock, i int) int64 {
	b := &l.entries[0].buckets[i]
	return b.tokens(b.fills(int64(clock.ns.Load())))
}
