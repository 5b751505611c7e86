package logline

import (
	"sync/atomic"
	"time"
)

// iso8601Layout is what zapcore.ISO8601TimeEncoder writes: milliseconds
// (cut, not rounded) and the zone as "Z" for UTC or ±hhmm (seconds of an
// offset are dropped). The three parts are formatted apart, which gives the
// same bytes: time.Format writes each element of a layout on its own.
const (
	iso8601Layout = "2006-01-02T15:04:05.000Z0700"
	secondLayout  = "2006-01-02T15:04:05"
	zoneLayout    = "Z0700"
)

// second holds what an ISO 8601 time prints for one second in one
// location, but for the milliseconds. It is never changed once made.
type second struct {
	unix     int64
	location *time.Location
	date     string // up to the seconds: "2026-11-26T00:35:20"
	zone     string // "Z", "+0100"
}

// secondCache formats the date and zone once per second instead of once per
// line (time.Format costs several times the rest of a line). Lines of one
// second read the same immutable second through an atomic pointer; the
// first line of the next second makes a new one. Two writers doing so at
// once both store an equal value.
type secondCache struct {
	last atomic.Pointer[second]
}

// seconds serves every encoder: entries are stamped with the current time,
// the same second for all of them.
var seconds secondCache

// appendTime appends t as zap's ISO 8601 encoder does. remember says
// whether a second not held yet becomes the one held: yes for an entry's
// time, no for a time field, which may be anything and should not push the
// current second out.
func (c *secondCache) appendTime(bs []byte, t time.Time, remember bool) []byte {
	unix, location := t.Unix(), t.Location()
	s := c.last.Load()
	if s == nil || s.unix != unix || s.location != location {
		if !remember {
			return t.AppendFormat(bs, iso8601Layout)
		}
		s = &second{
			unix:     unix,
			location: location,
			date:     t.Format(secondLayout),
			zone:     t.Format(zoneLayout),
		}
		c.last.Store(s)
	}
	bs = append(bs, s.date...)
	bs = appendMillis(bs, t.Nanosecond())
	return append(bs, s.zone...)
}

// appendMillis appends ".000": the milliseconds of nanos, cut.
func appendMillis(bs []byte, nanos int) []byte {
	ms := nanos / int(time.Millisecond)
	return append(bs, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
}
