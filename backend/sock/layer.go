package sock

import (
	"errors"
	"io"
	"net"
)

// Layer carries what sock does for a server connection into a TLS
// connection terminated on it (a tls.Conn reading and writing a Conn, or a
// PromptConn). The connection the server serves keeps a Layer, routes its
// Read, Close and read deadlines through it, and offers it (Layered), so
// that:
//   - the bare-LF head watch runs on the decrypted bytes, those the layer's
//     Read returns (the socket's watch would see records);
//   - the server's waits reach the socket (ServerWaits): an HTTP/1.1
//     connection idle between requests parks like a plain one. Read gives
//     ErrParked through crypto/tls, which does not keep it (it is a
//     temporary net.Error); the server's Close right after it holds the
//     socket and leaves the TLS connection, its keys and sequence numbers,
//     as they were (Close); the parker wakes the socket, and the server
//     serves the same TLS connection again (Park);
//   - the server's words are the socket's (ServerFields).
//
// A Conn under a Layer follows the TLS record framing of what it reads,
// from the connection's first byte: it parks only between whole records, so
// never while crypto/tls holds part of one (a request has begun then, though
// the server, which sees no byte of it yet, still waits for it as idle).
// With no part of a record there, crypto/tls holds
// no bytes it has not handed out, and the server (waiting for its next
// request's first byte) none either: a parked connection has nothing
// pending above the socket.
type Layer struct {
	under    net.Conn // the data-path connection
	sock     *Conn    // under, when it is a Conn (the only kind that parks)
	head     HeadWatch
	readEnds int
	// ahead is the stream's first byte, read by AwaitFirstByte, which
	// Read hands out first (hasAhead).
	ahead    byte
	hasAhead bool
}

// Layered is a connection served over a Layer: ServerFields, ServerWaits and
// HeadWatchOf reach the layer's through it.
type Layered interface {
	SockLayer() *Layer
}

// Init readies l for a TLS connection about to be terminated on under,
// before anything is read from under (the record framing is followed from
// the connection's first byte).
func (l *Layer) Init(under net.Conn) {
	l.under = under
	if c, ok := under.(*Conn); ok {
		l.sock = c
		c.records.on = true
	}
}

// Read reads p from r, the layer's decrypted stream (the tls.Conn), under
// the head watch, and counts the reads that found the stream's end or failed
// as Conn.ReadEnds does.
func (l *Layer) Read(r io.Reader, p []byte) (int, error) {
	if l.hasAhead && len(p) > 0 {
		p[0], l.hasAhead = l.ahead, false
		l.head.saw(p[:1])
		return 1, nil
	}
	if len(p) > 0 && l.head.stuck(p) {
		return 0, ErrBareLFHead
	}
	n, err := r.Read(p)
	if n > 0 {
		l.head.saw(p[:n])
	}
	if err != nil && err != ErrParked && !IsTimeout(err) {
		l.readEnds++
	}
	return n, err
}

// Parks reports whether the connection under the layer parks when idle.
func (l *Layer) Parks() bool { return l.sock != nil && l.sock.park.after > 0 }

// AwaitFirstByte reads the first byte of r, the layer's decrypted stream,
// as an idle wait: the connection parks if nothing comes for a check period
// (ErrParked, and the server's Close then holds it for Park). Otherwise the
// byte is kept for Read, or the error is the read's (its deadline, the
// stream's end). The server calls it once the handshake is done, before its
// HTTP server reads: a TLS connection opened ahead of use (a browser's
// preconnect, a client's warmed pool) then holds no goroutine while it
// waits, as a plain one does (Conn.AwaitFirstByte), and the HTTP server
// never sees ErrParked on a connection's first request (what fasthttp does
// with a first request that reads nothing depends on its settings). Only
// the serving goroutine may call it.
func (l *Layer) AwaitFirstByte(r io.Reader) error {
	l.serverWaits(true)
	var b [1]byte
	n, err := r.Read(b[:])
	if l.sock != nil {
		l.sock.SetIdleWait(false)
	}
	if n == 1 {
		// An error with the byte (the stream's end, read ahead by crypto/tls)
		// comes again at the next read.
		l.ahead, l.hasAhead = b[0], true
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// ReadEnds is Conn.ReadEnds for the decrypted stream.
func (l *Layer) ReadEnds() int { return l.readEnds }

// EndHead is to be called when the server sets a read deadline on the
// connection: it ends a request head, as Conn.SetReadDeadline does.
func (l *Layer) EndHead() { l.head.endHead() }

// Close closes the connection through the layer's close (the tls.Conn's,
// which sends close_notify), except for the server's close right after Read
// returned ErrParked: the socket is then held for Park, and the layer is
// left open and untouched (crypto/tls's Close would make it unusable).
func (l *Layer) Close(layer io.Closer) error {
	if l.sock != nil && l.sock.holdPending() {
		return nil
	}
	return layer.Close()
}

// Held is Parkable's Held for the connection served over the layer.
func (l *Layer) Held() bool { return l.sock != nil && l.sock.Held() }

// Park is Parkable's Park for outer, the connection served over the layer:
// the handler gets outer back, and the parker closes it through outer's
// Close at its deadline.
func (l *Layer) Park(outer net.Conn, h ParkHandler) error {
	if l.sock == nil {
		return errNoParking
	}
	return l.sock.parkAs(outer, h)
}

var errNoParking = errors.New("sock: the connection under the layer does not park")

// serverWaits is ServerWaits for a layered connection: the idle wait is
// the socket's (it parks), the head watch the layer's.
func (l *Layer) serverWaits(idle bool) {
	if l.sock != nil {
		l.sock.SetIdleWait(idle)
	}
	if idle {
		l.head.NextRequest()
	} else {
		l.head.ReadingHead()
	}
}

// recordHeaderLen is the length of a TLS record's header: type, version,
// and the length of what follows.
const recordHeaderLen = 5

// recordWatch follows the TLS record framing of the bytes a Conn reads, so
// that it parks only at a record's end (Layer).
type recordWatch struct {
	on   bool
	head int // bytes of the current record's header read (0 at a record's start)
	size int // the header's length field, as far as read
	left int // bytes of the current record's body still to read
}

// saw follows the bytes a read returned. It hops from header to header:
// a few steps per record, whatever the record's size.
func (w *recordWatch) saw(p []byte) {
	for len(p) > 0 {
		if w.left > 0 {
			k := min(w.left, len(p))
			w.left -= k
			p = p[k:]
			continue
		}
		w.size = (w.size<<8 | int(p[0])) & 0xffff // the last two bytes are the length
		w.head++
		p = p[1:]
		if w.head == recordHeaderLen {
			w.head, w.left, w.size = 0, w.size, 0
		}
	}
}

// whole reports whether the bytes read so far end at a record's end (or
// the watch is off).
func (w *recordWatch) whole() bool { return !w.on || w.head == 0 && w.left == 0 }
