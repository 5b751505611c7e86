package tcpproxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cloudwego/netpoll"
	"golang.org/x/sys/unix"

	"github.com/relaygate/gateway/backend/sock"
)

// end is one of a pipe's connections, with what lies under it.
type end struct {
	side Side
	conn net.Conn // as given: closed at the end
	io   net.Conn // read and written by Copy: conn, or what a sock.PromptConn wraps

	tcp *net.TCPConn // the TCP socket of Go's net package under io, if any
	tls *tls.Conn    // io, when it is terminated TLS
	np  netpoll.Connection
	fd  int // the descriptor of a netpoll connection under io (-1: none)

	raw syscall.RawConn // tcp's, for the idle check (set by startLimits)

	// mu guards closed and alt: a netpoll connection's descriptor is
	// netpoll's to close, and is only used while closed is false.
	mu      sync.Mutex
	closed  bool
	aborted bool
	// alt writes to a netpoll connection's socket once netpoll refuses
	// to (see npWrite).
	alt *net.TCPConn
	// sent counts the bytes written to a netpoll connection, and
	// writtenBase is the socket's count of them when the pipe began.
	sent, writtenBase int64

	// shut is set once the sending direction is closed: a socket's state
	// tells a reset from a FIN only until then (wasReset).
	shut atomic.Bool
	// eof is set once the peer ended its sending in order (its FIN, read
	// to the end).
	eof atomic.Bool
}

func (e *end) init(c net.Conn, s Side) {
	e.side, e.conn, e.io, e.fd = s, c, c, -1
	if h := sock.HeadWatchOf(c); h != nil {
		h.Stop() // what it reads is not HTTP
	}
	if pc, ok := c.(*sock.PromptConn); ok {
		e.io = pc.Conn
	}
	switch t := e.io.(type) {
	case *tls.Conn:
		e.tls = t
		e.tcp, e.fd = socketOf(t.NetConn())
	case netpoll.Connection:
		e.np = t
		_, e.fd = socketOf(t)
	default:
		e.tcp, e.fd = socketOf(t)
	}
	if e.np != nil {
		e.writtenBase, _ = e.written()
	}
}

// socketOf returns the TCP connection under c, or the descriptor of the
// netpoll connection under c.
func socketOf(c net.Conn) (*net.TCPConn, int) {
	switch t := c.(type) {
	case *sock.Conn:
		return t.TCPConn, -1
	case *net.TCPConn:
		return t, -1
	case *sock.PromptConn:
		return socketOf(t.Conn)
	case interface{ Fd() int }: // netpoll's
		return nil, t.Fd()
	}
	return nil, -1
}

// control runs f on the socket's descriptor; false if there is none (or it
// is closed).
func (e *end) control(f func(fd int)) bool {
	if e.tcp != nil {
		raw := e.raw
		if raw == nil {
			var err error
			if raw, err = e.tcp.SyscallConn(); err != nil {
				return false
			}
		}
		return raw.Control(func(fd uintptr) { f(int(fd)) }) == nil
	}
	if e.fd < 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	f(e.fd)
	return true
}

// tcpInfo returns the socket's TCP_INFO.
func (e *end) tcpInfo() (*unix.TCPInfo, bool) {
	var info *unix.TCPInfo
	var err error
	ok := e.control(func(fd int) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	return info, ok && err == nil
}

// kernelBytes counts the bytes the socket received and the bytes its peer
// acknowledged: they move whenever data moves either way on it, whatever
// moves the data, at no cost per read.
func (e *end) kernelBytes() uint64 {
	if info, ok := e.tcpInfo(); ok {
		return info.Bytes_received + info.Bytes_acked
	}
	return 0
}

// wasReset reports whether the socket was reset by its peer: netpoll ends a
// stream the same way for a FIN and a RST, and the socket's state tells
// them apart (CLOSE after a RST, CLOSE_WAIT after a FIN), as long as this
// side did not send its own FIN: after a FIN both ways the state is CLOSE
// too (the socket went to TIME_WAIT), so a reset after this side's
// CloseWrite reads as an orderly end.
func (e *end) wasReset() bool {
	if e.shut.Load() {
		return false
	}
	info, ok := e.tcpInfo()
	return ok && info.State == unix.BPF_TCP_CLOSE
}

// readErr turns the error that ended a read of the socket into io.EOF for an
// orderly end.
func (e *end) readErr(err error) error {
	if e.np != nil && errors.Is(err, netpoll.ErrEOF) {
		if e.wasReset() {
			return errPeerReset
		}
		return io.EOF
	}
	return err
}

// writeErr names a netpoll write failure that was a reset.
func (e *end) writeErr(err error) error {
	if e.np != nil && errors.Is(err, netpoll.ErrConnClosed) && e.wasReset() {
		return errPeerReset
	}
	return err
}

var errPeerReset = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("recvmsg", syscall.ECONNRESET)}

// write writes all of p.
func (e *end) write(p []byte) (int, error) {
	if e.np == nil {
		return e.io.Write(p)
	}
	return e.npWrite(p, false)
}

// npWrite writes all of p to a netpoll connection: through its writer
// (Write, a copy, or with nocopy WriteBinary, which links p into the output
// buffer: p must stay as it is until npWrite returns) and Flush, or once
// netpoll refuses to, through altConn.
//
// netpoll takes a FIN from its peer for the end of the connection: a write
// waiting on a full socket buffer then fails, and what netpoll had not sent
// stays in its output buffer, never to be sent. The socket says how much it
// took (the bytes acknowledged and those in its send queue, against e.sent),
// and the rest of p goes through altConn; if the peer is gone, that write
// fails as netpoll's should have.
func (e *end) npWrite(p []byte, nocopy bool) (int, error) {
	done := 0
	if e.alt == nil && e.np.IsActive() {
		var err error
		if nocopy {
			w := e.np.Writer()
			if _, err = w.WriteBinary(p); err == nil {
				err = w.Flush()
			}
		} else {
			_, err = e.np.Write(p)
		}
		if err == nil {
			e.sent += int64(len(p))
			return len(p), nil
		}
		if e.isClosed() {
			return 0, err
		}
		// Whatever failed (the wait for the socket to drain, or moving
		// the socket's poller registration, which netpoll may already have
		// dropped on its way to closing the connection), netpoll no longer
		// sends from this connection.
		k, ok := e.written()
		if !ok || k < e.sent || k > e.sent+int64(len(p)) {
			return 0, e.writeErr(err)
		}
		done = int(k - e.sent)
		e.sent = k
		p = p[done:]
	}
	alt, err := e.altConn()
	if err != nil {
		return done, err
	}
	n, err := alt.Write(p)
	e.sent += int64(n)
	return done + n, err
}

// written is how many bytes the socket took from this pipe's writes: those
// its peer acknowledged and those in its send queue, since the pipe began
// (writtenBase).
func (e *end) written() (int64, bool) {
	var n int64
	var ok bool
	if !e.control(func(fd int) { n, ok = sock.SocketSent(fd) }) || !ok {
		return 0, false
	}
	return n - e.writtenBase, true
}

// altConn returns a connection that writes to a netpoll connection's socket
// through Go's poller. netpoll takes a peer's FIN for the end of the
// connection and refuses to write to it from then on (and has no
// CloseWrite), although a peer that half-closed may still be reading: the
// other direction of a pipe goes on through a duplicate of the descriptor.
func (e *end) altConn() (*net.TCPConn, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.alt != nil {
		return e.alt, nil
	}
	if e.closed || e.fd < 0 {
		return nil, net.ErrClosed
	}
	tc, err := sock.DupTCP(e.fd)
	if err != nil {
		return nil, err
	}
	e.alt = tc
	return tc, nil
}

// closeWrite closes the sending direction (FIN; a TLS close_notify first).
// A connection that cannot half-close says so (errNoHalfClose).
func (e *end) closeWrite() error {
	e.shut.Store(true)
	if e.tls != nil {
		if err := e.tls.CloseWrite(); err != nil {
			return err
		}
	}
	if e.tcp != nil {
		return e.tcp.CloseWrite()
	}
	if e.fd >= 0 {
		var err error
		if !e.control(func(fd int) { err = unix.Shutdown(fd, unix.SHUT_WR) }) {
			return net.ErrClosed
		}
		if err != nil {
			return os.NewSyscallError("shutdown", err)
		}
		return nil
	}
	if cw, ok := e.io.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

// errNoHalfClose: the connection cannot close its sending direction alone.
var errNoHalfClose = errors.New("tcpproxy: connection cannot half-close")

// abort makes the coming close a reset (SO_LINGER 0): it sends RST instead
// of FIN, and TLS sends no close_notify.
func (e *end) abort() {
	linger := &unix.Linger{Onoff: 1, Linger: 0}
	e.control(func(fd int) { _ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, linger) })
	e.mu.Lock()
	e.aborted = true
	e.mu.Unlock()
}

func (e *end) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// close closes the connection (and the duplicate of a netpoll one).
func (e *end) close() {
	e.mu.Lock()
	e.closed = true
	alt, aborted := e.alt, e.aborted
	e.mu.Unlock()
	if alt != nil {
		_ = alt.Close()
	}
	if aborted && e.tls != nil {
		_ = e.tls.NetConn().Close()
		return
	}
	_ = e.conn.Close()
}
