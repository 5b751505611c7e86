package sock

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PromptConn is a connection whose ReadFrom writes every piece of what it
// reads as soon as it is read, through a pooled buffer: bufio.Writer hands a
// streamed body of known length to its connection's ReadFrom once its buffer
// is empty, and a connection without one (netpoll's) would leave the tail of
// what arrived in the write buffer until more came. Connections that are
// not TCP (netpoll's) are wrapped in it; TCP ones are Conns, whose ReadFrom
// is the same.
type PromptConn struct {
	net.Conn
	Server
	head HeadWatch

	readEnds      int
	peeked        []byte // read by Peek, handed out first by Read
	closed        atomic.Bool
	writeDeadline atomic.Int64 // UnixNano, 0 for none

	// wrote counts the bytes the socket took through Write; counted says
	// they are all it ever took (DataPath wrapped it before its first
	// write), so that the socket's own count (SocketSent) against wrote
	// tells how much of a write netpoll gave up on went out.
	wrote   int64
	counted bool

	// lingerClose has Close linger while the peer still sends
	// (SetLingerClose); reset says a reset was asked for instead.
	lingerClose, reset atomic.Bool
}

// fdConn is a connection that shows its descriptor and whether its library
// still counts it as open (netpoll's).
type fdConn interface {
	Fd() int
	IsActive() bool
}

// Write writes p. netpoll counts a connection whose peer half-closed it as
// closed and refuses to write to it, although a client that half-closes
// after its request still waits for the answer (RFC 9112 9.6). Such a write
// goes to the descriptor itself: netpoll closes a connection it serves only
// once its OnRequest call returns, and the owner's whole use of the
// connection happens inside that call, so the descriptor is still this
// connection's. A write under way when the half-close arrives is given up
// too, after netpoll took all of p into its buffer and sent part of it: the
// socket's count of what it took (SocketSent, against wrote) says which
// part, and the rest goes to the descriptor.
func (c *PromptConn) Write(p []byte) (int, error) {
	fc, isFD := c.Conn.(fdConn)
	n, err := c.Conn.Write(p)
	if err == nil {
		c.wrote += int64(n)
		return n, nil
	}
	if IsTimeout(err) {
		// The peer stopped taking bytes (netpoll's write timeout: the
		// server's write stall): what is unsent is dropped, and the close
		// that follows resets the connection, as Conn.Write does.
		if isFD {
			_ = syscall.SetsockoptLinger(fc.Fd(), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
			c.reset.Store(true)
		}
		return n, err
	}
	if len(p) == 0 || c.closed.Load() || !isFD || n == 0 && fc.IsActive() {
		return n, err
	}
	taken := 0
	if n != 0 {
		// netpoll took p and sent some of it before giving up. (It may
		// not count the connection as closed yet: the poller drops the
		// descriptor's registration, which fails the flush, before it
		// marks the connection.)
		if !c.counted {
			return n, err
		}
		total, ok := SocketSent(fc.Fd())
		k := total - c.wrote
		if !ok || k < 0 || k > int64(len(p)) {
			return n, err
		}
		taken = int(k)
	}
	m, err := writeFD(fc.Fd(), p[taken:], c.writeDeadline.Load())
	c.wrote += int64(taken + m)
	return taken + m, err
}

// halfClosedWriteLimit bounds a write to a half-closed peer when no write
// deadline is set.
const halfClosedWriteLimit = time.Minute

// writeFD writes all of p to a non-blocking descriptor, waiting in poll(2)
// while its buffer is full, until the deadline (UnixNano; 0 for
// halfClosedWriteLimit from now).
func writeFD(fd int, p []byte, deadline int64) (int, error) {
	if deadline == 0 {
		deadline = time.Now().Add(halfClosedWriteLimit).UnixNano()
	}
	total := 0
	for total < len(p) {
		n, err := unix.Write(fd, p[total:])
		if n > 0 {
			total += n
		}
		switch err {
		case nil, unix.EINTR:
			continue
		case unix.EAGAIN:
			wait := time.Duration(deadline - time.Now().UnixNano())
			if wait <= 0 {
				return total, os.ErrDeadlineExceeded
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if _, err := unix.Poll(fds, int(wait/time.Millisecond)+1); err != nil && err != unix.EINTR {
				return total, os.NewSyscallError("poll", err)
			}
		default:
			return total, os.NewSyscallError("write", err)
		}
	}
	return total, nil
}

// Close closes the connection; no write goes to its descriptor after it.
func (c *PromptConn) Close() error {
	if c.closed.Swap(true) {
		return c.Conn.Close()
	}
	c.lingerStart()
	return c.Conn.Close()
}

// SetDeadline sets both deadlines, recording the write one. It ends a
// request head, as SetReadDeadline does.
func (c *PromptConn) SetDeadline(t time.Time) error {
	c.head.endHead()
	c.recordWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline sets the read deadline; it ends a request head
// (HeadWatch).
func (c *PromptConn) SetReadDeadline(t time.Time) error {
	c.head.endHead()
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline, recording it.
func (c *PromptConn) SetWriteDeadline(t time.Time) error {
	c.recordWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *PromptConn) recordWriteDeadline(t time.Time) {
	if t.IsZero() {
		c.writeDeadline.Store(0)
	} else {
		c.writeDeadline.Store(t.UnixNano())
	}
}

// Read reads from the connection, noting when the stream ends or fails.
func (c *PromptConn) Read(p []byte) (int, error) {
	if len(c.peeked) > 0 {
		n := copy(p, c.peeked)
		c.peeked = c.peeked[n:]
		c.head.saw(p[:n])
		return n, nil
	}
	if c.head.stuck(p) {
		return 0, ErrBareLFHead
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.head.saw(p[:n])
	}
	if err != nil && !IsTimeout(err) {
		c.readEnds++ // a deadline (os.ErrDeadlineExceeded is one) is no end
	}
	return n, err
}

// TakePeeked returns the bytes Peek read that no Read has handed out yet,
// and forgets them: for a caller that reads the connection under c from
// now on (tcpproxy's pipe, which writes them first).
func (c *PromptConn) TakePeeked() []byte {
	p := c.peeked
	c.peeked = nil
	return p
}

// ReadEnds counts what Conn.ReadEnds does.
func (c *PromptConn) ReadEnds() int { return c.readEnds }

// ReadFrom copies r to the connection until io.EOF.
func (c *PromptConn) ReadFrom(r io.Reader) (int64, error) { return copyPromptly(c, r) }

// copyPromptly copies r to w until io.EOF, writing each piece as soon as it
// is read.
//
// It starts with a streamBuffer and moves to a bulkBuffer after the first
// read that fills it. A stream of events (SSE) reads less than a buffer at a
// time and may sit in the copy for as long as the stream lasts, so it keeps
// the small buffer; a bulk body is read as fast as the socket delivers it,
// and the larger buffer halves its system calls (docs/ARCHITECTURE.md,
// "Bodies stream by default").
func copyPromptly(w io.Writer, r io.Reader) (int64, error) {
	pool := &streamBuffers
	bp := pool.Get().(*[]byte)
	defer func() { pool.Put(bp) }()
	buf := *bp
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr == nil && m != n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		if n == len(buf) && pool == &streamBuffers {
			pool.Put(bp)
			pool = &bulkBuffers
			bp = pool.Get().(*[]byte)
			buf = *bp
		}
	}
}

// The two sizes of copyPromptly's buffer. A bulk buffer stays within what
// is made as a raw system call (rawCallMax, socketCall), and a little under
// 64 KiB: loopback's MSS is 65,483 bytes (its MTU of 65,536 less the
// headers), so each 64 KiB write would send a full segment and then a
// 53-byte one of its own, which the receiver wakes up for. A 63 KiB write is
// one segment; a 1 MiB response through the gateway cost 25 % less CPU with
// it than with 64 KiB (BenchmarkReadFrom shows the same).
const (
	streamBuffer = 32 << 10
	bulkBuffer   = 63 << 10
)

var (
	streamBuffers = sync.Pool{New: func() any {
		b := make([]byte, streamBuffer)
		return &b
	}}
	bulkBuffers = sync.Pool{New: func() any {
		b := make([]byte, bulkBuffer)
		return &b
	}}
)

// IsTimeout reports whether err is a timeout (a net.Error that says so; a
// deadline's os.ErrDeadlineExceeded is one). It is apart from Read so that
// the error target escapes only on the error path.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
