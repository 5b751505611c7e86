package telemetry

import "strconv"

// Status indexes: 0..499 stand for the codes 100..599; statusOther for
// anything else (0 when no response was written, garbage from an upstream).
const (
	minStatus   = 100
	maxStatus   = 599
	statusOther = maxStatus - minStatus + 1
	numStatuses = statusOther + 1
)

// statusIndex maps a status code to its slot in a route's counter table.
func statusIndex(code int) int {
	if code < minStatus || code > maxStatus {
		return statusOther
	}
	return code - minStatus
}

// statusLabel is the label value for a slot: the exact code, or "other".
func statusLabel(idx int) string {
	if idx == statusOther {
		return "other"
	}
	return strconv.Itoa(idx + minStatus)
}
