package telemetry

import (
	"strconv"

	"github.com/VictoriaMetrics/metrics"
)

// BindMetrics records the downstream connections of one listening port.
// Obtain it from Registry.Bind; a nil *BindMetrics ignores events.
type BindMetrics struct {
	open     *metrics.Gauge
	parked   *metrics.Gauge
	accepted *metrics.Counter
	failed   *metrics.Counter
}

// Bind returns the handle for connections accepted on port. The label value
// is "bind/<port>", the name agentgateway gives its binds.
func (r *Registry) Bind(port int) *BindMetrics {
	bind := "bind/" + strconv.Itoa(port)
	return &BindMetrics{
		open:     r.set.GetOrCreateGauge(seriesName(famConnectionsOpened, "bind", bind), nil),
		parked:   r.set.GetOrCreateGauge(seriesName(famConnectionsParked, "bind", bind), nil),
		accepted: r.set.GetOrCreateCounter(seriesName(famConnectionsTotal, "bind", bind)),
		failed:   r.set.GetOrCreateCounter(seriesName(famAcceptErrors, "bind", bind)),
	}
}

// ConnOpened counts an accepted connection and adds it to the open gauge.
func (b *BindMetrics) ConnOpened() {
	if b == nil {
		return
	}
	b.accepted.Inc()
	b.open.Inc()
}

// AcceptFailed counts an accept that failed (the bind's acceptor backs off
// and accepts again).
func (b *BindMetrics) AcceptFailed() {
	if b != nil {
		b.failed.Inc()
	}
}

// AcceptErrors returns the number of the bind's failed accepts.
func (b *BindMetrics) AcceptErrors() int {
	if b == nil {
		return 0
	}
	return int(b.failed.Get())
}

// ConnClosed removes a connection from the open gauge. Call it exactly once
// per ConnOpened.
func (b *BindMetrics) ConnClosed() {
	if b == nil {
		return
	}
	b.open.Dec()
}

// ConnParked adds an open connection to the parked gauge (idle, held
// without a goroutine); ConnUnparked removes it (it woke or closed).
func (b *BindMetrics) ConnParked() {
	if b != nil {
		b.parked.Inc()
	}
}

// ConnUnparked removes a connection from the parked gauge.
func (b *BindMetrics) ConnUnparked() {
	if b != nil {
		b.parked.Dec()
	}
}

// Open returns the number of the bind's open connections.
func (b *BindMetrics) Open() int {
	if b == nil {
		return 0
	}
	return int(b.open.Get())
}

// Parked returns the number of the bind's parked connections.
func (b *BindMetrics) Parked() int {
	if b == nil {
		return 0
	}
	return int(b.parked.Get())
}
