// Package sock owns the TCP connections of the data path: reads and writes go
// through the Go poller as recv(2) and send(2), which skip the file layer that
// read(2) and write(2) cross on every call. Where a write is followed by a
// read of the answer (a request sent upstream), the write can wait for the
// answer itself, so the read that follows finds data instead of EAGAIN.
// Read deadlines are lazy: a server moves them on every request, and the
// poller's timer follows only when a deadline moves earlier.
//
// Per proxied request that is one system call fewer than net.TCPConn makes
// (the upstream read returning EAGAIN), cheaper ones for the rest, and no
// timer updates; see docs/ARCHITECTURE.md, "Sockets".
package sock

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/relaygate/gateway/pool/sockpeek"
)

// Conn is a TCP connection read and written with recv/send. The embedded
// *net.TCPConn provides everything else (addresses, deadlines, CloseWrite,
// WriteTo for splicing tunnels); Read, Write and ReadFrom are Conn's own.
//
// A Conn is used by one reader and one writer at a time, as net.Conn allows,
// but AwaitAfterWrite (which reads while writing) needs both to be the same
// goroutine.
type Conn struct {
	*net.TCPConn
	raw syscall.RawConn
	fd  int // the socket, for HangupWatch (-1 if unknown)

	// Arguments and results of the raw functions, kept here so that the
	// function values below are bound once and calls allocate nothing.
	rbuf  []byte
	rn    int
	rerr  syscall.Errno
	wbuf  []byte
	wdone bool // the write step ran once (await mode)
	werr  syscall.Errno

	readFn, writeFn, writeAwaitFn, peekFn func(fd uintptr) bool
	peekStale, peekWait                   bool
	peekBuf                               [1]byte

	// await is set by AwaitAfterWrite for the next Write.
	await bool

	// writeStall bounds each wait of Write for the peer to take bytes
	// (SetWriteStall); stallArmed says a wait of the Write in progress set
	// the write deadline for it. explicitAt is the write deadline set by
	// SetWriteDeadline or SetDeadline (UnixNano, 0 for none), which the
	// stall leaves alone while it is set.
	writeStall time.Duration
	stallArmed bool
	explicitAt atomic.Int64

	// lingerClose has Close linger while the peer still sends
	// (SetLingerClose), or owes bytes (peerOwes, SetPeerOwes); reset says
	// a reset was asked for instead (a write stall, Abort), which Close
	// keeps.
	lingerClose, peerOwes atomic.Bool
	reset                 atomic.Bool
	lingered              atomic.Bool // a lingering close began: later closes do nothing

	// answerWatch makes a Write that must wait for the peer to take bytes
	// look first, and every answerTick while it waits, whether the peer
	// sent something (WatchAnswer); answered says it had. tickArmed says a
	// wait set the write deadline for the next look.
	answerWatch, answered, tickArmed bool
	answerBuf                        [12]byte // what the look peeks at

	// received counts the bytes read (parking compares it between checks).
	received int64

	// Read deadlines are lazy: readDeadline is the one asked for, poller the
	// one the poller holds (UnixNano, 0 for none). See SetReadDeadline.
	readDeadline atomic.Int64
	poller       atomic.Int64

	Server

	// readEnds counts reads that found the end of the stream or failed.
	readEnds int

	park    parkFields
	head    HeadWatch
	records recordWatch // under a TLS Layer
}

// Server holds what the server serving a data-path connection keeps in the
// connection itself (a word of the connection's own needs no lock or map);
// sock never reads it, but for the addresses a PROXY protocol header gave
// (RemoteAddr, LocalAddr). Conn and PromptConn embed it.
type Server struct {
	// Peer and Local, when set, are the connection's addresses as a PROXY
	// protocol header named them; RemoteAddr and LocalAddr return them in
	// place of the socket's. Set before the connection is served.
	Peer, Local net.Addr
	// ServerState is the connection's state as the server records it (it
	// changes twice per request).
	ServerState atomic.Int32
	// ServerOpened is when the server began serving the connection, on a
	// clock of its choosing.
	ServerOpened time.Duration
	// ServerClassified is set once the server has decided how to serve
	// the connection (which protocol, which listener).
	ServerClassified bool
	// ServerPending is what the server left to do once the connection's
	// current response is out (its record), nil for nothing: only the
	// goroutine serving the connection touches it. ServerPendingSet says
	// whether it holds something, for other goroutines to look at.
	ServerPending    any
	ServerPendingSet atomic.Bool

	hangup HangupWatch // Hangups
	peer   peerHangup  // WatchPeerHangup
}

// ServerFields returns the server's fields of a data-path connection, or
// nil for any other connection.
func ServerFields(c net.Conn) *Server {
	switch t := c.(type) {
	case *Conn:
		return &t.Server
	case *PromptConn:
		return &t.Server
	case Layered:
		// A connection served over a Layer (terminated TLS).
		return ServerFields(t.SockLayer().under)
	case interface{ ServerFields() *Server }:
		// A connection standing for a data-path one (an HTTP/2 stream, a
		// CONNECT tunnel).
		return t.ServerFields()
	}
	return nil
}

// New wraps a TCP connection. It fails only when the connection has no file
// descriptor (it was closed).
func New(c *net.TCPConn) (*Conn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	sc := &Conn{TCPConn: c, raw: raw, fd: -1}
	_ = raw.Control(func(fd uintptr) { sc.fd = int(fd) })
	sc.readFn = sc.recvStep
	sc.writeFn = sc.sendStep
	sc.writeAwaitFn = sc.sendAwaitStep
	sc.peekFn = sc.peekStep
	return sc, nil
}

// Wrap returns c as a *Conn when it is a TCP connection, and c itself
// otherwise (or if wrapping fails).
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	sc, err := New(tc)
	if err != nil {
		return c
	}
	return sc
}

// DataPath returns c as the data path uses it: a *Conn for a TCP connection,
// a PromptConn for any other (netpoll's), so that every connection writes
// streamed bodies through at once.
func DataPath(c net.Conn) net.Conn {
	if sc := Wrap(c); sc != c {
		return sc
	}
	// A connection just accepted: nothing was written to it yet.
	return &PromptConn{Conn: c, counted: true}
}

// AwaitAfterWrite, when on, makes the next Write, once it has sent everything, wait
// until the connection is readable before returning: the caller writes the
// last of a request and reads its answer next. Waiting inside the write
// keeps the poller's readiness from being reset between the two, so the
// read that follows finds data instead of EAGAIN. Only the goroutine that
// will do that read may call it. The wait ends early on the read deadline;
// the Write then still reports success, and the read reports the timeout.
//
// Bytes that reached the connection before the Write, and that the poller has
// already reported, do not end the wait (the poller's readiness is reset when
// the wait starts). Use it where nothing can arrive unasked: the next
// response on a keep-alive connection used moments ago.
// Turning it off cancels a request no Write has used.
func (c *Conn) AwaitAfterWrite(on bool) { c.await = on }

// SetReadDeadline sets the read deadline lazily. Servers move it on every
// request (an idle timeout, then a header timeout, then a body timeout), and
// each move of the poller's timer costs more than a system call here. So the
// poller's deadline only ever moves earlier: a later deadline is recorded,
// and when the poller's earlier one fires, Read finds it was not the real
// one, sets the poller to the recorded deadline and goes on reading. With
// the server's pattern the poller's timer moves about once a minute per
// connection instead of three times per request. Clearing the deadline is
// passed on at once. Any read deadline ends a request head (HeadWatch).
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.head.endHead()
	if t.IsZero() {
		c.readDeadline.Store(0)
		if c.park.after > 0 && c.poller.Load() != 0 {
			return nil // the poller's timer runs on for the park checks
		}
		if c.poller.Swap(0) == 0 {
			return nil
		}
		return c.TCPConn.SetReadDeadline(t)
	}
	n := t.UnixNano()
	c.readDeadline.Store(n)
	return c.pollBy(n)
}

// pollBy makes the poller's timer fire no later than n (UnixNano): it is
// moved only if it is unset or later. One that fires early is re-armed by
// whoever was waiting (rearm).
func (c *Conn) pollBy(n int64) error {
	if p := c.poller.Load(); p != 0 && p <= n {
		return nil
	}
	return c.setPoller(n)
}

// setPoller gives the poller's timer the deadline n (UnixNano; 0 for none).
func (c *Conn) setPoller(n int64) error {
	c.poller.Store(n)
	var t time.Time
	if n != 0 {
		t = time.Unix(0, n)
	}
	return c.TCPConn.SetReadDeadline(t)
}

// SetDeadline sets the read deadline (lazily) and the write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetWriteDeadline sets the write deadline. While one is set, the write
// stall (SetWriteStall) leaves the deadline alone.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		c.explicitAt.Store(0)
	} else {
		c.explicitAt.Store(t.UnixNano())
	}
	return c.TCPConn.SetWriteDeadline(t)
}

// WatchAnswer, while on, has a Write that must wait for the peer to take
// bytes look whether the peer has sent something meanwhile: before each
// wait, and every answerTick while it waits. If it has sent a refusal (an
// HTTP/1.x response whose status is not 1xx, 2xx or 3xx: a 413 or a 401
// before the end of the request being written), or ended the stream, the
// Write stops and returns ErrPeerAnswered, and Answered
// reports it until WatchAnswer is called again. A client writing a request
// body to a server that answers early (a 413, a 401) and then stops
// reading would otherwise wait until the server resets the connection,
// which takes the answer with it. A Write that never waits costs nothing
// more. Only the goroutine that writes may call it; it is for plain TCP
// connections (under TLS, bytes from the peer need not be an answer).
func (c *Conn) WatchAnswer(on bool) { c.answerWatch, c.answered = on, false }

// Answered reports whether a Write stopped because the peer had sent
// something (WatchAnswer).
func (c *Conn) Answered() bool { return c.answered }

// ErrPeerAnswered is the error of a Write that WatchAnswer stopped.
var ErrPeerAnswered = errors.New("sock: the peer answered before the write's end")

// answerTick is how often a Write waiting under WatchAnswer looks again.
const answerTick = 20 * time.Millisecond

// SetWriteStall bounds how long each Write may wait for the peer to take
// bytes (0: no bound, the default): a peer that stops reading fails the
// Write with os.ErrDeadlineExceeded once its socket buffer stayed full that
// long, as nginx's send_timeout does. Every wait starts the bound afresh,
// so a slow reader that keeps taking bytes is served to the end. A write
// deadline set with SetWriteDeadline takes precedence while it is set.
// Only the goroutine that writes may call it.
func (c *Conn) SetWriteStall(d time.Duration) { c.writeStall = d }

// rearm reports whether a deadline error from the poller came early, and if
// so moves the poller's deadline to the one asked for (or to the next park
// check, if that comes first: parkCheck). park reports that the connection
// parks instead.
func (c *Conn) rearm(err error) (again, park bool) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false, false
	}
	want := c.readDeadline.Load()
	now := time.Now().UnixNano()
	if want != 0 && now >= want {
		return false, false // the real one
	}
	park, next := c.parkCheck(want, now)
	if park {
		return false, true
	}
	return c.setPoller(next) == nil, false
}

// syncDeadline gives the poller the deadline asked for, for reads that do
// not go through Read (splicing in WriteTo).
func (c *Conn) syncDeadline() {
	if want := c.readDeadline.Load(); c.poller.Load() != want {
		_ = c.setPoller(want)
	}
}

// WriteTo copies the connection to w (splicing where it can), under the
// read deadline asked for.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	c.syncDeadline()
	return c.TCPConn.WriteTo(w)
}

// Read reads with recv(2), waiting in the poller while nothing is there.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.head.stuck(p) {
		return 0, ErrBareLFHead
	}
	c.rbuf = p
	err := c.raw.Read(c.readFn)
	for err != nil {
		again, park := c.rearm(err)
		if park {
			c.rbuf = nil
			c.park.state.Store(parkPending)
			return 0, ErrParked
		}
		if !again {
			break
		}
		err = c.raw.Read(c.readFn)
	}
	c.rbuf = nil
	if err != nil {
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			c.readEnds++
		}
		return 0, c.opError("read", err)
	}
	if c.rerr != 0 {
		e := c.rerr
		c.rerr = 0
		c.readEnds++
		return 0, c.opError("read", os.NewSyscallError("recvfrom", e))
	}
	if c.rn == 0 {
		c.readEnds++
		return 0, io.EOF
	}
	c.received += int64(c.rn)
	c.head.saw(p[:c.rn])
	if c.records.on {
		c.records.saw(p[:c.rn])
	}
	return c.rn, nil
}

// ReadEnds counts the reads that found the end of the stream (the peer
// closed or half-closed the connection) or failed other than by a deadline.
// A reader above a buffer learns from it whether a read of its own reached
// the connection's end or was served from what the buffer held. Only the
// reading goroutine may ask.
func (c *Conn) ReadEnds() int { return c.readEnds }

// sendThenWait sends p inside a raw read and, once all of it is sent, waits
// there until the connection is readable. It returns what is left unsent
// (the socket buffer filled up, or the wait could not start: a lazy read
// deadline already past) for the plain write to finish, the wait's own
// error, and the send's.
func (c *Conn) sendThenWait(p []byte) (rest []byte, waitErr, sendErr error) {
	c.wbuf, c.wdone = p, false
	waitErr = c.raw.Read(c.writeAwaitFn)
	rest, c.wbuf = c.wbuf, nil
	return rest, waitErr, c.sendErr()
}

// sendErr returns, as a write error, the error send recorded, and clears it.
func (c *Conn) sendErr() error {
	if c.werr == 0 {
		return nil
	}
	e := c.werr
	c.werr = 0
	return c.opError("write", os.NewSyscallError("sendto", e))
}

// rawCallMax is the largest transfer made without telling the Go scheduler
// about the system call. See socketCall.
const rawCallMax = 64 << 10

// socketCall makes recvfrom(2) or sendto(2) on the non-blocking socket fd
// with buf, which must not be empty.
//
// The socket never blocks, so a call of up to rawCallMax bytes is CPU work
// of a few microseconds, and it is made as a raw system call: the goroutine
// keeps its P instead of entering the syscall state. Entering that state costs
// more than the bookkeeping: the runtime's monitor thread, seeing a P in a
// system call on two of its ticks (20 µs apart under load), hands the P to
// another thread and keeps waking every 20 µs. On a loaded core, where the
// call is often descheduled while the peer it woke runs, that measured about
// 1.5 µs of CPU per proxied request (monitor sleeps, futex wakeups,
// sched_yield, timer interrupts). Larger transfers keep the ordinary path so
// that a long copy cannot hold a P from the scheduler.
func socketCall(trap, fd uintptr, buf []byte, flags uintptr) (int, syscall.Errno) {
	if len(buf) <= rawCallMax {
		n, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), flags, 0, 0)
		return int(n), e
	}
	n, _, e := syscall.Syscall6(trap, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), flags, 0, 0)
	return int(n), e
}

// Stale reports whether an idle connection can no longer carry a request:
// its peer closed or reset it, or sent bytes nobody asked for. It looks
// without waiting or consuming anything (recv with MSG_PEEK|MSG_DONTWAIT).
// A client of a pooled connection asks before sending a request it could
// not send again, since the peer may have closed the connection while it
// was idle. Only the goroutine that will use the connection may ask.
func (c *Conn) Stale() bool {
	c.peekStale = true
	if err := c.raw.Read(c.peekFn); err != nil {
		return true
	}
	return c.peekStale
}

// peekStep is Stale's raw function; it never asks the poller to wait.
func (c *Conn) peekStep(fd uintptr) bool {
	// Nothing to read: the connection is idle as it should be. Anything
	// else (an end of stream, bytes, an error) makes it stale.
	c.peekStale = c.pending(fd)
	// AwaitFirstByte waits in the poller while there is nothing.
	return !c.peekWait || c.peekStale
}

// pending reports whether a recv would not find the socket empty: bytes, the
// end of the stream or an error wait there. It looks without waiting or
// consuming anything (recv with MSG_PEEK|MSG_DONTWAIT).
func (c *Conn) pending(fd uintptr) bool {
	_, e := sockpeek.Peek(fd, c.peekBuf[:])
	return e != syscall.EAGAIN
}

// What a look of WatchAnswer found the peer to have sent.
const (
	peerNothing = iota // nothing, or too little to tell yet
	peerInterim        // the start of an interim (1xx), success or redirect response
	peerFinal          // anything else: an answer, the end of the stream, an error
)

// peerAnswer looks, without consuming, at what the peer has sent.
func (c *Conn) peerAnswer(fd uintptr) int {
	n, e := sockpeek.Peek(fd, c.answerBuf[:])
	switch {
	case e == syscall.EAGAIN:
		return peerNothing
	case e != 0 || n == 0:
		return peerFinal
	case n < 10:
		return peerNothing // "HTTP/1.1 1" not all there yet: look again
	}
	b := c.answerBuf[:n]
	if string(b[:7]) == "HTTP/1." && b[8] == ' ' && '1' <= b[9] && b[9] <= '3' {
		// An interim response, or a success before the body's end, whose
		// server may well want the rest (RFC 9112 9.3 has a client stop
		// only for a refusal).
		return peerInterim
	}
	return peerFinal
}

// recvStep is the raw read function: false asks the poller to wait.
func (c *Conn) recvStep(fd uintptr) bool {
	for {
		n, e := socketCall(syscall.SYS_RECVFROM, fd, c.rbuf, 0)
		switch e {
		case 0:
			c.rn = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rn, c.rerr = 0, e
		return true
	}
}

// Write writes all of p with send(2), waiting in the poller while the socket
// buffer is full.
func (c *Conn) Write(p []byte) (int, error) {
	total := len(p)
	if c.await {
		c.await = false
		if len(p) > 0 {
			// An error of the wait itself is left to the plain write below
			// (nothing was sent) or to the read that follows (all was).
			rest, _, err := c.sendThenWait(p)
			if err != nil {
				return total - len(rest), err
			}
			p = rest
		}
	}
	for len(p) > 0 {
		c.wbuf = p
		err := c.raw.Write(c.writeFn)
		p = c.wbuf
		c.wbuf = nil
		if sendErr := c.sendErr(); sendErr != nil {
			c.disarmStall()
			return total - len(p), sendErr
		}
		if c.answered {
			c.disarmStall()
			return total - len(p), ErrPeerAnswered
		}
		if err != nil && c.tickArmed && errors.Is(err, os.ErrDeadlineExceeded) {
			if at := c.explicitAt.Load(); at == 0 || time.Now().UnixNano() < at {
				// The tick for another look, not a deadline: the poller
				// refuses a write once its deadline passed, so the
				// deadline goes back to what it was first.
				c.disarmStall()
				continue
			}
		}
		if err != nil {
			if c.stallArmed && errors.Is(err, os.ErrDeadlineExceeded) {
				// The peer stopped taking bytes: what is still unsent is
				// dropped, and the close that follows resets the
				// connection, rather than leave the kernel to trickle it
				// out to a reader that may never take it.
				_ = c.TCPConn.SetLinger(0)
				c.reset.Store(true)
			}
			c.disarmStall()
			return total - len(p), c.opError("write", err)
		}
	}
	c.disarmStall()
	return total, nil
}

// disarmStall clears the write deadline a wait of this Write set, so that
// it cannot fail a later Write after the connection sat idle.
func (c *Conn) disarmStall() {
	if c.stallArmed {
		c.stallArmed = false
		if c.explicitAt.Load() == 0 {
			_ = c.TCPConn.SetWriteDeadline(time.Time{})
		}
	}
	if c.tickArmed {
		c.tickArmed = false
		var t time.Time
		if at := c.explicitAt.Load(); at != 0 {
			t = time.Unix(0, at)
		}
		_ = c.TCPConn.SetWriteDeadline(t)
	}
}

// send sends from c.wbuf until it is empty, the socket would block (false)
// or an error is recorded in c.werr.
func (c *Conn) send(fd uintptr) bool {
	for len(c.wbuf) > 0 {
		n, e := socketCall(syscall.SYS_SENDTO, fd, c.wbuf, syscall.MSG_NOSIGNAL)
		switch e {
		case 0:
			c.wbuf = c.wbuf[n:]
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.werr = e
		return true
	}
	return true
}

// sendStep is the raw write function. When the socket's buffer is full
// and the poller is to wait, a write stall bounds the wait.
func (c *Conn) sendStep(fd uintptr) bool {
	if c.send(fd) {
		return true
	}
	if c.answerWatch {
		switch c.peerAnswer(fd) {
		case peerFinal:
			c.answered = true
			return true
		case peerInterim:
			// A 1xx the peer sent unasked (100 Continue, as RFC 9110
			// lets a server send to any request with a body), or a 2xx
			// or 3xx before the body's end: no refusal, so the body goes
			// on; the bytes stay where the reader will find them, and
			// this request looks no more.
			c.answerWatch = false
		}
	}
	if c.answerWatch {
		at := time.Now().Add(answerTick)
		if e := c.explicitAt.Load(); e != 0 && e < at.UnixNano() {
			at = time.Unix(0, e)
		}
		_ = c.TCPConn.SetWriteDeadline(at)
		c.tickArmed = true
		return false
	}
	if c.writeStall > 0 && c.explicitAt.Load() == 0 {
		_ = c.TCPConn.SetWriteDeadline(time.Now().Add(c.writeStall))
		c.stallArmed = true
	}
	return false
}

// sendAwaitStep runs under the read side of the poller: the first call sends
// (all of it, or as much as fits), later calls mean the connection became
// readable.
func (c *Conn) sendAwaitStep(fd uintptr) bool {
	if c.wdone {
		return true
	}
	c.wdone = true
	if !c.send(fd) || c.werr != 0 {
		// Blocked on a full buffer, or failed: stop here either way.
		return true
	}
	return false // sent: wait for the answer
}

// ReadFrom copies r to the connection until io.EOF, writing each piece as
// soon as it is read: bufio.Writer hands a streamed body to ReadFrom, and
// the body's tail must not wait in a buffer for more to arrive.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) { return copyPromptly(c, r) }

func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err // the raw call's own wrapping ("raw-read")
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Abort closes c with a reset (RST) rather than an orderly close (FIN), and
// drops whatever it has not sent yet: for a message whose end is the close
// of its connection (a close-delimited body), the way to tell the peer that
// it was cut short.
func Abort(c net.Conn) error {
	switch t := c.(type) {
	case *Conn:
		_ = t.TCPConn.SetLinger(0)
		t.reset.Store(true)
	case *PromptConn:
		if fc, ok := t.Conn.(fdConn); ok {
			_ = syscall.SetsockoptLinger(fc.Fd(), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
			t.reset.Store(true)
		}
	case *net.TCPConn:
		_ = t.SetLinger(0)
	}
	return c.Close()
}
