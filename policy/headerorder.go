package policy

import (
	"bytes"
	"sync"

	"github.com/valyala/fasthttp"
)

// Deleting a header without moving the others.
//
// fasthttp's Del fills each hole it leaves with the header's last line, so
// the lines after the deleted name change places. Lines of different names
// may (RFC 9110 5.3), but the lines of one name are a list whose order is
// its meaning: a client's `X-A: 1`, `X-A: 2`, `X-A: 3` after a Keep-Alive
// field reached the backend as 3, 1, 2 once the gateway dropped Keep-Alive
// (and so for WWW-Authenticate's challenges, Via, Forwarded, Link).
// DelRequestHeader and DelResponseHeader delete as Del does and keep every
// other name's lines in their order.

// orderedHeaders is what a rebuild needs of a fasthttp request or response
// header. (The lines are read by the callers, on the concrete types: a
// range over All through an interface allocates its iterator's state.)
type orderedHeaders interface {
	DelBytes(key []byte)
	AddBytesKV(key, value []byte)
}

// DelRequestHeader deletes every line of name from h, keeping the order of
// the lines of every other name.
func DelRequestHeader(h *fasthttp.RequestHeader, name []byte) {
	c := orderCheck{name: name}
	if !keptApart(name) {
		for k := range h.All() {
			if c.line(k) {
				break
			}
		}
	}
	if !c.rebuild {
		h.DelBytes(name)
		return
	}
	for range h.Trailers() {
		// Announced trailer fields may be kept with the trailer section,
		// which All does not show: an Add would not put them back there.
		h.DelBytes(name)
		return
	}
	l := takeLines(name)
	for k, v := range h.All() {
		l.add(k, v)
	}
	l.rebuild(h)
	l.release()
}

// DelResponseHeader is DelRequestHeader for a response. (The two are
// written out: a generic one, or one reading the lines through an
// interface, allocates the range's iterator state on every call.)
func DelResponseHeader(h *fasthttp.ResponseHeader, name []byte) {
	c := orderCheck{name: name}
	if !keptApart(name) {
		for k := range h.All() {
			if c.line(k) {
				break
			}
		}
	}
	if !c.rebuild {
		h.DelBytes(name)
		return
	}
	for range h.Trailers() {
		// Announced trailer fields may be kept with the trailer section,
		// which All does not show: an Add would not put them back there.
		h.DelBytes(name)
		return
	}
	l := takeLines(name)
	for k, v := range h.All() {
		l.add(k, v)
	}
	l.rebuild(h)
	l.release()
}

// suffixNames bounds the names orderCheck compares; a header with more
// lines after the deleted one is rebuilt.
const suffixNames = 32

// orderCheck tells, from a header's lines in order, whether fasthttp's Del
// of name could change the order of another name's lines. Del fills each
// hole with the last line, so a line moves only from after name's first
// line to a place after it: the order of a name's lines can change only
// when it has two of them there. When none has, Del is used as it is (one
// pass over the fields, no allocation); else the lines from there on are
// deleted and added again in order (headerLines.rebuild). Fields fasthttp keeps
// apart from its list of lines (Host, Content-Type, cookies ...) are
// deleted where they are, moving nothing.
type orderCheck struct {
	name          []byte
	after         [suffixNames][]byte
	n             int
	seen, rebuild bool
}

// line takes the next line's name; it reports true once the answer is
// known to be a rebuild.
func (c *orderCheck) line(k []byte) bool {
	switch {
	case bytes.EqualFold(k, c.name):
		c.seen = true
	case !c.seen:
	case c.n == len(c.after):
		c.rebuild = true
	default:
		for _, p := range c.after[:c.n] {
			if bytes.EqualFold(p, k) {
				c.rebuild = true
				break
			}
		}
		c.after[c.n] = k
		c.n++
	}
	return c.rebuild
}

// keptApart reports whether fasthttp keeps the field apart from its list
// of lines (its "special" headers): one value, deleted in place.
func keptApart(name []byte) bool {
	for _, s := range keptApartNames {
		if bytes.EqualFold(name, s) {
			return true
		}
	}
	return false
}

var keptApartNames = [][]byte{
	[]byte(fasthttp.HeaderHost), []byte(fasthttp.HeaderContentType), []byte(fasthttp.HeaderContentLength),
	[]byte(fasthttp.HeaderUserAgent), []byte(fasthttp.HeaderCookie), []byte(fasthttp.HeaderSetCookie),
	[]byte(fasthttp.HeaderContentEncoding), []byte(fasthttp.HeaderServer), []byte(fasthttp.HeaderTrailer),
}

// notAddedAgain are fields fasthttp does not take back from an Add (it
// makes Transfer-Encoding and Date itself) or takes as a flag (Connection:
// close): a rebuild leaves their lines where they are. Each is one value,
// or a list whose order means nothing (Connection's tokens).
var notAddedAgain = [][]byte{
	[]byte(fasthttp.HeaderTransferEncoding), []byte(fasthttp.HeaderDate), []byte(fasthttp.HeaderConnection),
}

func addedAgain(name []byte) bool {
	for _, s := range notAddedAgain {
		if bytes.EqualFold(name, s) {
			return false
		}
	}
	return true
}

// headerLines is a copy of a header's lines and the name to delete,
// pooled.
type headerLines struct {
	buf   []byte
	del   int // buf[:del] is the name to delete
	lines []headerLine
}

type headerLine struct{ k, v, end int } // buf[k:v] the name, buf[v:end] the value

func (l *headerLines) name(i int) []byte  { return l.buf[l.lines[i].k:l.lines[i].v] }
func (l *headerLines) value(i int) []byte { return l.buf[l.lines[i].v:l.lines[i].end] }

var headerLinesPool = sync.Pool{New: func() any { return new(headerLines) }}

// takeLines returns an empty headerLines for deleting name (copied).
func takeLines(name []byte) *headerLines {
	l := headerLinesPool.Get().(*headerLines)
	l.buf = append(l.buf[:0], name...)
	l.del, l.lines = len(name), l.lines[:0]
	return l
}

func (l *headerLines) release() { headerLinesPool.Put(l) }

// add copies the header's next line.
func (l *headerLines) add(k, v []byte) {
	at := len(l.buf)
	l.buf = append(append(l.buf, k...), v...)
	l.lines = append(l.lines, headerLine{k: at, v: at + len(k), end: len(l.buf)})
}

// rebuild deletes the name and, from the first line of a name that has a
// line after the name's first, every line of those names, then adds them
// again in order. Lines before that start never move (fasthttp's Del
// takes the last line to fill a hole), so every name keeps its order. The
// start goes back to the first line of every name rebuilt, so that no line
// of theirs before it is lost.
func (l *headerLines) rebuild(h orderedHeaders) {
	del := l.buf[:l.del:l.del]
	first := -1
	for i := range l.lines {
		if bytes.EqualFold(l.name(i), del) {
			first = i
			break
		}
	}
	if first < 0 {
		h.DelBytes(del)
		return
	}
	start := first
	for moved := true; moved; {
		moved = false
		for i := start; i < len(l.lines); i++ {
			ni := l.name(i)
			if bytes.EqualFold(ni, del) || !addedAgain(ni) {
				continue
			}
			for j := 0; j < start; j++ {
				if bytes.EqualFold(l.name(j), ni) {
					start, moved = j, true
					break
				}
			}
		}
	}
	h.DelBytes(del)
	for i := start; i < len(l.lines); i++ {
		if ni := l.name(i); !bytes.EqualFold(ni, del) && addedAgain(ni) && firstOf(l, start, i) {
			h.DelBytes(ni)
		}
	}
	for i := start; i < len(l.lines); i++ {
		if ni := l.name(i); !bytes.EqualFold(ni, del) && addedAgain(ni) {
			h.AddBytesKV(ni, l.value(i))
		}
	}
}

// firstOf reports whether line i is the first of its name from start on.
func firstOf(l *headerLines, start, i int) bool {
	for j := start; j < i; j++ {
		if bytes.EqualFold(l.name(j), l.name(i)) {
			return false
		}
	}
	return true
}
