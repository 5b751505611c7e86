package tcpproxy

import "time"

// SetSpanWait sets Hybrid's spanWait until the returned function restores
// it.
func SetSpanWait(d time.Duration) (restore func()) {
	old := spanWait
	spanWait = d
	return func() { spanWait = old }
}
