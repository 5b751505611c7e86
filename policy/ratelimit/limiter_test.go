package ratelimit

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
)

// headers renders the rate limit headers WriteHeaders sets on a fresh
// response, "" for each one absent.
func headers(d *Decision) [4]string {
	var resp fasthttp.Response
	d.WriteHeaders(&resp.Header)
	h := &resp.Header
	return [4]string{
		string(h.Peek("x-ratelimit-limit")), string(h.Peek("x-ratelimit-remaining")),
		string(h.Peek("x-ratelimit-reset")), string(h.Peek("Retry-After")),
	}
}

// TestDecisionHeaders: allowed and refused decisions and the headers they
// write: limit, remaining, reset and Retry-After in seconds rounded up,
// Retry-After at least 1 and only on refusals.
func TestDecisionHeaders(t *testing.T) {
	tests := []struct {
		desc        string
		bucket      config.RateLimitBucket
		admitBefore int
		advance     time.Duration
		wantAllowed bool
		wantRetry   time.Duration
		want        [4]string
	}{
		{"allowed", spec(3, 1, 10*time.Second, ""), 0, 2500 * time.Millisecond, true, 0,
			[4]string{"3", "2", "8", ""}},
		{"allowed, last token", spec(3, 1, 10*time.Second, ""), 2, 0, true, 0,
			[4]string{"3", "0", "10", ""}},
		{"refused until the next fill", spec(2, 1, 10*time.Second, ""), 2, 3500 * time.Millisecond, false, 6500 * time.Millisecond,
			[4]string{"2", "0", "7", "7"}},
		{"refused, sub-second wait rounds up to 1", spec(1, 1, 100*time.Millisecond, ""), 1, 50 * time.Millisecond, false, 50 * time.Millisecond,
			[4]string{"1", "0", "1", "1"}},
		{"refused at an interval end waits a whole interval", spec(1, 1, time.Minute, ""), 1, time.Minute - time.Nanosecond, false, time.Nanosecond,
			[4]string{"1", "0", "1", "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, clock := newLimiter(t, tc.bucket)
			for range tc.admitBefore {
				l.Admit(nil, 0)
			}
			clock.advance(tc.advance)
			d := l.Admit(nil, 0)
			if d.Allowed != tc.wantAllowed || d.RetryAfter != tc.wantRetry {
				t.Fatalf("allowed %v retry after %v, want %v %v", d.Allowed, d.RetryAfter, tc.wantAllowed, tc.wantRetry)
			}
			if got := headers(&d); got != tc.want {
				t.Fatalf("headers %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReject: the 429 answer replaces whatever the response held.
func TestReject(t *testing.T) {
	l, clock := newLimiter(t, spec(1, 1, 30*time.Second, ""))
	l.Admit(nil, 0)
	clock.advance(10 * time.Second)
	d := l.Admit(nil, 0)
	var resp fasthttp.Response
	resp.SetStatusCode(200)
	resp.Header.Set("X-Upstream", "1")
	resp.SetBodyString("earlier body")
	if status := d.Reject(&resp); status != fasthttp.StatusTooManyRequests {
		t.Fatalf("Reject returned %d", status)
	}
	h := &resp.Header
	got := []string{
		string(h.Peek("x-ratelimit-limit")), string(h.Peek("x-ratelimit-remaining")),
		string(h.Peek("x-ratelimit-reset")), string(h.Peek("Retry-After")),
		string(h.ContentType()), string(resp.Body()), string(h.Peek("X-Upstream")),
	}
	want := []string{"1", "0", "20", "20", "text/plain; charset=utf-8", "rate limit exceeded\n", ""}
	if resp.StatusCode() != 429 || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%d %q, want 429 %q", resp.StatusCode(), got, want)
	}
}

// TestExceedsCapacity: a prompt estimate beyond a tokens bucket's
// maxTokens can never pass: its 429 has no Retry-After (a client would
// retry forever: it used to get "Retry-After: 1" every time) and a body
// that says why, also when another bucket refuses it for a while.
func TestExceedsCapacity(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		buckets []config.RateLimitBucket
		before  int // requests admitted first
	}{
		{"one bucket", []config.RateLimitBucket{spec(40, 40, time.Minute, "tokens")}, 0},
		{"another bucket empty", []config.RateLimitBucket{spec(1, 1, time.Hour, ""), spec(40, 40, time.Minute, "tokens")}, 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			l, _ := newLimiter(t, tc.buckets...)
			for range tc.before {
				l.Admit(nil, 0)
			}
			d := l.Admit(nil, 41)
			if d.Allowed || !d.Exceeds {
				t.Fatalf("allowed %v exceeds %v, want a refusal that can never pass", d.Allowed, d.Exceeds)
			}
			var resp fasthttp.Response
			d.Reject(&resp)
			if got := headers(&d); got != [4]string{"40", "40", "60", ""} || string(resp.Body()) != "request exceeds the rate limit's capacity\n" {
				t.Fatalf("headers %q, body %q", got, resp.Body())
			}
			if d := l.Admit(nil, 40); d.Exceeds {
				t.Fatal("an estimate of maxTokens exceeds it")
			}
		})
	}
}

// TestMultipleBuckets: every bucket applies, a request passes only if all
// can, a refusal takes nothing from any, and the headers describe the most
// constraining bucket.
func TestMultipleBuckets(t *testing.T) {
	l, clock := newLimiter(t,
		spec(3, 1, time.Second, ""),          // per second
		spec(2, 2, time.Minute, ""),          // per minute
		spec(100, 10, time.Second, "tokens"), // LLM tokens: checked, not taken
	)
	type want struct {
		allowed          bool
		limit, remaining uint64
		held             [3]int64
	}
	steps := []struct {
		advance time.Duration
		want    want
	}{
		{0, want{true, 2, 1, [3]int64{2, 1, 100}}}, // per minute is the tightest
		{0, want{true, 2, 0, [3]int64{1, 0, 100}}},
		{0, want{false, 2, 0, [3]int64{1, 0, 100}}}, // per minute empty: per second keeps its token
		{time.Second, want{false, 2, 0, [3]int64{2, 0, 100}}},
		{time.Minute, want{true, 2, 1, [3]int64{2, 1, 100}}}, // both refilled
	}
	for i, s := range steps {
		clock.advance(s.advance)
		d := l.Admit(nil, 0)
		got := want{d.Allowed, d.Limit, d.Remaining, [3]int64{held(l, clock, 0), held(l, clock, 1), held(l, clock, 2)}}
		if got != s.want {
			t.Errorf("step %d: %+v, want %+v", i, got, s.want)
		}
	}
}

// TestRefusalTakesNothing: a request found refused while taking (a
// concurrent request emptied a later bucket after the look) gives back what
// it took from the earlier ones.
func TestRefusalTakesNothing(t *testing.T) {
	tests := []struct {
		desc    string
		buckets []config.RateLimitBucket
		drain   int // bucket emptied behind Admit's look
	}{
		{"requests bucket emptied", []config.RateLimitBucket{spec(5, 1, time.Second, ""), spec(5, 1, time.Second, ""), spec(5, 1, time.Second, "")}, 2},
		{"tokens bucket in debt", []config.RateLimitBucket{spec(5, 1, time.Second, ""), spec(5, 1, time.Second, "tokens")}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, clock := newLimiter(t, tc.buckets...)
			set := l.entries[0].buckets
			set[tc.drain].charge(0, 5)
			d := takeAll(set, 0, 0, allBuckets)
			if d.Allowed || d.RetryAfter != time.Second {
				t.Fatalf("allowed %v retry after %v, want refused for 1s", d.Allowed, d.RetryAfter)
			}
			for i := range set {
				want := int64(5)
				if i == tc.drain {
					want = 0
				}
				if got := held(l, clock, i); got != want {
					t.Errorf("bucket %d holds %d, want %d", i, got, want)
				}
			}
		})
	}
}

// TestTokenBuckets: an LLM tokens bucket admits while it holds anything,
// is charged input+output tokens after the exchange, may go into debt, and
// then refuses until the fills have paid the debt off.
func TestTokenBuckets(t *testing.T) {
	type op struct {
		advance  time.Duration
		estimate int64
		charge   int64 // charged on the step's decision, when > 0
		allowed  bool
		retry    time.Duration
		held     int64 // after the charge
	}
	tests := []struct {
		desc string
		ops  []op
	}{
		{"debt delays later requests", []op{
			{0, 0, 150, true, 0, -50},
			{0, 0, 0, false, 6 * time.Second, -50}, // 51 tokens needed: 6 fills of 10
			{5 * time.Second, 0, 0, false, time.Second, 0},
			{time.Second, 0, 5, true, 0, 5},
		}},
		{"debt stops at one bucketful", []op{
			{0, 0, 250, true, 0, -100},
			{0, 0, 0, false, 11 * time.Second, -100}, // 101 tokens needed: 11 fills of 10
			{0, 0, 0, false, 11 * time.Second, -100},
		}},
		{"estimate within what the bucket holds", []op{
			{0, 100, 60, true, 0, 40},
			{0, 40, 0, true, 0, 40}, // the estimate is checked, not taken
			{0, 41, 0, false, time.Second, 40},
			{500 * time.Millisecond, 41, 0, false, 500 * time.Millisecond, 40},
			{500 * time.Millisecond, 41, 0, true, 0, 50},
		}},
		{"estimate beyond maxTokens is never allowed", []op{
			{0, 101, 0, false, 0, 100}, // no time to retry: Exceeds (TestExceedsCapacity)
			{0, 100, 10, true, 0, 90},
			{0, 101, 0, false, 0, 90},
		}},
		{"a refused decision is not charged", []op{
			{0, 101, 1000, false, 0, 100},
		}},
		{"a huge charge stops at the debt floor", []op{
			{0, 0, math.MaxInt64, true, 0, -100},
			{0, 0, math.MaxInt64, false, 11 * time.Second, -100},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, clock := newLimiter(t, spec(100, 10, time.Second, "tokens"))
			for i, o := range tc.ops {
				clock.advance(o.advance)
				d := l.Admit(nil, o.estimate)
				l.Charge(&d, o.charge)
				got := [3]any{d.Allowed, d.RetryAfter, held(l, clock, 0)}
				if want := [3]any{o.allowed, o.retry, o.held}; got != want {
					t.Errorf("op %d: allowed, retry after, held = %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestChargeOnlyTokenBuckets: Charge bills the tokens buckets of the
// decision, leaves requests buckets alone, and ignores n <= 0.
func TestChargeOnlyTokenBuckets(t *testing.T) {
	l, clock := newLimiter(t, spec(10, 1, time.Second, ""), spec(100, 1, time.Second, "tokens"))
	if !l.HasTokenBuckets() {
		t.Fatal("HasTokenBuckets = false")
	}
	d := l.Admit(nil, 0)
	l.Charge(&d, 30)
	l.Charge(&d, 0)
	l.Charge(&d, -5)
	l.Charge(nil, 5)
	if got := [2]int64{held(l, clock, 0), held(l, clock, 1)}; got != [2]int64{9, 70} {
		t.Fatalf("held %v, want [9 70]", got)
	}
	requestsOnly, _ := newLimiter(t, spec(10, 1, time.Second, ""))
	if requestsOnly.HasTokenBuckets() {
		t.Fatal("HasTokenBuckets = true without a tokens bucket")
	}
}

// TestAdmitInTwoParts: AdmitRequest takes the requests buckets' tokens
// and leaves the tokens buckets to AdmitTokens, which refuses what Admit
// would and then gives back the request tokens, so a refused request takes
// nothing; allowed, the decision reports the tighter bucket of both parts
// and Charge bills its tokens buckets.
func TestAdmitInTwoParts(t *testing.T) {
	tests := []struct {
		desc        string
		debt        int64 // charged to the tokens bucket first
		estimate    int64
		wantAllowed bool
		wantExceeds bool
		wantLeft    uint64 // the decision's Remaining
		wantHeld    [2]int64
	}{
		{"both pass", 0, 0, true, false, 4, [2]int64{4, 10}},
		{"the tokens bucket is the tighter", 8, 0, true, false, 3, [2]int64{4, 3}},
		{"an estimate within the tokens bucket", 0, 5, true, false, 4, [2]int64{4, 10}},
		{"a tokens bucket in debt refuses and gives the request token back", 15, 0, false, false, 0, [2]int64{5, -4}},
		{"an estimate beyond the tokens bucket's capacity", 0, 11, false, true, 10, [2]int64{5, 10}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, clock := newLimiter(t, spec(5, 1, time.Hour, ""), spec(10, 1, time.Hour, "tokens"))
			if tc.debt > 0 {
				d := l.Admit(nil, 0)
				l.Charge(&d, tc.debt)
				clock.advance(time.Hour) // the request token back; the debt less one
			}
			d := l.AdmitRequest(nil)
			if !d.Allowed || held(l, clock, 0) != 4 || held(l, clock, 1) != 10-max(tc.debt-1, 0) {
				t.Fatalf("AdmitRequest: allowed %v, the buckets hold %d and %d", d.Allowed, held(l, clock, 0), held(l, clock, 1))
			}
			l.AdmitTokens(&d, tc.estimate)
			if d.Allowed != tc.wantAllowed || d.Exceeds != tc.wantExceeds || (tc.wantAllowed || tc.wantExceeds) && d.Remaining != tc.wantLeft {
				t.Fatalf("AdmitTokens: allowed %v exceeds %v remaining %d, want %v %v %d", d.Allowed, d.Exceeds, d.Remaining, tc.wantAllowed, tc.wantExceeds, tc.wantLeft)
			}
			if got := [2]int64{held(l, clock, 0), held(l, clock, 1)}; got != tc.wantHeld {
				t.Fatalf("held %v, want %v", got, tc.wantHeld)
			}
			l.AdmitTokens(&d, 0) // a second call changes nothing refused
			if got := held(l, clock, 0); got != tc.wantHeld[0] {
				t.Fatalf("a second AdmitTokens gave back again: %d", got)
			}
			l.Charge(&d, 3)
			want := tc.wantHeld[1]
			if tc.wantAllowed {
				want -= 3
			}
			if got := held(l, clock, 1); got != want {
				t.Fatalf("after Charge the tokens bucket holds %d, want %d", got, want)
			}
		})
	}
	// A refusal by the requests buckets does not look at the tokens ones.
	l, clock := newLimiter(t, spec(1, 1, time.Hour, ""), spec(10, 1, time.Hour, "tokens"))
	l.AdmitRequest(nil)
	if d := l.AdmitRequest(nil); d.Allowed || d.Limit != 1 || held(l, clock, 0) != 0 {
		t.Fatalf("the requests bucket empty: allowed %v, limit %d", d.Allowed, d.Limit)
	}
}

// TestConditional: the first entry whose condition holds applies, else the
// fallback; each entry has its own bucket; conditions read claims, request
// and source; one that cannot be evaluated is false.
func TestConditional(t *testing.T) {
	free := map[string]any{"sub": "u1", "tier": "free"}
	paid := map[string]any{"sub": "u2", "tier": "paid"}
	cfg := &config.LocalRateLimit{Conditional: []config.ConditionalRateLimit{
		cond(`jwt.tier == "free"`, spec(1, 1, time.Hour, "")),
		cond(`request.headers["x-team"] == "a" && source.address == "10.1.2.3"`, spec(2, 1, time.Hour, "")),
		cond(`llmRequest.model == "big"`, spec(3, 1, time.Hour, "")), // no LLM request at admission: false
		cond(`request.path.startsWith("/fast")`, spec(4, 1, time.Hour, "")),
		cond("", spec(5, 1, time.Hour, "")),
	}}
	l, err := New(cfg, new(fakeClock).now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc      string
		c         *policy.Ctx
		wantLimit uint64
	}{
		{"claim", requestCtx("/x", free), 1},
		{"header and source", requestCtx("/x", paid, "X-Team", "a"), 2},
		{"jwt absent: false, not an error", requestCtx("/x", nil, "X-Team", "a"), 2},
		{"llmRequest absent", requestCtx("/x", paid), 5},
		{"path", requestCtx("/fast/1", paid), 4},
		{"fallback", requestCtx("/x", paid), 5},
		{"no request: fallback", nil, 5},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if d := l.Admit(tc.c, 0); d.Limit != tc.wantLimit {
				t.Fatalf("limit %d applied, want %d", d.Limit, tc.wantLimit)
			}
		})
	}
	// Entries keep separate buckets: the free tier's single token is gone,
	// the fallback still has tokens left.
	if d := l.Admit(requestCtx("/x", free), 0); d.Allowed {
		t.Error("free tier allowed a second request")
	}
	if d := l.Admit(requestCtx("/x", paid), 0); !d.Allowed || d.Remaining != 1 {
		t.Errorf("fallback: allowed %v remaining %d, want true 1", d.Allowed, d.Remaining)
	}
}

// TestConditionalWithoutMatch: with no fallback, a request no condition
// holds for is allowed with no headers.
func TestConditionalWithoutMatch(t *testing.T) {
	cfg := &config.LocalRateLimit{Conditional: []config.ConditionalRateLimit{
		cond(`request.method == "POST"`, spec(1, 1, time.Hour, "")),
	}}
	l, err := New(cfg, new(fakeClock).now)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d := l.Admit(requestCtx("/x", nil), 0)
		if !d.Allowed || d.Limit != 0 {
			t.Fatalf("allowed %v limit %d, want allowed with no bucket", d.Allowed, d.Limit)
		}
		if got := headers(&d); got != [4]string{} {
			t.Fatalf("headers %q written with no bucket", got)
		}
	}
}

// TestNewErrors: refusals name the field relative to localRateLimit.
func TestNewErrors(t *testing.T) {
	bad := config.CELCondition(`request.path +`)
	notBool := config.CELCondition(`size(request.path)`)
	tests := []struct {
		desc     string
		cfg      *config.LocalRateLimit
		wantPath string
		wantMsg  string
	}{
		{"nil", nil, "", "no configuration"},
		{"maxTokens below a fill", &config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(1, 1, time.Second, ""), spec(1, 2, time.Second, "")}},
			"[1].maxTokens", "must be >= tokensPerFill (2)"},
		{"no interval", &config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(1, 1, 0, "")}}, "[0].fillInterval", "must be > 0"},
		{"no fill", &config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(1, 0, time.Second, "")}}, "[0].tokensPerFill", "must be >= 1"},
		{"maxTokens beyond 2^60", &config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(1<<60+1, 1, time.Second, "")}}, "[0].maxTokens", "at most 2^60"},
		{"fills faster than a bucket can count", &config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(1<<40, 1<<40, time.Second, "")}},
			"[0].tokensPerFill", "must be at most 1461355115 with a fillInterval of 1s"},
		{"unknown type", &config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(1, 1, time.Second, "bytes")}}, "[0].type", `not "bytes"`},
		{"bad condition", &config.LocalRateLimit{Conditional: []config.ConditionalRateLimit{
			cond(`true`, spec(1, 1, time.Second, "")), {Condition: &bad, RateLimitBucket: spec(1, 1, time.Second, "")}}},
			"conditional[1].condition", "invalid CEL expression"},
		{"condition not bool", &config.LocalRateLimit{Conditional: []config.ConditionalRateLimit{{Condition: &notBool, RateLimitBucket: spec(1, 1, time.Second, "")}}},
			"conditional[0].condition", "not bool"},
		{"fallback not last", &config.LocalRateLimit{Conditional: []config.ConditionalRateLimit{
			cond("", spec(1, 1, time.Second, "")), cond(`true`, spec(1, 1, time.Second, ""))}},
			"conditional[0]", "must be last"},
		{"bucket of an entry", &config.LocalRateLimit{Conditional: []config.ConditionalRateLimit{
			cond(`true`, spec(1, 1, time.Second, "")), cond("", spec(0, 1, time.Second, ""))}},
			"conditional[1].maxTokens", "must be >= tokensPerFill"},
		{"both forms", &config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(1, 1, time.Second, "")},
			Conditional: []config.ConditionalRateLimit{cond("", spec(1, 1, time.Second, ""))}}, "", "exclusive"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(tc.cfg, nil)
			var fe *decode.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T), want *decode.FieldError", err, err)
			}
			if fe.Path != tc.wantPath || !strings.Contains(fe.Msg, tc.wantMsg) {
				t.Fatalf("error %q at %q, want %q at %q", fe.Msg, fe.Path, tc.wantMsg, tc.wantPath)
			}
		})
	}
}

// TestRateBound: the fastest fill New accepts keeps a bucket filling for
// a century; one token more per fill is refused.
func TestRateBound(t *testing.T) {
	for _, interval := range []time.Duration{time.Nanosecond, time.Millisecond, time.Second, 7 * time.Hour} {
		fills := int64(fillHorizon / interval)
		if fillHorizon%interval != 0 {
			fills++
		}
		maxPerFill := uint64(maxScheduled / fills)
		_, err := New(&config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(maxBucketTokens, maxPerFill+1, interval, "")}}, nil)
		if fe, ok := err.(*decode.FieldError); !ok || fe.Path != "[0].tokensPerFill" {
			t.Errorf("%v: tokensPerFill %d: error %v, want one about tokensPerFill", interval, maxPerFill+1, err)
		}
		l, err := New(&config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(maxBucketTokens, maxPerFill, interval, "")}}, nil)
		if err != nil {
			t.Fatalf("%v: %v", interval, err)
		}
		if b := &l.entries[0].buckets[0]; b.lastFill < fills {
			t.Errorf("%v: the bucket stops filling after %d intervals, want %d", interval, b.lastFill, fills)
		}
	}
}

// TestChainPolicy: in a route's chain the limiter answers 429 itself and
// stops the chain; an allowed request goes on with its response untouched.
func TestChainPolicy(t *testing.T) {
	l, _ := newLimiter(t, spec(1, 1, time.Minute, ""))
	b := policy.NewChainBuilder()
	b.Add(policy.KindCORS, l) // any kind in Order: localRateLimit is not one yet
	ch := b.Build()
	c := requestCtx("/x", nil)
	if ch.RunRequest(c) != policy.Continue {
		t.Fatal("first request refused")
	}
	if resp := &c.Fast.Response; resp.StatusCode() != 200 || len(resp.Header.Peek("x-ratelimit-limit")) != 0 || len(resp.Body()) != 0 {
		t.Fatalf("allowed request's response touched: %d %q", resp.StatusCode(), resp.Body())
	}
	c = requestCtx("/x", nil)
	if ch.RunRequest(c) != policy.Done {
		t.Fatal("second request allowed")
	}
	resp := &c.Fast.Response
	if resp.StatusCode() != 429 || string(resp.Header.Peek("Retry-After")) != "60" || string(resp.Body()) != "rate limit exceeded\n" {
		t.Fatalf("refusal %d retry-after %q %q", resp.StatusCode(), resp.Header.Peek("Retry-After"), resp.Body())
	}
}

// TestAdmitCtx: the decision comes back for the server to write headers
// with; a refusal is already answered.
func TestAdmitCtx(t *testing.T) {
	l, _ := newLimiter(t, spec(2, 1, time.Minute, ""))
	c := requestCtx("/x", nil)
	d := l.AdmitCtx(c)
	if !d.Allowed || d.Remaining != 1 || c.Fast.Response.StatusCode() != 200 {
		t.Fatalf("allowed %v remaining %d status %d", d.Allowed, d.Remaining, c.Fast.Response.StatusCode())
	}
	d.WriteHeaders(&c.Fast.Response.Header)
	if got := string(c.Fast.Response.Header.Peek("x-ratelimit-remaining")); got != "1" {
		t.Fatalf("x-ratelimit-remaining %q", got)
	}
	l.AdmitCtx(requestCtx("/x", nil))
	c = requestCtx("/x", nil)
	if d := l.AdmitCtx(c); d.Allowed || c.Fast.Response.StatusCode() != 429 {
		t.Fatalf("third request: allowed %v status %d", d.Allowed, c.Fast.Response.StatusCode())
	}
}

// TestRealClock: without a clock New uses the real one, and a bucket
// refused on it is told to wait at most an interval.
func TestRealClock(t *testing.T) {
	l, err := New(&config.LocalRateLimit{Buckets: []config.RateLimitBucket{spec(2, 1, time.Hour, "")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []bool{l.Admit(nil, 0).Allowed, l.Admit(nil, 0).Allowed}
	d := l.Admit(nil, 0)
	if !got[0] || !got[1] || d.Allowed {
		t.Fatalf("admitted %v then %v, want two then a refusal", got, d.Allowed)
	}
	if d.RetryAfter <= 0 || d.RetryAfter > time.Hour || d.Reset != d.RetryAfter {
		t.Fatalf("retry after %v, reset %v: want the same, within an hour", d.RetryAfter, d.Reset)
	}
}
