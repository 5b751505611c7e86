package backend

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// h2ReplayMax bounds the start of a streamed request body that an
// HTTP/2 exchange keeps so that it can send the request again: a stream the
// upstream refused (RST_STREAM REFUSED_STREAM) or left unprocessed by its
// GOAWAY was not processed (RFC 9113 8.7), and x/net's transport sends such
// a request again when the body can start over (Request.GetBody). A body
// read whole before the exchange is in memory already and has no bound.
const h2ReplayMax = 64 << 10

// h2PumpChunk is the size of the pump's reads of the client's body.
const h2PumpChunk = 16 << 10

var pumpChunks = sync.Pool{New: func() any { b := make([]byte, h2PumpChunk); return &b }}

// upBody is a request body as an HTTP/2 exchange reads it, through views
// (upView): the first is the request's Body, and each sending again
// (replay, the request's GetBody) takes a new one from the body's start,
// superseding the last.
//
// A body streaming from the client is read by a pump, a goroutine of the
// body's own that reads the client's connection when a view asks for more,
// not by the views' reader, x/net's request writer. x/net ends a stream
// (a reset, its connection lost) by closing the body and waiting for its
// writer; a writer blocked in a read of a quiet client would hold the
// stream, and the response body with it, until the client sent more or
// its body idle timeout passed. A view's Close wakes its reader at once,
// from any goroutine, and leaves the client's connection alone: the
// pump's read goes on, and what it brings is kept for a view that sends
// the request again. detach ends the reading for good, on the exchange's
// goroutine: a read in progress is interrupted and waited for, and later
// reads fail, so that nothing reads the client's body (pooled by the
// server) once the exchange is over.
type upBody struct {
	mu   sync.Mutex
	cond sync.Cond // on mu: broadcast whenever the state below changes
	// src reads the client's connection (a body not read whole before
	// the exchange); nil: the body is all in buf.
	src  io.Reader
	intr BodyInterrupter
	// pumping: the pump runs; reading: it is in a read of src; want: a
	// view waits for bytes past read.
	pumping, reading, want bool
	detached               bool
	// done is closed when the pump ends.
	done chan struct{}
	// ended says a read returned the body's end or an error (endErr).
	ended  bool
	endErr error
	// read is how much of the body came from src. buf holds its bytes from
	// base to read: all of them (base 0) while the request may be sent
	// again, else those the current view has yet to take. keptLost: more
	// was read than h2ReplayMax; answered: the upstream answered, so the
	// request is not sent again.
	read, base int
	buf        []byte
	keptLost   bool
	answered   bool
	// chunk is the pump's read buffer (pooled); inChunk: buf is a part of
	// it.
	chunk   *[]byte
	inChunk bool
	// cur is the current view; gen its generation: older views read no
	// more.
	cur *upView
	gen int
	// req's trailer fields go to hr's at the end of the body.
	req *fasthttp.Request
	hr  *http.Request
}

// newUpBody is req's body for hr: its content when read whole, else its
// body stream.
func newUpBody(req *fasthttp.Request, hr *http.Request, intr BodyInterrupter) *upBody {
	b := &upBody{intr: intr, req: req, hr: hr}
	b.cond.L = &b.mu
	if req.IsBodyStream() {
		b.src = req.BodyStream()
	} else {
		b.buf, b.read, b.ended, b.endErr = req.Body(), len(req.Body()), true, io.EOF
	}
	return b
}

// upView is one reading of an upBody from its start.
type upView struct {
	b      *upBody
	gen    int
	off    int
	closed bool // by the transport (Close); guarded by b.mu
}

var (
	// errBodyDetached is what a read of a detached body (or a superseded
	// or closed view) gets.
	errBodyDetached = errors.New("request body no longer read: the exchange is over")
	// errNoReplay refuses a replay of a body that cannot start over.
	errNoReplay = errors.New("request body cannot be sent again: more of it was sent than is kept, or the upstream answered")
)

// view is the request's first Body.
func (b *upBody) view() *upView {
	b.cur = &upView{b: b}
	return b.cur
}

// keeping reports whether all that is read is kept, for sending again
// (mu held).
func (b *upBody) keeping() bool { return !b.keptLost && !b.answered }

// replay is the request's GetBody: a new view from the body's start, as
// long as all that was read of it is kept and the upstream has not
// answered.
func (b *upBody) replay() (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.detached || !b.keeping() {
		return nil, errNoReplay
	}
	b.gen++
	b.cur = &upView{b: b, gen: b.gen}
	b.cond.Broadcast()
	return b.cur, nil
}

// gotAnswer says the upstream answered: no replay from now on, and what
// was kept for one is let go as the current view takes it.
func (b *upBody) gotAnswer() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.answered = true
	b.trim()
	b.mu.Unlock()
}

// trim lets go of what the current view has taken, once nothing will be
// sent again (mu held).
func (b *upBody) trim() {
	if b.keeping() || b.cur == nil || b.cur.off <= b.base {
		return
	}
	n := min(b.cur.off, b.read) - b.base
	b.buf, b.base = b.buf[n:], b.base+n
	if len(b.buf) == 0 {
		b.buf, b.inChunk = nil, false
	}
}

func (v *upView) Read(p []byte) (int, error) {
	b := v.b
	b.mu.Lock()
	for {
		if b.detached || v.gen != b.gen || v.closed {
			b.mu.Unlock()
			return 0, errBodyDetached
		}
		if v.off < b.read {
			if v.off < b.base {
				// Sending again what was sent before and is no longer kept.
				b.mu.Unlock()
				return 0, errNoReplay
			}
			n := copy(p, b.buf[v.off-b.base:])
			v.off += n
			b.trim()
			b.mu.Unlock()
			return n, nil
		}
		if b.ended {
			err := b.endErr
			b.mu.Unlock()
			if err == io.EOF {
				b.copyTrailer()
			}
			return 0, err
		}
		b.want = true
		if !b.pumping {
			b.pumping, b.done = true, make(chan struct{})
			go b.pump()
		} else {
			b.cond.Broadcast()
		}
		b.cond.Wait()
	}
}

// Close wakes a read of the view in progress, which returns at once;
// later reads of it fail. The transport closes the body whenever it is
// done with it (the stream's end, a reset, its connection lost), from a
// goroutine of its own, and waits for its reader before it ends the
// stream. The client's connection is left alone: detach is the end.
func (v *upView) Close() error {
	b := v.b
	b.mu.Lock()
	v.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	return nil
}

// pump reads src on a view's demand until the body ends or is detached.
func (b *upBody) pump() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for !b.want && !b.detached && !b.ended {
			b.cond.Wait()
		}
		if b.detached || b.ended {
			b.pumping = false
			close(b.done)
			b.cond.Broadcast()
			return
		}
		if b.chunk == nil {
			b.chunk = pumpChunks.Get().(*[]byte)
		}
		b.trim()
		if b.inChunk {
			// Not all taken (a view asked, then was superseded): kept
			// apart, as the chunk takes the next read.
			b.buf, b.inChunk = append([]byte(nil), b.buf...), false
		}
		b.reading = true
		b.mu.Unlock()
		chunk := *b.chunk
		n, err := b.src.Read(chunk)
		b.mu.Lock()
		b.reading, b.want = false, false
		b.add(chunk[:n])
		if err != nil {
			b.ended, b.endErr = true, err
		}
		b.cond.Broadcast()
	}
}

// add appends what the pump read (mu held): to what is kept for sending
// again while it fits, else to what the current view has yet to take.
func (b *upBody) add(p []byte) {
	if len(p) == 0 {
		return
	}
	if b.keeping() && len(b.buf)+len(p) > h2ReplayMax {
		b.keptLost = true
		b.trim()
	}
	switch {
	case b.keeping() || len(b.buf) > 0:
		b.buf = append(b.buf, p...)
	default:
		// Nothing pending: the view takes the bytes from the chunk, which
		// the pump reads into again only once they are taken.
		b.buf, b.base, b.inChunk = p, b.read, true
	}
	b.read += len(p)
}

// copyTrailer gives hr the request's trailer fields, at the body's end.
func (b *upBody) copyTrailer() {
	if b.hr.Trailer == nil {
		return
	}
	for k := range b.hr.Trailer {
		if v := b.req.Header.Peek(k); v != nil {
			b.hr.Trailer[k] = []string{string(v)}
		}
	}
}

// detachPoll is how often a read that outlives the exchange is interrupted
// again while it is waited for (an interruption may land just before the
// read sets a deadline of its own).
const detachPoll = 50 * time.Millisecond

// detach ends the body's reading, on the exchange's goroutine: the pump's
// read in progress is interrupted (the BodyInterrupter) and waited for,
// and the pump ends.
func (b *upBody) detach() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.detached = true
	b.cond.Broadcast()
	unread := b.src != nil && !b.ended
	if !b.reading {
		b.release()
		b.mu.Unlock()
		if unread && b.intr != nil {
			// No read is in progress, but the rest of the client's body
			// is still on its way and nobody will read it: the client's
			// connection cannot carry another request after this one.
			b.intr.InterruptBody()
		}
		return
	}
	done := b.done
	b.mu.Unlock()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if b.intr != nil {
				b.intr.InterruptBody()
			}
			t.Reset(detachPoll)
		case <-done:
			b.mu.Lock()
			b.release()
			b.mu.Unlock()
			return
		}
	}
}

// release gives the pump's chunk back, once nothing reads into it or from
// it (mu held, detached, no read in progress).
func (b *upBody) release() {
	b.buf, b.inChunk = nil, false
	if b.chunk != nil {
		pumpChunks.Put(b.chunk)
		b.chunk = nil
	}
}
