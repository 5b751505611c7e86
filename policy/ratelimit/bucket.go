package ratelimit

import (
	"math"
	"sync/atomic"
	"time"
)

// Range guards. A bucket's state is one int64 measured in tokens against the
// schedule of fills (see bucket), so it grows by tokensPerFill every interval
// for as long as the limiter lives; these bounds keep every sum of the bucket
// arithmetic below 2^63.
const (
	// maxBucketTokens bounds maxTokens (and so tokensPerFill), and so the
	// debt (below).
	maxBucketTokens = 1 << 60
	// maxScheduled bounds tokensPerFill x fills: a bucket stops filling
	// after maxScheduled/tokensPerFill intervals, which New requires to be
	// at least fillHorizon away.
	maxScheduled = 1 << 62
	// fillHorizon is how long a limiter must be able to keep filling its
	// buckets: a century (100 Julian years).
	fillHorizon = 36525 * 24 * time.Hour
)

// bucket is one token bucket: it starts full, holds at most max tokens and
// gains perFill tokens at the end of every interval (whole intervals, counted
// from when the limiter started, so many refills never drift).
//
// Its whole state is one number, drawn: the tokens taken so far, measured
// against the schedule of fills. After k whole intervals the bucket holds
//
//	min(max, perFill*k - drawn)
//
// so a refill needs no write (time passing raises perFill*k), and a take of
// n at interval k is
//
//	drawn = max(drawn, perFill*k - max) + n
//
// where the max() forgets the fills that overflowed a full bucket (an idle
// bucket must not bank more than max). With tokens and fill time in one word,
// a take is a single compare-and-swap that cannot see one without the other,
// and no goroutine ever refills anything.
type bucket struct {
	max      int64 // tokens a full bucket holds, >= perFill
	perFill  int64 // tokens each interval adds, >= 1
	interval int64 // nanoseconds, >= 1
	// lastFill is the interval after which the bucket no longer fills
	// (perFill*lastFill <= maxScheduled); New puts it beyond fillHorizon.
	lastFill int64
	// countsLLMTokens marks a `tokens` bucket: requests are admitted while
	// it holds any tokens, and Charge bills it what LLM exchanges used.
	countsLLMTokens bool

	drawn atomic.Int64
}

// init sets the parameters and fills the bucket.
func (b *bucket) init(maxTokens, perFill int64, interval time.Duration, countsLLMTokens bool) {
	b.max = maxTokens
	b.perFill = perFill
	b.interval = int64(interval)
	b.lastFill = maxScheduled / perFill
	b.countsLLMTokens = countsLLMTokens
	b.drawn.Store(-maxTokens) // full at interval 0
}

// fills is how many whole intervals have ended after elapsed nanoseconds
// (elapsed >= 0).
func (b *bucket) fills(elapsed int64) int64 {
	return min(elapsed/b.interval, b.lastFill)
}

// tokensAt is what the bucket holds after k fills when its state is drawn;
// negative when LLM tokens put it in debt.
func (b *bucket) tokensAt(k, drawn int64) int64 {
	return min(b.max, b.perFill*k-drawn)
}

// tokens is what the bucket holds after k fills.
func (b *bucket) tokens(k int64) int64 {
	return b.tokensAt(k, b.drawn.Load())
}

// take takes n (1 <= n <= max) tokens after k fills if the bucket holds that
// many. It returns what the bucket holds after the take or, when it refuses,
// what it holds.
func (b *bucket) take(k, n int64) (left int64, ok bool) {
	scheduled := b.perFill * k
	for {
		drawn := b.drawn.Load()
		have := b.tokensAt(k, drawn)
		if have < n {
			return have, false
		}
		if b.drawn.CompareAndSwap(drawn, max(drawn, scheduled-b.max)+n) {
			return have - n, true
		}
	}
}

// giveBack returns n tokens taken by take. Reads clamp at max, so tokens
// given back after the bucket filled up in between are simply lost, as a
// fill of a full bucket is.
func (b *bucket) giveBack(n int64) {
	b.drawn.Add(-n)
}

// charge takes n >= 1 tokens after k fills whatever the bucket holds, going
// into debt when it holds fewer: down to -max at most, one bucketful owed.
// The debt makes a client that used more than the bucket held wait for the
// fills to pay it, but a bounded wait: from the floor, the bucket admits
// again after (max+1)/perFill fills, about the time it takes to fill from
// empty. Unbounded, one exchange's true-up (a stream whose usage came in
// millions of tokens, or an estimate) could shut every client of the
// bucket out for days. (agentgateway's amend_tokens stops at empty.)
func (b *bucket) charge(k, n int64) {
	n = min(n, 2*b.max) // more cannot go deeper than the floor
	scheduled := b.perFill * k
	for {
		drawn := b.drawn.Load()
		next := min(max(drawn, scheduled-b.max)+n, scheduled+b.max)
		if next == drawn || b.drawn.CompareAndSwap(drawn, next) {
			return
		}
	}
}

// untilNextFill is the time from elapsed to the end of the current interval.
func (b *bucket) untilNextFill(elapsed int64) time.Duration {
	return time.Duration(b.interval - elapsed%b.interval)
}

// wait is how long from elapsed until the bucket, holding have after k fills
// and left alone, holds need (<= max) tokens.
func (b *bucket) wait(elapsed, have, need int64) time.Duration {
	if have >= need {
		return 0
	}
	fillsNeeded := (need - have + b.perFill - 1) / b.perFill
	if k := b.fills(elapsed); fillsNeeded > b.lastFill-k {
		return math.MaxInt64 // beyond the horizon: never
	}
	if fillsNeeded > math.MaxInt64/b.interval {
		return math.MaxInt64
	}
	return time.Duration((fillsNeeded-1)*b.interval) + b.untilNextFill(elapsed)
}
