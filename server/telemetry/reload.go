package telemetry

import (
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// ReloadMetrics records configuration reloads. Obtain it from
// Registry.Reload.
type ReloadMetrics struct {
	ok, failed *metrics.Counter
	lastOK     *metrics.Gauge
	lastAt     *metrics.Gauge
}

// Reload returns the handle for configuration reloads.
func (r *Registry) Reload() *ReloadMetrics {
	return &ReloadMetrics{
		ok:     r.set.GetOrCreateCounter(seriesName(famConfigReloads, "result", "success")),
		failed: r.set.GetOrCreateCounter(seriesName(famConfigReloads, "result", "failure")),
		lastOK: r.set.GetOrCreateGauge(famConfigLastReloadOK, nil),
		lastAt: r.set.GetOrCreateGauge(famConfigLastReloadTime, nil),
	}
}

// Record counts one reload, failed when err is not nil.
func (m *ReloadMetrics) Record(at time.Time, err error) {
	if err != nil {
		m.failed.Inc()
		m.lastOK.Set(0)
	} else {
		m.ok.Inc()
		m.lastOK.Set(1)
	}
	m.lastAt.Set(float64(at.UnixNano()) / 1e9)
}
