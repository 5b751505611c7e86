package ratelimit

import (
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/policy"
)

// Decision is the outcome of Admit. A zero Limit means no bucket applied (a
// conditional limit none of whose entries held): the request is allowed and
// WriteHeaders writes nothing.
type Decision struct {
	Allowed bool
	// Limit, Remaining, Reset describe the most constraining bucket for the
	// x-ratelimit-* headers: when allowed, the one with the fewest tokens
	// left; when refused, the one that is the longest to wait for.
	Limit, Remaining uint64
	// Reset is the time until that bucket next gains tokens.
	Reset time.Duration
	// RetryAfter is, when refused, the time until the request could pass
	// if nothing else took tokens meanwhile.
	RetryAfter time.Duration
	// Exceeds marks a refusal of a request that can never pass: its
	// prompt estimate is beyond a bucket's maxTokens. No Retry-After is
	// sent (a client would retry forever), and the answer says why.
	Exceeds bool

	// applied are the buckets that applied (a slice of the Limiter's), for
	// Charge.
	applied []bucket
}

// report makes b the decision's most constraining bucket if it has the
// fewest tokens left so far.
func (d *Decision) report(b *bucket, elapsed, left int64) {
	remaining := uint64(max(left, 0))
	if d.Limit != 0 && remaining >= d.Remaining {
		return
	}
	d.Limit = uint64(b.max)
	d.Remaining = remaining
	d.Reset = b.untilNextFill(elapsed)
}

// refuse records that b, holding have, cannot give need; the bucket that is
// the longest to wait for describes the refusal, and the first that could
// never give it (need beyond its max) above all.
func (d *Decision) refuse(b *bucket, elapsed, have, need int64) {
	if d.Exceeds {
		return
	}
	if need > b.max {
		*d = Decision{Exceeds: true, Limit: uint64(b.max), Remaining: uint64(max(have, 0)), Reset: b.untilNextFill(elapsed)}
		return
	}
	wait := b.wait(elapsed, have, need)
	if d.Limit != 0 && wait <= d.RetryAfter {
		return
	}
	d.Allowed = false
	d.Limit = uint64(b.max)
	d.Remaining = uint64(max(have, 0))
	d.Reset = b.untilNextFill(elapsed)
	d.RetryAfter = wait
}

// Header names in fasthttp's canonical form, as it would write
// "x-ratelimit-limit" anyway, so that setting them skips normalizing.
var (
	hdrLimit      = []byte("X-Ratelimit-Limit")
	hdrRemaining  = []byte("X-Ratelimit-Remaining")
	hdrReset      = []byte("X-Ratelimit-Reset")
	hdrRetryAfter = []byte("Retry-After")
	rejectBody    = []byte("rate limit exceeded\n")
	exceedsBody   = []byte("request exceeds the rate limit's capacity\n")
)

// WriteHeaders sets x-ratelimit-limit, x-ratelimit-remaining,
// x-ratelimit-reset (seconds, rounded up) and, when refused, Retry-After
// (seconds, rounded up, at least 1; none for a request that can never pass,
// Exceeds), replacing every value already there (an upstream's, which may
// come twice). It writes nothing when no bucket applied.
func (d *Decision) WriteHeaders(h *fasthttp.ResponseHeader) {
	if d.Limit == 0 {
		return
	}
	var buf [20]byte
	policy.SetResponseHeaderCanonical(h, hdrLimit, strconv.AppendUint(buf[:0], d.Limit, 10))
	policy.SetResponseHeaderCanonical(h, hdrRemaining, strconv.AppendUint(buf[:0], d.Remaining, 10))
	policy.SetResponseHeaderCanonical(h, hdrReset, strconv.AppendUint(buf[:0], ceilSeconds(d.Reset), 10))
	if !d.Allowed && !d.Exceeds {
		policy.SetResponseHeaderCanonical(h, hdrRetryAfter, strconv.AppendUint(buf[:0], max(ceilSeconds(d.RetryAfter), 1), 10))
	}
}

// ceilSeconds is d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	s := uint64(d / time.Second)
	if d%time.Second != 0 && s < math.MaxUint64 {
		s++
	}
	return s
}

// Reject writes the 429 answer into resp (replacing whatever it held):
// the headers and a short text body, which says so when the request can
// never pass (Exceeds). It returns the status.
func (d *Decision) Reject(resp *fasthttp.Response) int {
	resp.Reset()
	resp.SetStatusCode(fasthttp.StatusTooManyRequests)
	resp.Header.SetContentType("text/plain; charset=utf-8")
	d.WriteHeaders(&resp.Header)
	if d.Exceeds {
		resp.SetBody(exceedsBody)
	} else {
		resp.SetBody(rejectBody)
	}
	return fasthttp.StatusTooManyRequests
}
