// Package ratelimit owns `localRateLimit`: token buckets kept by each gateway
// process, counting requests or LLM tokens, as agentgateway's local rate
// limit does. A Limiter is compiled once from the config and holds its
// buckets' state, lock-free, so the server can keep it across reloads that
// leave its config unchanged.
//
// A bucket starts full, holds at most maxTokens and gains tokensPerFill at
// the end of every whole fillInterval. A request takes one token from every
// `requests` bucket that applies, and is refused (429) when any cannot give
// one. A `tokens` bucket is billed the input and output tokens of an LLM
// exchange once they are known (Charge), which may put it in debt (of one
// bucketful at most), and refuses requests while it holds nothing; with a
// prompt estimate (`tokenize: true`) it also refuses a prompt larger than
// what it holds, and one larger than it can ever hold with no Retry-After.
package ratelimit

import (
	"strconv"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
)

// Limiter is one compiled localRateLimit: immutable config plus bucket
// state. It is safe for concurrent use.
type Limiter struct {
	// entries are tried in order; the first whose condition holds (or that
	// has none) applies. The list form is one entry without a condition
	// holding every bucket.
	entries         []entry
	hasTokenBuckets bool

	now   func() time.Time // nil: the real clock
	start time.Time        // interval 0 of every bucket begins here
}

// entry is a set of buckets that apply together.
type entry struct {
	condition cel.Program // nil: always applies
	buckets   []bucket
}

// New compiles cfg. now is the clock (time.Now when nil). Errors are
// *decode.FieldError with Path relative to localRateLimit
// ("conditional[1].condition", "[0].maxTokens").
func New(cfg *config.LocalRateLimit, now func() time.Time) (*Limiter, error) {
	if cfg == nil {
		return nil, &decode.FieldError{Msg: "no configuration"}
	}
	l := &Limiter{now: now}
	if now == nil {
		l.start = time.Now()
	} else {
		l.start = now()
	}
	switch {
	case cfg.Conditional != nil && cfg.Buckets != nil:
		return nil, &decode.FieldError{Msg: "a list of rate limits and conditional are exclusive"}
	case cfg.Conditional != nil:
		if err := l.compileConditional(cfg.Conditional); err != nil {
			return nil, err
		}
	default:
		e := entry{buckets: make([]bucket, len(cfg.Buckets))}
		for i := range cfg.Buckets {
			if err := initBucket(&e.buckets[i], &cfg.Buckets[i], "["+strconv.Itoa(i)+"]"); err != nil {
				return nil, err
			}
		}
		l.entries = []entry{e}
	}
	for i := range l.entries {
		for j := range l.entries[i].buckets {
			l.hasTokenBuckets = l.hasTokenBuckets || l.entries[i].buckets[j].countsLLMTokens
		}
	}
	return l, nil
}

// compileConditional compiles the conditional form: one bucket per entry.
func (l *Limiter) compileConditional(entries []config.ConditionalRateLimit) error {
	l.entries = make([]entry, len(entries))
	for i := range entries {
		path := "conditional[" + strconv.Itoa(i) + "]"
		c := &entries[i]
		e := &l.entries[i]
		if c.Condition == nil {
			if i != len(entries)-1 {
				// It would hide the entries after it.
				return &decode.FieldError{Path: path, Msg: "an entry without a condition is the fallback and must be last"}
			}
		} else {
			p, err := config.CompileLLMCondition(string(*c.Condition))
			if err != nil {
				return &decode.FieldError{Path: path + ".condition", Msg: err.Error()}
			}
			e.condition = p
		}
		e.buckets = make([]bucket, 1)
		if err := initBucket(&e.buckets[0], &c.RateLimitBucket, path); err != nil {
			return err
		}
	}
	return nil
}

// initBucket checks one bucket's parameters, as the config does and against
// the range the bucket arithmetic can hold, and fills b.
func initBucket(b *bucket, cfg *config.RateLimitBucket, path string) error {
	fail := func(field, msg string) error {
		return &decode.FieldError{Path: path + "." + field, Msg: msg}
	}
	interval := cfg.FillInterval.Duration
	switch {
	case interval <= 0:
		return fail("fillInterval", "must be > 0")
	case cfg.TokensPerFill < 1:
		return fail("tokensPerFill", "must be >= 1")
	case cfg.MaxTokens < cfg.TokensPerFill:
		return fail("maxTokens", "must be >= tokensPerFill ("+strconv.FormatUint(cfg.TokensPerFill, 10)+")")
	case cfg.MaxTokens > maxBucketTokens:
		return fail("maxTokens", "must be at most 2^60 ("+strconv.FormatUint(maxBucketTokens, 10)+")")
	}
	// The bucket must keep filling for fillHorizon: perFill*fills stays
	// within maxScheduled.
	fillsInHorizon := int64(fillHorizon / interval)
	if fillHorizon%interval != 0 {
		fillsInHorizon++
	}
	if maxPerFill := uint64(maxScheduled / fillsInHorizon); cfg.TokensPerFill > maxPerFill {
		return fail("tokensPerFill", "must be at most "+strconv.FormatUint(maxPerFill, 10)+
			" with a fillInterval of "+interval.String()+
			": buckets count at most 2^62 tokens over a century (about 1.4 billion a second)")
	}
	switch cfg.Type {
	case "", "requests", "tokens":
	default:
		return fail("type", "must be requests or tokens, not "+strconv.Quote(cfg.Type))
	}
	b.init(int64(cfg.MaxTokens), int64(cfg.TokensPerFill), interval, cfg.Type == "tokens")
	return nil
}

// HasTokenBuckets reports whether any bucket counts LLM tokens, that is
// whether the server must Charge what LLM exchanges use.
func (l *Limiter) HasTokenBuckets() bool { return l.hasTokenBuckets }

// elapsed is the time since the limiter started, in nanoseconds; a clock
// that went back counts as no time. On the real clock it is time.Since,
// which reads only the monotonic clock: time.Now reads the wall clock too,
// and a clock read is most of an admission's cost.
func (l *Limiter) elapsed() int64 {
	var d time.Duration
	if l.now == nil {
		d = time.Since(l.start)
	} else {
		d = l.now().Sub(l.start)
	}
	return max(int64(d), 0)
}

// Admit takes one request token from each `requests` bucket that applies,
// and checks that every `tokens` bucket that applies holds more than 0 and,
// when estimate > 0 (the prompt's estimated size, with `tokenize: true`), at
// least estimate. The estimate is not taken: Charge bills the exchange's
// input and output tokens once known. It is AdmitRequest and AdmitTokens at
// once.
//
// It refuses without taking anything when any bucket cannot pass (no
// partial takes: tokens taken before a bucket found empty by a concurrent
// request are given back). c is the request, read by conditions only; nil
// (or a context without a request) makes every condition false.
func (l *Limiter) Admit(c *policy.Ctx, estimate int64) Decision {
	return l.admit(c, estimate, allBuckets)
}

// AdmitRequest is the part of admission made where localRateLimit runs in
// policy.Order, before the request is known to be an LLM exchange: it
// takes one request token from each `requests` bucket that applies, as
// Admit does, and leaves the `tokens` buckets to AdmitTokens, which an LLM
// exchange calls once its prompt is known (as agentgateway checks them
// then). Only LLM exchanges are charged tokens, so a request that is none
// has nothing to check them for. An allowed Decision remembers the buckets
// that applied, for AdmitTokens and Charge.
func (l *Limiter) AdmitRequest(c *policy.Ctx) Decision {
	return l.admit(c, 0, requestBuckets)
}

// AdmitTokens completes d, an allowed AdmitRequest decision, for an LLM
// exchange: every `tokens` bucket that applied must hold more than 0 and,
// when estimate > 0, at least estimate, as in Admit. Refused, d becomes the
// refusal and the request tokens AdmitRequest took are given back, so that a
// refused request takes nothing, as with Admit; allowed, d reports the most
// constraining bucket of both parts. A refused d is left as it is.
func (l *Limiter) AdmitTokens(d *Decision, estimate int64) {
	if !d.Allowed || !l.hasTokenBuckets || len(d.applied) == 0 {
		return
	}
	set := d.applied
	elapsed := l.elapsed()
	if r, refused := check(set, elapsed, estimate, tokenBuckets); refused {
		giveBack(set)
		*d = r
		return
	}
	for i := range set {
		if b := &set[i]; b.countsLLMTokens {
			d.report(b, elapsed, b.tokens(b.fills(elapsed)))
		}
	}
}

// admit admits c against the buckets of kinds that apply to it.
func (l *Limiter) admit(c *policy.Ctx, estimate int64, kinds bucketKinds) Decision {
	set := l.applying(c)
	if len(set) == 0 {
		return Decision{Allowed: true}
	}
	elapsed := l.elapsed()
	if len(set) > 1 {
		// Look before taking, so a refusal takes nothing even for a
		// moment; take below checks again.
		if d, refused := check(set, elapsed, estimate, kinds); refused {
			return d
		}
	}
	return takeAll(set, elapsed, estimate, kinds)
}

// bucketKinds selects buckets by type: the part of admission that looks at
// them.
type bucketKinds uint8

const (
	requestBuckets bucketKinds = 1 << iota
	tokenBuckets
	allBuckets = requestBuckets | tokenBuckets
)

// has reports whether b is of the kinds selected.
func (k bucketKinds) has(b *bucket) bool {
	if b.countsLLMTokens {
		return k&tokenBuckets != 0
	}
	return k&requestBuckets != 0
}

// need is what b must hold to let a request through.
func (b *bucket) need(estimate int64) int64 {
	if b.countsLLMTokens {
		return max(estimate, 1)
	}
	return 1
}

// check looks at every bucket of set of kinds without taking and, if one
// cannot pass, returns the refusal.
func check(set []bucket, elapsed, estimate int64, kinds bucketKinds) (d Decision, refused bool) {
	for i := range set {
		b := &set[i]
		if !kinds.has(b) {
			continue
		}
		need := b.need(estimate)
		if have := b.tokens(b.fills(elapsed)); have < need {
			d.refuse(b, elapsed, have, need)
			refused = true
		}
	}
	return d, refused
}

// takeAll takes a request token from each requests bucket of set, checks
// each tokens bucket, and gives back what it took if one cannot pass; of
// kinds only. The Decision's applied set is all of set.
func takeAll(set []bucket, elapsed, estimate int64, kinds bucketKinds) Decision {
	d := Decision{Allowed: true, applied: set}
	for i := range set {
		b := &set[i]
		if !kinds.has(b) {
			continue
		}
		k := b.fills(elapsed)
		need := b.need(estimate)
		var left int64
		ok := true
		if b.countsLLMTokens {
			if left = b.tokens(k); left < need {
				ok = false
			}
		} else {
			left, ok = b.take(k, need)
		}
		if !ok {
			giveBack(set[:i])
			d = Decision{}
			d.refuse(b, elapsed, left, need)
			return d
		}
		d.report(b, elapsed, left)
	}
	return d
}

// giveBack returns the request token taken from each requests bucket of
// set.
func giveBack(set []bucket) {
	for i := range set {
		if !set[i].countsLLMTokens {
			set[i].giveBack(1)
		}
	}
}

// Charge bills n LLM tokens (an exchange's input plus output) to the tokens
// buckets that applied to d, which may put them in debt (down to -maxTokens:
// bucket.charge): later requests wait until the fills have paid it off. It does nothing for a refused d or when
// n <= 0.
func (l *Limiter) Charge(d *Decision, n int64) {
	if d == nil || !d.Allowed || n <= 0 || !l.hasTokenBuckets {
		return
	}
	elapsed := l.elapsed()
	for i := range d.applied {
		if b := &d.applied[i]; b.countsLLMTokens {
			b.charge(b.fills(elapsed), n)
		}
	}
}
