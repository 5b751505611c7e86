package server

import (
	"bufio"
	"errors"
	"net"
	"sync"

	"golang.org/x/net/http2"

	"github.com/relaygate/gateway/backend/sock"
)

// Parking an idle HTTP/2 connection, as an idle HTTP/1.1 one parks
// (sock.EnableParking): a connection with no stream open, no handler
// running and nothing read of a next frame, that received nothing for a
// whole check period, gives up its reader goroutine (its stack), its read
// buffer and its framer, and waits in the parker's epoll set. What the
// connection is keeps: its settings, windows, HPACK tables (they must stay
// in step with the client's), counters and timer. The timer still runs
// while parked: the idle timeout, maxConnectionDuration and drain send
// GOAWAY and end the gateway's side as for an unparked connection (the
// client's close then wakes it, or the linger closes it), and a keepalive
// ping goes out and its answer wakes the connection. Bytes wake it: a new
// reading turn (resume) takes a buffer and a framer and goes on where the
// last one stopped, at a frame's start.
//
// sock decides when, in the reader's Read, at a park check: the connection
// asks idleForPark there (sock.SetIdleCheck), since whether it is idle
// depends on handlers ending on their own goroutines. A connection served
// after an h2c upgrade (its socket behind fasthttp's hijacked connection)
// does not park.

// h2ReadBuffer is the size of a reading turn's buffer.
const h2ReadBuffer = 16 << 10

// h2Readers are the read buffers of reading turns.
var h2Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, h2ReadBuffer) }}

// acquireReader gives a reading turn its buffer and framer.
func (hc *h2Conn) acquireReader() {
	hc.br = h2Readers.Get().(*bufio.Reader)
	hc.br.Reset(h2Reader{hc})
	hc.fr = http2.NewFramer(nil, hc.br)
	hc.fr.SetMaxReadFrameSize(hc.set.frameSize)
	hc.fr.SetReuseFrames()
	hc.atFrame = false
}

// releaseReader ends a reading turn: its buffer goes back, its framer
// (and the frame buffer it grew) to the collector.
func (hc *h2Conn) releaseReader() {
	if hc.br == nil {
		return
	}
	hc.br.Reset(nil)
	h2Readers.Put(hc.br)
	hc.br, hc.fr = nil, nil
}

// enableParking has the connection park when idle, where its socket parks
// (sock.SetIdleCheck; a no-op on others).
func (hc *h2Conn) enableParking() { sock.SetIdleCheck(hc.conn, hc.idleForPark) }

// idleForPark is the connection's answer to sock's park check, asked on
// the reader's goroutine inside its Read: whether the reader waits for a
// frame's first byte with no stream open, no handler running or queued,
// no header block under way, and the client's preface read.
func (hc *h2Conn) idleForPark() bool {
	if !hc.atFrame || !hc.sawSettings || hc.block.id != 0 {
		return false
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return !hc.dead && !hc.closing && len(hc.streams) == 0 && hc.handlers == 0 && len(hc.queue) == 0
}

// endReading ends a reading turn that ended with err: a connection sock
// parked (sock.ErrParked) is handed to the parker, any other is torn down.
// It reports whether the connection parked.
func (hc *h2Conn) endReading(err error) bool {
	if errors.Is(err, sock.ErrParked) {
		hc.releaseReader()
		if hc.b.parkH2(hc) {
			return true
		}
		err = net.ErrClosed
	}
	hc.teardown(err)
	return false
}

// resume is a parked connection's next reading turn, on a goroutine of its
// own, from the frame whose bytes woke it.
func (hc *h2Conn) resume() {
	hc.acquireReader()
	if !hc.endReading(hc.readFrames()) {
		hc.b.h2Ended(hc)
	}
}

// parkH2 hands an HTTP/2 connection whose Read returned sock.ErrParked to
// the parker; it reports false when it closed it instead (it is being
// closed, or parking failed). The connection stays in service for drain,
// which waits for it to close after its GOAWAY.
func (b *bind) parkH2(hc *h2Conn) bool {
	p, ok := hc.conn.(sock.Parkable)
	if !ok {
		return false
	}
	p.Close() // the close right after ErrParked: it holds the socket
	hc.mu.Lock()
	closing := hc.dead || hc.closing
	if !closing {
		hc.shedOutput()
	}
	hc.mu.Unlock()
	// A close from elsewhere (closeConn) in that instant may have been the
	// one that held it: closing says so.
	if !p.Held() || closing {
		p.Close()
		return false
	}
	b.metrics.ConnParked()
	if err := p.Park(h2Parking{hc}); err != nil {
		b.metrics.ConnUnparked()
		p.Close()
		return false
	}
	return true
}

// shedOutput lets a connection about to park give up what its output side
// grew (mu held): the writing framer keeps a buffer as large as the
// largest frame it wrote (a whole DATA frame, up to the client's frame
// size) for as long as it lives, and a large header block leaves hbuf that
// size. A parked connection writes little (GOAWAY, PING) until it wakes;
// a new framer starts small.
func (hc *h2Conn) shedOutput() {
	hc.fw = http2.NewFramer(h2Frames{hc}, nil)
	if cap(hc.hbuf) > h2KeptHeaderBlock {
		hc.hbuf = nil
	}
}

// h2KeptHeaderBlock is the largest header block buffer a parked
// connection keeps.
const h2KeptHeaderBlock = 1 << 10

// h2Ended is the bookkeeping of an HTTP/2 connection's end that parked
// (serveH2's caller accounts for one that never did).
func (b *bind) h2Ended(hc *h2Conn) {
	b.forgetH2(hc)
	b.connClosed(hc.conn)
}

// forgetH2 takes an ended HTTP/2 connection out of the bind's set (which
// drain sends GOAWAY to).
func (b *bind) forgetH2(hc *h2Conn) {
	b.mu.Lock()
	delete(b.h2conns, hc)
	b.mu.Unlock()
}

// h2Parking is a parked HTTP/2 connection's sock.ParkHandler.
type h2Parking struct{ hc *h2Conn }

// Wake serves the connection again: bytes came, or the client closed.
func (p h2Parking) Wake(net.Conn) {
	p.hc.b.metrics.ConnUnparked()
	go p.hc.resume()
}

// Closed ends a connection closed while parked (its linger after GOAWAY,
// an unanswered keepalive ping, drain's deadline).
func (p h2Parking) Closed(net.Conn) {
	p.hc.b.metrics.ConnUnparked()
	p.hc.teardown(net.ErrClosed)
	p.hc.b.h2Ended(p.hc)
}
