// Package sse owns the server-sent events wire format (text/event-stream):
// a bounded parser that follows the WHATWG EventSource interpretation rules
// and an allocation-free encoder. It depends on the standard library only.
package sse

import (
	"bytes"
	"errors"
	"io"
)

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the event type; the Reader reports "message" when the event
	// named none. AppendEvent writes no event line for "" and "message".
	Type string
	// ID is the last event ID of the stream when the event was dispatched
	// (WHATWG semantics: it persists until an id field changes it).
	ID string
	// Data is the event's data: its data lines joined with "\n". A slice
	// returned by Reader.Next is only valid until the next call to Next.
	Data []byte
	// Retry is the reconnection time in milliseconds, valid when HasRetry is
	// set (a retry field was part of this event).
	Retry    int
	HasRetry bool
}

// DefaultMaxEventBytes bounds an event when NewReader is given no bound.
const DefaultMaxEventBytes = 1 << 20

// ErrEventTooLarge is returned when an event's data is longer than the
// Reader's bound, or a single line longer than the bound plus 16 bytes (room
// for the field name). The Reader is unusable afterwards.
var ErrEventTooLarge = errors.New("sse: event too large")

const (
	readBufSize = 8 << 10
	lineSlack   = 16
	maxRetry    = 1<<31 - 1
	// maxEmptyReads bounds consecutive (0, nil) reads, as bufio does.
	maxEmptyReads = 100
	typeMessage   = "message"
)

// Reader parses a text/event-stream. It is not safe for concurrent use.
type Reader struct {
	r       io.Reader
	max     int // bound of an event's data
	maxLine int // bound of one line: max and room for the field name

	buf        []byte // read buffer
	start, end int    // unread window of buf
	line       []byte // a line spanning reads
	data       []byte // data buffer of the event being read

	typ    string // event type of the event being read, when typSet
	typSet bool
	lastID string

	retry, evRetry       int
	hasRetry, evHasRetry bool

	skipLF    bool // the last line ended with CR: a following LF belongs to it
	firstLine bool // no line seen yet: strip a BOM
	empty     int  // consecutive reads that returned nothing
	err       error
}

// NewReader returns a Reader of r that fails with ErrEventTooLarge when an
// event's data exceeds maxEventBytes (DefaultMaxEventBytes when
// maxEventBytes <= 0); see ErrEventTooLarge for the bound of a line.
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	maxLine := maxEventBytes + lineSlack
	return &Reader{r: r, max: maxEventBytes, maxLine: maxLine, buf: make([]byte, min(readBufSize, maxLine+2)), firstLine: true}
}

// LastEventID is the stream's last event ID buffer: the value of the latest
// id field, including one of an event that was not dispatched (no data).
func (r *Reader) LastEventID() string { return r.lastID }

// Retry is the latest reconnection time (milliseconds) the stream set, even
// by an event that was not dispatched.
func (r *Reader) Retry() (ms int, ok bool) { return r.retry, r.hasRetry }

// Next returns the next dispatched event. It returns io.EOF when the stream
// ends at an event boundary and io.ErrUnexpectedEOF when it ends inside an
// event (which, per the WHATWG rules, is discarded). Event.Data aliases the
// Reader's buffer and is overwritten by the next call. Errors are sticky.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		if r.skipLF && r.start < r.end {
			if r.buf[r.start] == '\n' {
				r.start++
			}
			r.skipLF = false
		}
		window := r.buf[r.start:r.end]
		if i := indexEOL(window); i >= 0 {
			if len(r.line)+i > r.maxLine {
				return r.fail(ErrEventTooLarge)
			}
			line := window[:i]
			if len(r.line) > 0 {
				r.line = append(r.line, line...)
				line = r.line
			}
			r.skipLF = window[i] == '\r'
			r.start += i + 1
			ev, ok, err := r.processLine(line)
			r.line = r.line[:0]
			if err != nil {
				return r.fail(err)
			}
			if ok {
				return ev, nil
			}
			continue
		}
		// No line end in the window: keep the partial line and read more.
		if len(window) > 0 {
			if len(r.line)+len(window) > r.maxLine {
				return r.fail(ErrEventTooLarge)
			}
			r.line = append(r.line, window...)
		}
		r.start, r.end = 0, 0
		n, err := r.r.Read(r.buf)
		r.end = n
		if n > 0 {
			r.empty = 0
			continue
		}
		if err == nil {
			// io.Reader allows 0, nil; give up like bufio after many in a row.
			if r.empty++; r.empty < maxEmptyReads {
				continue
			}
			err = io.ErrNoProgress
		}
		if err == io.EOF && r.pending() {
			err = io.ErrUnexpectedEOF
		}
		return r.fail(err)
	}
}

// pending reports an event or a field line begun but not finished.
func (r *Reader) pending() bool {
	return len(r.data) > 0 || (len(r.line) > 0 && r.line[0] != ':')
}

func (r *Reader) fail(err error) (Event, error) {
	r.err = err
	r.data = r.data[:0]
	return Event{}, err
}

// indexEOL finds the first CR or LF.
func indexEOL(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// processLine interprets one line; ok reports a dispatched event.
func (r *Reader) processLine(line []byte) (ev Event, ok bool, err error) {
	if r.firstLine {
		r.firstLine = false
		line = bytes.TrimPrefix(line, bom)
	}
	if len(line) == 0 {
		return r.dispatch()
	}
	if line[0] == ':' {
		return Event{}, false, nil // comment
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "data":
		if len(r.data)+len(value)+1 > r.max+1 {
			return Event{}, false, ErrEventTooLarge
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	case "event":
		if string(value) != r.typ { // keeps the string of a repeated type: no allocation
			r.typ = string(value)
		}
		r.typSet = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != r.lastID {
			r.lastID = string(value)
		}
	case "retry":
		if n, ok := parseDigits(value); ok {
			r.retry, r.hasRetry = n, true
			r.evRetry, r.evHasRetry = n, true
		}
	}
	return Event{}, false, nil
}

// parseDigits parses a non-empty string of ASCII digits up to maxRetry.
func parseDigits(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > maxRetry {
			return 0, false
		}
	}
	return n, true
}

// dispatch ends the event being read at a blank line.
func (r *Reader) dispatch() (Event, bool, error) {
	typ, typSet := r.typ, r.typSet
	retry, hasRetry := r.evRetry, r.evHasRetry
	r.typSet, r.evHasRetry, r.evRetry = false, false, 0
	if len(r.data) == 0 {
		return Event{}, false, nil
	}
	if !typSet || typ == "" {
		typ = typeMessage
	}
	data := r.data[:len(r.data)-1]
	r.data = r.data[:0]
	return Event{Type: typ, ID: r.lastID, Data: data, Retry: retry, HasRetry: hasRetry}, true, nil
}
