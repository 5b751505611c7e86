package server

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestOTelErrors: the SDK's errors reach the gateway's logger, one line a
// minute, the next one counting those held back.
func TestOTelErrors(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	h := NewOTelErrors(zap.New(core))
	now := time.Unix(1000, 0)
	h.now = func() time.Time { return now }
	fail := errors.New("traces export: connection refused")
	h.Handle(fail)
	for range 5 {
		now = now.Add(10 * time.Second)
		h.Handle(fail)
	}
	h.Handle(nil)
	if logs.Len() != 1 {
		t.Fatalf("%d lines within the minute, want 1", logs.Len())
	}
	now = now.Add(15 * time.Second)
	h.Handle(fail)
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("%d lines after the minute, want 2", len(all))
	}
	if got := all[1].ContextMap()["similar_errors_not_logged"]; got != int64(5) {
		t.Errorf("held back %v, want 5", got)
	}
	if got := all[0].ContextMap()["error"]; got != fail.Error() {
		t.Errorf("error field %v", got)
	}
}
