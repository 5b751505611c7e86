package telemetry

import (
	"strconv"

	"github.com/VictoriaMetrics/metrics"
)

// TCPMetrics counts the bytes of forwarded (TCP and TLS passthrough or
// terminated-then-forwarded) connections of one listener, as agentgateway's
// downstream_received and downstream_sent. Obtain it from Registry.TCP; a
// nil *TCPMetrics ignores events.
type TCPMetrics struct {
	rx, tx *metrics.Counter
}

// TCP returns the handle for a listener of the bind on port; protocol is
// tcp or tls.
func (r *Registry) TCP(port int, listener, protocol string) *TCPMetrics {
	labels := []string{"bind", "bind/" + strconv.Itoa(port), "listener", listener, "protocol", protocol}
	return &TCPMetrics{
		rx: r.set.GetOrCreateCounter(seriesName(famDownstreamRx, labels...)),
		tx: r.set.GetOrCreateCounter(seriesName(famDownstreamTx, labels...)),
	}
}

// Forwarded adds a connection's bytes: received from the client and sent
// to it.
func (m *TCPMetrics) Forwarded(received, sent int64) {
	if m == nil {
		return
	}
	m.rx.AddInt64(received)
	m.tx.AddInt64(sent)
}
