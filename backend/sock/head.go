package sock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
)

// ErrBareLFHead is what a read returns, at once, when the server waits for
// more of a request head that already ended with a blank line in bare-LF
// form ("\n\n", "\r\n\n" or "\n\r\n"). The server's head parser (fasthttp's)
// takes such a head only once CRLF CRLF follows somewhere after it, so a
// lone request of that form would otherwise wait for the head's deadline;
// RFC 9112 2.2 lets a recipient refuse bare LF, and the server answers 400.
var ErrBareLFHead = errors.New("request head ends with a bare LF blank line")

// HeadWatch notices a request head that ended with a bare-LF blank line
// while its server still waits for the rest of it. The server says when it
// reads a head (ReadingHead); a read asked for then fails with
// ErrBareLFHead if the bytes received so far show such a blank line:
//   - at their very end (it keeps the last four bytes received), or
//   - inside the previous read's bytes, when that read belongs to this
//     request and its bytes are still in place, just before the buffer of
//     the read asked for (a reader filling a buffer, as bufio does, reads
//     into the rest of the buffer after what it holds; if it moved what it
//     holds, nothing is checked).
//
// Outside a head the check does not run: a body may contain a blank line.
type HeadWatch struct {
	phase atomic.Int32 // headBetween, headReading, headDone
	tail  uint32       // the last four bytes received, the latest lowest
	// last are the previous read's bytes if that read came between
	// requests or during a head, and before the four bytes received before
	// them.
	last   []byte
	before uint32
}

// The phases of a HeadWatch.
const (
	headBetween int32 = iota // between requests: the bytes read start the next one
	headReading              // the server reads a head and the check runs
	headDone                 // a body, or no HTTP at all
)

// NextRequest tells the connection that its server waits for the next
// request: what is read from here on starts it. A new connection starts
// so. Only the reading goroutine may call it.
func (h *HeadWatch) NextRequest() {
	h.phase.Store(headBetween)
	h.last = nil
}

// ReadingHead tells the connection that its server reads a request head.
// The head ends with the next read deadline the server sets (fasthttp sets
// the body's as soon as the head is parsed: HeaderReceived) or with
// NextRequest.
func (h *HeadWatch) ReadingHead() { h.phase.Store(headReading) }

// Stop tells the connection that what it reads from here on is not HTTP
// requests (an upgrade tunnel), until NextRequest.
func (h *HeadWatch) Stop() { h.phase.Store(headDone) }

// endHead ends a head for the deadline setters, which run on every request:
// the store only happens during a head.
func (h *HeadWatch) endHead() {
	if h.phase.Load() == headReading {
		h.phase.Store(headDone)
	}
}

// saw records the bytes a read returned.
func (h *HeadWatch) saw(p []byte) {
	h.before = h.tail
	if h.phase.Load() == headDone {
		h.last = nil
	} else {
		h.last = p
	}
	if n := len(p); n >= 4 {
		h.tail = binary.BigEndian.Uint32(p[n-4:])
		return
	}
	for _, b := range p {
		h.tail = h.tail<<8 | uint32(b)
	}
}

// stuck reports that a read into p during a head would wait for bytes that
// cannot complete it.
func (h *HeadWatch) stuck(p []byte) bool {
	if h.phase.Load() != headReading {
		return false
	}
	if bareBlankEnd(h.tail) {
		return true
	}
	return h.last != nil && follows(h.last, p) && hasBareBlank(h.before, h.last)
}

// follows reports whether p starts where last ends, in the same array: a
// buffer filled by successive reads, nothing moved in between.
func follows(last, p []byte) bool {
	return len(p) > 0 && cap(last) > len(last) && &last[:len(last)+1][len(last)] == &p[0]
}

// hasBareBlank reports whether b, after the four bytes before (the latest
// lowest), holds a blank line that bareBlankEnd accepts.
func hasBareBlank(before uint32, b []byte) bool {
	for i := 0; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return false
		}
		i += j
		var w uint32
		for k := i - 3; k <= i; k++ {
			var c byte
			if k >= 0 {
				c = b[k]
			} else {
				c = byte(before >> (8 * uint(-k-1)))
			}
			w = w<<8 | uint32(c)
		}
		if bareBlankEnd(w) {
			return true
		}
	}
	return false
}

// bareBlankEnd reports whether the four bytes t (the latest lowest) end
// with "X\n\n", "X\r\n\n" or "X\n\r\n", where X is neither CR nor LF (nor
// NUL, which stands for no byte at the start of a connection).
func bareBlankEnd(t uint32) bool {
	b0, b1, b2, b3 := byte(t>>24), byte(t>>16), byte(t>>8), byte(t)
	if b3 != '\n' {
		return false
	}
	switch {
	case b2 == '\n' && b1 == '\r':
		return lineByte(b0) // X\r\n\n
	case b2 == '\n':
		return lineByte(b1) // X\n\n
	case b2 == '\r' && b1 == '\n':
		return lineByte(b0) // X\n\r\n
	}
	return false
}

// lineByte reports whether b can end a line that is not empty.
func lineByte(b byte) bool { return b != '\r' && b != '\n' && b != 0 }

// ServerWaits tells a data-path connection, or one served over a Layer on
// one, where its server stands: waiting for the next request (true: it may
// park, and what it reads starts that request; SetIdleWait, NextRequest) or
// reading a request's head (false; ReadingHead). Other connections are left
// alone. Only the serving goroutine may call it.
func ServerWaits(c net.Conn, idle bool) {
	var h *HeadWatch
	switch t := c.(type) {
	case *Conn:
		t.SetIdleWait(idle)
		h = &t.head
	case *PromptConn:
		h = &t.head
	case Layered:
		t.SockLayer().serverWaits(idle)
		return
	default:
		return
	}
	if idle {
		h.NextRequest()
	} else {
		h.ReadingHead()
	}
}

// HeadWatchOf returns the head watch of a data-path connection (a layered
// one's is its Layer's), or nil for any other connection.
func HeadWatchOf(c net.Conn) *HeadWatch {
	switch t := c.(type) {
	case *Conn:
		return &t.head
	case *PromptConn:
		return &t.head
	case Layered:
		return &t.SockLayer().head
	}
	return nil
}
