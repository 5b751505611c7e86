package balance

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// scoreStep is the EWMA's weight of one attempt: each attempt moves the
	// score a quarter of the way to 1 (answer) or 0 (failure). One failure
	// from full health leaves 0.75; a provider down to 0.1 that answers again
	// is back above 0.9 after eight answers.
	scoreStep = 0.25
	// fullScore is where an improving score is rounded up to 1, so that a
	// healthy provider's successes stop writing its score (a write is a cache
	// line every reporting core then has to fetch again).
	fullScore = 0.999
	// minWeight keeps a live provider in the pick however low its score.
	minWeight = 0.05
)

// fullScoreBits is a score of 1, where every provider starts.
var fullScoreBits = math.Float64bits(1)

// Member is one provider's health handle, stable for the life of its Set.
type Member struct {
	name  string
	group int
	clock *clock

	// score is the EWMA of success, as float64 bits.
	score atomic.Uint64
	// evictedUntil is the end of the current eviction in clock.since units;
	// 0 when none is set. A past value means the provider is live again.
	evictedUntil atomic.Int64
	consecutive  atomic.Int64
	requests     atomic.Uint64
	failures     atomic.Uint64

	// mu orders the eviction state's changes: a failure's and the first
	// success's after failures. Readers use the atomics alone.
	mu sync.Mutex
	// evictions counts the evictions since the last answer; the backoff
	// doubles with each.
	evictions int

	// Members sit side by side in a slice; the padding keeps one member's
	// hot atomics off its neighbour's cache line.
	_ [64]byte
}

// Name is the provider's name, as the config gives it.
func (m *Member) Name() string { return m.name }

// Group is the index of the provider's group (0 is tried first).
func (m *Member) Group() int { return m.group }

// Report records an attempt's outcome. An answer (Success or ClientError)
// raises the score and ends any eviction. A failure lowers the score and,
// unless the provider is already evicted, evicts it for
// BaseEviction << (evictions since its last answer), at most MaxEviction.
// retryAfter, when > 0 (a provider's Retry-After), makes the eviction last
// at least that long, up to MaxEviction; it also lengthens a current one.
func (m *Member) Report(o Outcome, retryAfter time.Duration) {
	m.requests.Add(1)
	if o.healthy() {
		m.raiseScore()
		if m.consecutive.Load() != 0 || m.evictedUntil.Load() != 0 {
			m.recover()
		}
		return
	}
	m.failures.Add(1)
	m.lowerScore()
	m.evict(retryAfter)
}

func (m *Member) loadScore() float64 { return math.Float64frombits(m.score.Load()) }

// weight is the member's share in a weighted pick.
func (m *Member) weight() float64 { return max(m.loadScore(), minWeight) }

func (m *Member) raiseScore() {
	for {
		old := m.score.Load()
		s := math.Float64frombits(old)
		if s == 1 {
			return
		}
		s += scoreStep * (1 - s)
		if s >= fullScore {
			s = 1
		}
		if m.score.CompareAndSwap(old, math.Float64bits(s)) {
			return
		}
	}
}

func (m *Member) lowerScore() {
	for {
		old := m.score.Load()
		s := math.Float64frombits(old) * (1 - scoreStep)
		if m.score.CompareAndSwap(old, math.Float64bits(s)) {
			return
		}
	}
}

// recover ends the eviction state after an answer.
func (m *Member) recover() {
	m.mu.Lock()
	m.consecutive.Store(0)
	m.evictions = 0
	m.evictedUntil.Store(0)
	m.mu.Unlock()
}

// evict starts an eviction, or lengthens the current one to honour
// retryAfter.
func (m *Member) evict(retryAfter time.Duration) {
	retryAfter = min(retryAfter, m.clock.maxEviction)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.consecutive.Add(1)
	now := m.clock.since()
	until := m.evictedUntil.Load()
	if now < until {
		// An attempt that started before this eviction: the same episode.
		if end := now + int64(retryAfter); end > until {
			m.evictedUntil.Store(end)
		}
		return
	}
	m.evictions++
	end := now + int64(max(m.clock.backoff(m.evictions), retryAfter))
	if end == 0 { // 0 means none: only reachable with a clock before the epoch
		end = 1
	}
	m.evictedUntil.Store(end)
}

// liveAt reports whether the member is not evicted at *now, reading the
// clock into *now (when negative) only if the member has an eviction set.
// An eviction found over is cleared, so later checks skip the clock.
func (m *Member) liveAt(c *clock, now *int64) bool {
	until := m.evictedUntil.Load()
	if until == 0 {
		return true
	}
	if *now < 0 {
		*now = c.since()
	}
	if *now < until {
		return false
	}
	// A failure storing a new eviction meanwhile makes this swap fail.
	m.evictedUntil.CompareAndSwap(until, 0)
	return true
}

// clock is a Set's time source and backoff settings, shared by its members.
type clock struct {
	now          func() time.Time
	epoch        time.Time
	baseEviction time.Duration
	maxEviction  time.Duration
}

const (
	defaultBaseEviction = time.Second
	defaultMaxEviction  = 5 * time.Minute
	evictionLimit       = 100 * 365 * 24 * time.Hour
)

func newClock(o Options) *clock {
	c := &clock{now: o.Now, baseEviction: o.BaseEviction, maxEviction: o.MaxEviction}
	if c.now == nil {
		c.now = time.Now
	}
	if c.baseEviction <= 0 {
		c.baseEviction = defaultBaseEviction
	}
	if c.maxEviction <= 0 {
		c.maxEviction = defaultMaxEviction
	}
	// Bounded so that an offset plus an eviction cannot overflow.
	c.baseEviction = min(c.baseEviction, evictionLimit)
	c.maxEviction = min(max(c.maxEviction, c.baseEviction), evictionLimit)
	// Times are kept as offsets from the epoch: time.Now's monotonic
	// reading makes them immune to steps of the wall clock, and an offset
	// fits an atomic int64.
	c.epoch = c.now()
	return c
}

// since is the time since the epoch.
func (c *clock) since() int64 {
	return int64(c.now().Sub(c.epoch))
}

// backoff is the eviction for the n-th eviction in a row (n >= 1).
func (c *clock) backoff(n int) time.Duration {
	d := c.baseEviction
	for i := 1; i < n; i++ {
		if d >= c.maxEviction/2 {
			return c.maxEviction
		}
		d *= 2
	}
	return min(d, c.maxEviction)
}

// at converts an offset back to a time.
func (c *clock) at(offset int64) time.Time {
	return c.epoch.Add(time.Duration(offset))
}
