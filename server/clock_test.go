package server

import (
	"testing"
	"time"
)

// TestDeadlineAfter: a deadline from the deadline clock lies between d from
// now and one tick later (give or take the scheduling of a loaded test
// machine), and the clock moves on.
func TestDeadlineAfter(t *testing.T) {
	const slack = time.Second // a loaded machine may run the ticker late
	for _, d := range []time.Duration{0, 300 * time.Millisecond, time.Minute} {
		before := time.Now()
		got := deadlineAfter(d)
		after := time.Now()
		if got.Before(before.Add(d-slack)) || got.After(after.Add(d+deadlineTick+slack)) {
			t.Errorf("deadlineAfter(%v) = %v, %v after now, want about %v", d, got, got.Sub(before), d)
		}
	}
	first := deadlineAfter(0)
	eventually(t, 5*time.Second, "the deadline clock to move on", func() bool {
		return deadlineAfter(0).After(first)
	})
}
