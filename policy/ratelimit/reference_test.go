package ratelimit

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
)

// refBucket is the slow reference: it keeps tokens and the last interval it
// saw, and adds a fill for every interval boundary crossed, one at a time.
type refBucket struct {
	max, perFill, interval int64
	tokens, lastK          int64
}

func (r *refBucket) at(elapsed int64) int64 {
	k := elapsed / r.interval
	for ; r.lastK < k; r.lastK++ {
		r.tokens = min(r.max, r.tokens+r.perFill)
	}
	return r.tokens
}

// wait steps through future fills until the bucket holds need (<= max).
func (r *refBucket) wait(elapsed, need int64) time.Duration {
	have := r.at(elapsed)
	fills := int64(0)
	for have < need {
		have = min(r.max, have+r.perFill)
		fills++
	}
	if fills == 0 {
		return 0
	}
	next := (elapsed/r.interval + 1) * r.interval
	return time.Duration(next - elapsed + (fills-1)*r.interval)
}

// FuzzAgainstReference drives a limiter with a requests bucket and a tokens
// bucket through clock moves, admissions (with and without estimates) and
// charges, and checks every decision and bucket level against refBucket.
func FuzzAgainstReference(f *testing.F) {
	f.Add([]byte{5, 2, 9, 3, 1, 7}, []byte{1, 0, 0, 1, 0, 0, 2, 40, 1, 0, 200, 200, 3, 9, 0, 1, 0, 0})
	f.Add([]byte{1, 1, 1, 50, 49, 0}, []byte{0, 255, 255, 1, 0, 0, 2, 255, 255, 1, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, params, ops []byte) {
		if len(params) < 6 || len(ops) > 600 {
			t.Skip()
		}
		refs := [2]*refBucket{}
		var cfgs []config.RateLimitBucket
		for i, typ := range []string{"requests", "tokens"} {
			p := params[3*i : 3*i+3]
			m := 1 + int64(p[0]%64)
			r := &refBucket{max: m, perFill: 1 + int64(p[1])%m, interval: 1000 + int64(p[2])*997, tokens: m}
			refs[i] = r
			cfgs = append(cfgs, spec(uint64(r.max), uint64(r.perFill), time.Duration(r.interval), typ))
		}
		l, clock := newLimiter(t, cfgs...)
		var last Decision
		for i := 0; i+2 < len(ops); i += 3 {
			kind, a, b := ops[i]%4, int64(ops[i+1]), int64(ops[i+2])
			elapsed := clock.ns.Load()
			switch kind {
			case 0:
				clock.advance(time.Duration((a<<8 | b) * 131))
			case 1, 3:
				estimate := int64(0)
				if kind == 3 {
					estimate = a % 80
				}
				d := l.Admit(nil, estimate)
				want := refAdmit(refs, elapsed, estimate)
				if d.Allowed != want.Allowed || d.Limit != want.Limit || d.Remaining != want.Remaining ||
					d.Reset != want.Reset || d.RetryAfter != want.RetryAfter || d.Exceeds != want.Exceeds {
					t.Fatalf("op %d at %d ns, estimate %d: got %+v, want %+v", i/3, elapsed, estimate, d, want)
				}
				last = d
			case 2:
				n := a
				l.Charge(&last, n)
				if last.Allowed && n > 0 {
					refs[1].at(elapsed)
					refs[1].tokens = max(refs[1].tokens-n, -refs[1].max) // one bucketful of debt at most
				}
			}
			for j, r := range refs {
				if got, want := held(l, clock, j), r.at(clock.ns.Load()); got != want {
					t.Fatalf("op %d: bucket %d holds %d, want %d", i/3, j, got, want)
				}
			}
		}
	})
}

// refAdmit is Admit on the reference buckets (a requests and a tokens one).
func refAdmit(refs [2]*refBucket, elapsed, estimate int64) Decision {
	needs := [2]int64{1, max(estimate, 1)}
	var d Decision
	refused := false
	for i, r := range refs {
		have := r.at(elapsed)
		if have >= needs[i] {
			continue
		}
		if needs[i] > r.max {
			// Never: this refusal describes the decision.
			return Decision{Exceeds: true, Limit: uint64(r.max), Remaining: uint64(max(have, 0)),
				Reset: time.Duration(r.interval - elapsed%r.interval)}
		}
		wait := r.wait(elapsed, needs[i])
		if !refused || wait > d.RetryAfter {
			d = Decision{Limit: uint64(r.max), Remaining: uint64(max(have, 0)),
				Reset: time.Duration(r.interval - elapsed%r.interval), RetryAfter: wait}
		}
		refused = true
	}
	if refused {
		return d
	}
	refs[0].tokens--
	d = Decision{Allowed: true}
	for _, r := range refs {
		if left := uint64(max(r.tokens, 0)); d.Limit == 0 || left < d.Remaining {
			d.Limit, d.Remaining, d.Reset = uint64(r.max), left, time.Duration(r.interval-elapsed%r.interval)
		}
	}
	return d
}
