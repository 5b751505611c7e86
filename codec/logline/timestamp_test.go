package logline

import (
	"sync"
	"testing"
	"time"
)

// TestAppendTimeMatchesFormat: the cached second gives what time.Format
// gives for zap's ISO 8601 layout, line after line, across a second, a
// minute, a year and daylight saving changes, in several zones.
func TestAppendTimeMatchesFormat(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatalf("tz data: %v", err)
	}
	tests := []struct {
		desc  string
		start time.Time
		loc   *time.Location
	}{
		{"a new year in UTC", time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC), time.UTC},
		{"half hour zone", time.Date(2026, 11, 26, 0, 35, 19, 0, time.UTC), india},
		{"west of UTC", time.Date(2026, 11, 26, 0, 35, 19, 0, time.UTC), brazil},
		{"an offset with seconds", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), oddSeconds},
		{"less than a minute west", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), tinyWest},
		{"daylight saving starts", time.Date(2026, 3, 8, 6, 59, 58, 0, time.UTC), newYork},
		{"daylight saving ends", time.Date(2026, 11, 1, 5, 59, 58, 0, time.UTC), newYork},
		{"before 1970", time.Date(1969, 12, 31, 23, 59, 58, 0, time.UTC), time.UTC},
		{"local", time.Now(), time.Local},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var c secondCache
			// Steps of 999,999 ns hit every millisecond cut and cross
			// seconds at varying offsets.
			for i := range 4000 {
				ts := tc.start.Add(time.Duration(i) * 999_999).In(tc.loc)
				for _, remember := range []bool{true, false} {
					got := string(c.appendTime(nil, ts, remember))
					if want := ts.Format(iso8601Layout); got != want {
						t.Fatalf("%v (remember %v): got %q, want %q", ts, remember, got, want)
					}
				}
			}
		})
	}
}

// TestAppendTimeConcurrent: lines of many goroutines, in two zones and
// crossing seconds, all get their own time (run with -race).
func TestAppendTimeConcurrent(t *testing.T) {
	var c secondCache
	start := time.Date(2026, 11, 26, 0, 35, 19, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 4 {
		loc := []*time.Location{time.UTC, india}[g%2]
		wg.Go(func() {
			for i := range 3000 {
				ts := start.Add(time.Duration(i) * 777_777).In(loc)
				if got, want := string(c.appendTime(nil, ts, true)), ts.Format(iso8601Layout); got != want {
					t.Errorf("%v: got %q, want %q", ts, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
