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

// Reload returns the handle for configuration reloads. The last reload
// counts as successful until one fails: the gateway runs only on a
// configuration it loaded, as Prometheus's own
// prometheus_config_last_reload_successful is 1 after its start, so that
// an alert on 0 means a failed reload, not a fresh process.
func (r *Registry) Reload() *ReloadMetrics {
	m := &ReloadMetrics{
		ok:     r.set.GetOrCreateCounter(seriesName(famConfigReloads, "result", "success")),
		failed: r.set.GetOrCreateCounter(seriesName(famConfigReloads, "result", "failure")),
		lastOK: r.set.GetOrCreateGauge(famConfigLastReloadOK, nil),
		lastAt: r.set.GetOrCreateGauge(famConfigLastReloadTime, nil),
	}
	m.lastOK.Set(1)
	return m
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
