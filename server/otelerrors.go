package server

import (
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/codec/logline"
)

// otelErrorEvery is how often OTelErrors logs: an exporter whose collector
// is down fails every batch, and one line a minute says as much.
const otelErrorEvery = time.Minute

// OTelErrors is an otel.ErrorHandler that logs the OpenTelemetry SDK's
// errors (a collector unreachable, a batch dropped) through the gateway's
// logger, at most once a minute with a count of those held back. Without
// it the SDK writes them with the standard library's log package, plain
// text on stderr among the JSON lines, every ten seconds.
type OTelErrors struct {
	log      *zap.Logger
	throttle logline.Throttle
	now      func() time.Time
}

// NewOTelErrors returns the handler logging to log.
func NewOTelErrors(log *zap.Logger) *OTelErrors {
	return &OTelErrors{log: log, throttle: logline.Throttle{Every: otelErrorEvery}, now: time.Now}
}

var _ otel.ErrorHandler = (*OTelErrors)(nil)

// Handle logs err, or counts it when a line went out within the minute.
func (h *OTelErrors) Handle(err error) {
	if err == nil {
		return
	}
	if dropped, ok := h.throttle.Allow(h.now()); ok {
		h.log.Warn("telemetry export failed", zap.Error(err), logline.DroppedField(dropped))
	}
}
