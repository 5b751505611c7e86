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

	// skipBig has an event whose data outgrows max skipped rather than
	// fail the stream (bigevent.go): next returns its start (begun), then
	// reads past its bytes, following its JSON, and returns it (big) at
	// its end.
	skipBig bool
	big     bigSkip
}

// bigSkip is the state of an event too large to hold being skipped.
type bigSkip struct {
	on    bool // inside one
	fresh bool // just begun: data and line still hold its start (prefix)
	// tail is the line whose data outgrew the bound when it was whole,
	// and tailEnd its end of line, for prefix.
	tail    []byte
	tailEnd byte
	line    uint8 // where in a line the skip is (lineStart, ...)
	name    [5]byte
	nameLen int
	scan    bigScan
}

// Where in a line an event being skipped is.
const (
	lineStart uint8 = iota // at its start
	lineName               // in its field's name
	lineData               // in a data field's value
	lineOther              // in another field, or a comment
)

type sseEvent struct {
	// typ is the event type ("message" when none was named); data the data
	// lines joined with LF. Both alias the framer until its next call.
	typ, data []byte
	// comment marks a comment line between events (a provider's keep-alive,
	// such as ": OPENROUTER PROCESSING"): data is the line, colon included.
	// One inside an event (among its fields) is skipped, as before.
	comment bool
	// begun marks the start of an event too large to hold (skipBig): its
	// bytes so far are the framer's (prefix), the rest are skipped. big
	// marks its end: data is nil, what was read of it is the framer's
	// big.scan.
	begun, big bool
}

var errEventTooLarge = errors.New("convert: stream event too large")

// lineSlack is the room for a field name beside an event's bound.
const lineSlack = 16

var (
	typeMessage = []byte("message")
	bom         = []byte{0xEF, 0xBB, 0xBF}
)

func (f *sseFramer) reset(max int) {
	scan := f.big.scan
	scan.reset()
	*f = sseFramer{max: max, line: f.line[:0], data: f.data[:0], typ: f.typ[:0], big: bigSkip{scan: scan}}
}

// next returns the first event completed in p, or comment line between
// events, and what follows it; ok is false when p ended without
// completing one (its bytes are kept).
func (f *sseFramer) next(p []byte) (ev sseEvent, rest []byte, ok bool, err error) {
	if f.big.on {
		return f.skip(p)
	}
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
				return f.begin(p, nil)
			}
			f.line = append(f.line, p...)
			return ev, nil, false, nil
		}
		line := p[:i]
		if len(f.line) > 0 {
			if len(f.line)+i > f.max+lineSlack {
				return f.begin(p, nil)
			}
			f.line = append(f.line, line...)
			line = f.line
		}
		f.skipLF = p[i] == '\r'
		p = p[i+1:]
		ev, ok, err = f.process(line)
		f.line = f.line[:0]
		if err != nil || ok {
			if err == errEventTooLarge && f.skipBig {
				// A whole data line (line still holds it: f.line is
				// only emptied) took the data past the bound.
				return f.begin(p, line)
			}
			return ev, p, ok, err
		}
	}
	return ev, nil, false, nil
}

// begin starts skipping the event whose data outgrew the bound (with
// skipBig; else the stream fails): the data so far and the line begun
// (f.line, when tail is nil) or just ended (tail) are followed, and what
// comes from rest on is skipped. The framer's buffers keep the event's
// start until the next call, for prefix.
func (f *sseFramer) begin(rest, tail []byte) (sseEvent, []byte, bool, error) {
	if !f.skipBig {
		return sseEvent{}, nil, false, errEventTooLarge
	}
	b := &f.big
	b.on, b.fresh, b.tail = true, true, tail
	b.tailEnd = '\n'
	if f.skipLF {
		b.tailEnd = '\r' // (only a whole line, tail, has ended)
	}
	b.line, b.nameLen = lineStart, 0
	b.scan.reset()
	b.scan.write(f.data)
	switch {
	case tail != nil:
		if field, value := splitField(tail); string(field) == "data" {
			b.scan.write(value)
		}
	case !f.started:
		// The stream's first line, which may open with a BOM.
		f.started = true
		if len(f.line) == 0 {
			rest = bytes.TrimPrefix(rest, bom)
		}
		b.resume(bytes.TrimPrefix(f.line, bom))
	default:
		b.resume(f.line)
	}
	return sseEvent{begun: true}, rest, true, nil
}

// splitField splits a whole line into its field's name and value.
func splitField(line []byte) (field, value []byte) {
	field = line
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
	}
	return field, value
}

// resume follows the line begun (its first bytes, the field's name
// perhaps not whole yet), as skip would have.
func (b *bigSkip) resume(line []byte) {
	if value := b.field(line); b.line == lineData {
		b.scan.write(value)
	}
}

// field reads seg, the next bytes of a line's field name (the line's
// start when b.line is lineStart), and returns what follows the name's
// colon; b.line says what the line is then.
func (b *bigSkip) field(seg []byte) []byte {
	name, after, colon := seg, []byte(nil), false
	if i := bytes.IndexByte(seg, ':'); i >= 0 {
		name, after, colon = seg[:i], seg[i+1:], true
	}
	b.line = lineName
	if b.nameLen+len(name) > len(b.name) {
		b.line = lineOther
		return nil
	}
	b.nameLen += copy(b.name[b.nameLen:], name)
	if colon {
		b.line = lineOther
		if string(b.name[:b.nameLen]) == "data" {
			b.line = lineData
		}
	}
	return after
}

// skip reads past the bytes of the event too large to hold, following
// its data, and returns it (big) at the blank line that ends it.
func (f *sseFramer) skip(p []byte) (sseEvent, []byte, bool, error) {
	b := &f.big
	if b.fresh {
		// (prefix was had, or not wanted)
		b.fresh, b.tail = false, nil
		f.line, f.data = f.line[:0], f.data[:0]
	}
	for len(p) > 0 {
		if f.skipLF {
			f.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		if b.line == lineStart && (p[0] == '\n' || p[0] == '\r') {
			f.skipLF = p[0] == '\r'
			return f.endBig(), p[1:], true, nil
		}
		i := indexEOL(p)
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if b.line == lineStart || b.line == lineName {
			seg = b.field(seg)
		}
		if b.line == lineData {
			b.scan.write(seg)
		}
		if i < 0 {
			return sseEvent{}, nil, false, nil
		}
		if b.line == lineData {
			b.scan.write(lf) // data lines are joined with LF
		}
		b.line, b.nameLen = lineStart, 0
		f.skipLF = p[i] == '\r'
		p = p[i+1:]
	}
	return sseEvent{}, nil, false, nil
}

var lf = []byte{'\n'}

// endBig ends the event being skipped.
func (f *sseFramer) endBig() sseEvent {
	f.big.on = false
	typ := typeMessage
	if f.typSet && len(f.typ) > 0 {
		typ = f.typ
	}
	f.typSet = false
	return sseEvent{typ: typ, big: true}
}

// prefix appends what the event being skipped had before it began to be
// (valid right after next returned begun): its type, its data lines and
// the line begun, as SSE fields. A stream written event by event sends
// it, then the event's bytes as they come.
func (f *sseFramer) prefix(dst []byte) []byte {
	if f.typSet {
		dst = append(dst, "event: "...)
		dst = append(append(dst, f.typ...), '\n')
	}
	for d := f.data; len(d) > 0; {
		i := bytes.IndexByte(d, '\n')
		dst = append(dst, "data: "...)
		dst = append(dst, d[:i+1]...)
		d = d[i+1:]
	}
	if f.big.tail != nil {
		return append(append(dst, f.big.tail...), f.big.tailEnd)
	}
	return append(dst, f.line...)
}

// pending reports an event or a field line begun and not finished.
func (f *sseFramer) pending() bool {
	return f.big.on || len(f.data) > 0 || (len(f.line) > 0 && f.line[0] != ':')
}

// last returns the event the stream ended inside (pending), as if the
// line or blank line missing at its end had come, and forgets it; ok is
// false when there is none, or it outgrew the bound. The SSE spec
// discards such an event: the caller decides whether it was whole.
func (f *sseFramer) last() (ev sseEvent, ok bool) {
	if f.big.on {
		// Skipped: whole when its JSON value ended.
		if f.big.fresh {
			f.big.fresh, f.big.tail = false, nil
			f.line, f.data = f.line[:0], f.data[:0]
		}
		ev = f.endBig()
		return ev, f.big.scan.closed
	}
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
