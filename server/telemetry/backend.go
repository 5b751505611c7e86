package telemetry

import "github.com/VictoriaMetrics/metrics"

// BackendMetrics records connection-level events of one backend. Obtain it
// from Registry.Backend; a nil *BackendMetrics ignores events.
type BackendMetrics struct {
	connectErrors *metrics.Counter
}

// ConnectError counts one failed attempt to connect to the backend.
func (b *BackendMetrics) ConnectError() {
	if b == nil {
		return
	}
	b.connectErrors.Inc()
}
