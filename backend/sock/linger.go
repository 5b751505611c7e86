package sock

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/relaygate/gateway/pool/sockpeek"
)

// SetLingerClose has Close, while it is on, linger when the peer is still
// sending: bytes it sent wait unread (the rest of a request body the server
// answered without reading, pipelined requests after a close). Closed then,
// the socket would answer them with a reset, and a reset makes the peer's
// kernel drop what it had not read yet: the answer just written, so a
// client uploading a body to a route that refuses it (a 401, a 413) would
// see "connection reset" instead. Lingering, Close sends the FIN at once
// (after the answer), then reads and drops what still comes until the peer
// closes too, lingerIdle passes without a byte, or lingerMax passes in all
// (nginx's lingering_close, lingering_timeout and lingering_time), and then
// closes, in a goroutine of its own: Close returns at once. At most
// maxLingering connections linger at a time; past that, Close closes. A
// connection that asked for a reset (a write stall, Abort) is reset. Only
// the goroutine serving the connection may call it; a server turns it off
// when the connection becomes a tunnel, which passes resets on.
func (c *Conn) SetLingerClose(on bool) { c.lingerClose.Store(on) }

// SetPeerOwes says whether the peer owes bytes the server did not read (a
// request body it answered before its end): Close, lingering, then
// lingers even when none of them has arrived yet, as a client that writes
// its whole body first sends on after a pause (nginx's lingering_close
// heuristics). Without it Close lingers only when bytes wait unread.
func (c *Conn) SetPeerOwes(owes bool) {
	if c.peerOwes.Load() != owes {
		c.peerOwes.Store(owes)
	}
}

// closeSocket closes the socket, lingering first if SetLingerClose asked
// for it and the peer is still sending (Close, for a connection not
// parked).
func (c *Conn) closeSocket() error {
	if c.lingered.Load() {
		return nil // the lingering goroutine closes it
	}
	if !c.lingerClose.Load() || c.reset.Load() || !c.peerOwes.Load() && !c.peerSending() {
		return c.TCPConn.Close()
	}
	if lingering.Add(1) > maxLingering {
		lingering.Add(-1)
		return c.TCPConn.Close()
	}
	if err := c.TCPConn.CloseWrite(); err != nil {
		lingering.Add(-1)
		return c.TCPConn.Close()
	}
	c.lingered.Store(true)
	go c.linger()
	return nil
}

// peerSending reports whether bytes from the peer wait unread (not its
// end of stream or an error: a peer that closed is not sending).
func (c *Conn) peerSending() bool {
	sending := false
	var b [1]byte
	if c.raw.Control(func(fd uintptr) {
		n, e := sockpeek.Peek(fd, b[:])
		sending = e == 0 && n > 0
	}) != nil {
		return false
	}
	return sending
}

// linger reads and drops what the peer still sends, then closes.
func (c *Conn) linger() { lingerOn(c.TCPConn) }

// lingerOn reads and drops what tc's peer still sends, within the
// lingering close's bounds, then closes tc and counts it out of lingering.
func lingerOn(tc *net.TCPConn) {
	defer lingering.Add(-1)
	defer tc.Close()
	end := time.Now().Add(lingerMax)
	var buf [4 << 10]byte
	for {
		now := time.Now()
		if !now.Before(end) {
			return
		}
		until := now.Add(lingerIdle)
		if end.Before(until) {
			until = end
		}
		if tc.SetReadDeadline(until) != nil {
			return
		}
		if _, err := tc.Read(buf[:]); err != nil {
			return
		}
	}
}

// SetLingerClose is Conn.SetLingerClose for a netpoll connection: its
// lingering goes on through a duplicate of its descriptor on Go's poller,
// after netpoll closed its own. netpoll reads the socket into a buffer of
// its own whenever bytes arrive, so neither the socket nor that buffer says
// reliably whether the peer is still sending: such a connection lingers at
// every close while the setting is on (a peer that closed first ends it at
// once).
func (c *PromptConn) SetLingerClose(on bool) { c.lingerClose.Store(on) }

// lingerStart begins a lingering close of c's socket if SetLingerClose
// asked for it: it reports whether it did.
func (c *PromptConn) lingerStart() bool {
	fc, ok := c.Conn.(fdConn)
	if !ok || !c.lingerClose.Load() || c.reset.Load() {
		return false
	}
	if lingering.Add(1) > maxLingering {
		lingering.Add(-1)
		return false
	}
	tc, err := DupTCP(fc.Fd())
	if err != nil {
		lingering.Add(-1)
		return false
	}
	if tc.CloseWrite() != nil {
		tc.Close()
		lingering.Add(-1)
		return false
	}
	go lingerOn(tc)
	return true
}

// DupTCP returns a connection of Go's net package on a duplicate of the TCP
// socket fd, which another library owns (netpoll's): it writes, reads or
// lingers on the socket after that library stopped, and after it closed
// its own descriptor.
func DupTCP(fd int) (*net.TCPConn, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(dup), "sock")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, errors.New("sock: descriptor is not a TCP socket")
	}
	return tc, nil
}

// The lingering close's bounds: nginx's lingering_timeout and
// lingering_time, and how many connections may linger at once.
const (
	lingerIdle   = 5 * time.Second
	lingerMax    = 30 * time.Second
	maxLingering = 4096
)

// lingering counts the connections lingering now.
var lingering atomic.Int64
