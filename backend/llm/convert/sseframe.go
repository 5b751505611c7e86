package convert

import (
	"bytes"
	"errors"
)

// sseFramer splits a text/event-stream pushed to it in pieces of any size
// into events, by the WHATWG rules that codec/sse.Reader follows. The Reader
// pulls from an io.Reader, and its errors are sticky, so it cannot wait for
// bytes a caller has not pushed yet; FuzzSSEFramer checks that the two agree
// on every input and split. Only data and event fields matter here (id and
// retry are read past).
type sseFramer struct {
	max     int // bound of an event's data
	line    []byte
	data    []byte
	typ     []byte
	typSet  bool
	skipLF  bool
	started bool // the first line (and its BOM) was seen
}

type sseEvent struct {
	// typ is the event type ("message" when none was named); data the data
	// lines joined with LF. Both alias the framer until its next call.
	typ, data []byte
	// comment marks a comment line between events (a provider's keep-alive,
	// such as ": OPENROUTER PROCESSING"): data is the line, colon included.
	// One inside an event (among its fields) is skipped, as before.
	comment bool
}

var errEventTooLarge = errors.New("convert: stream event too large")

// lineSlack is the room for a field name beside an event's bound.
const lineSlack = 16

var (
	typeMessage = []byte("message")
	bom         = []byte{0xEF, 0xBB, 0xBF}
)

func (f *sseFramer) reset(max int) {
	*f = sseFramer{max: max, line: f.line[:0], data: f.data[:0], typ: f.typ[:0]}
}

// next returns the first event completed in p, or comment line between
// events, and what follows it; ok is false when p ended without
// completing one (its bytes are kept).
func (f *sseFramer) next(p []byte) (ev sseEvent, rest []byte, ok bool, err error) {
	for len(p) > 0 {
		if f.skipLF {
			f.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := indexEOL(p)
		if i < 0 {
			if len(f.line)+len(p) > f.max+lineSlack {
				return ev, nil, false, errEventTooLarge
			}
			f.line = append(f.line, p...)
			return ev, nil, false, nil
		}
		line := p[:i]
		if len(f.line) > 0 {
			if len(f.line)+i > f.max+lineSlack {
				return ev, nil, false, errEventTooLarge
			}
			f.line = append(f.line, line...)
			line = f.line
		}
		f.skipLF = p[i] == '\r'
		p = p[i+1:]
		ev, ok, err = f.process(line)
		f.line = f.line[:0]
		if err != nil || ok {
			return ev, p, ok, err
		}
	}
	return ev, nil, false, nil
}

// pending reports an event or a field line begun and not finished.
func (f *sseFramer) pending() bool {
	return len(f.data) > 0 || (len(f.line) > 0 && f.line[0] != ':')
}

// last returns the event the stream ended inside (pending), as if the
// line or blank line missing at its end had come, and forgets it; ok is
// false when there is none, or it outgrew the bound. The SSE spec
// discards such an event: the caller decides whether it was whole.
func (f *sseFramer) last() (ev sseEvent, ok bool) {
	if len(f.line) > 0 {
		line := f.line
		f.line = f.line[:0]
		if line[0] != ':' { // a comment line ends nothing
			if _, _, err := f.process(line); err != nil {
				f.data = f.data[:0]
				return ev, false
			}
		}
	}
	ev, ok, _ = f.dispatch()
	return ev, ok
}

func indexEOL(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

func (f *sseFramer) process(line []byte) (sseEvent, bool, error) {
	if !f.started {
		f.started = true
		line = bytes.TrimPrefix(line, bom)
	}
	if len(line) == 0 {
		return f.dispatch()
	}
	if line[0] == ':' {
		if len(f.data) == 0 && !f.typSet {
			return sseEvent{data: line, comment: true}, true, nil
		}
		return sseEvent{}, false, nil
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
		if len(f.data)+len(value) > f.max {
			return sseEvent{}, false, errEventTooLarge
		}
		f.data = append(f.data, value...)
		f.data = append(f.data, '\n')
	case "event":
		f.typ = append(f.typ[:0], value...)
		f.typSet = true
	}
	return sseEvent{}, false, nil
}

func (f *sseFramer) dispatch() (sseEvent, bool, error) {
	typ, typSet := f.typ, f.typSet
	f.typSet = false
	if len(f.data) == 0 {
		return sseEvent{}, false, nil
	}
	if !typSet || len(typ) == 0 {
		typ = typeMessage
	}
	data := f.data[:len(f.data)-1]
	f.data = f.data[:0]
	return sseEvent{typ: typ, data: data}, true, nil
}
