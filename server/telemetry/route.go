package telemetry

import (
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// RouteMetrics records the requests of one (route, backend) pair. Obtain it
// from Registry.Route. A nil *RouteMetrics ignores observations, so callers
// with metrics disabled need no checks.
type RouteMetrics struct {
	set      *metrics.Set
	route    string
	backend  string
	hist     *durationHistogram
	bytesIn  *metrics.Counter
	bytesOut *metrics.Counter

	// requests[method] points at a table of counters indexed by status
	// slot; both levels fill lazily so unused methods cost one pointer.
	requests [numMethods]atomic.Pointer[statusCounters]
}

type statusCounters [numStatuses]atomic.Pointer[metrics.Counter]

// Observe records one finished request: its method, response status
// (0 or any code outside 100..599 counts as "other"), duration, and the
// bytes received from and sent to the client. After the first request with a
// given (method class, status) it does not allocate.
func (m *RouteMetrics) Observe(method []byte, status int, d time.Duration, bytesIn, bytesOut int) {
	if m == nil {
		return
	}
	m.requestCounter(methodIndex(method), statusIndex(status)).Inc()
	m.hist.observe(d)
	if bytesIn > 0 {
		m.bytesIn.Add(bytesIn)
	}
	if bytesOut > 0 {
		m.bytesOut.Add(bytesOut)
	}
}

// requestCounter returns the counter for a method and status slot, creating
// it on first use.
func (m *RouteMetrics) requestCounter(mi, si int) *metrics.Counter {
	t := m.requests[mi].Load()
	if t == nil {
		m.requests[mi].CompareAndSwap(nil, new(statusCounters))
		t = m.requests[mi].Load()
	}
	if c := t[si].Load(); c != nil {
		return c
	}
	// The set returns the same counter for the same name, so racing
	// creators agree and counts survive a new handle for the same labels.
	c := m.set.GetOrCreateCounter(seriesName(famRequests,
		"route", m.route,
		"backend", m.backend,
		"method", methodNames[mi],
		"status", statusLabel(si)))
	t[si].Store(c)
	return c
}
