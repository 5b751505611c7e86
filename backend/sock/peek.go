package sock

import (
	"io"
	"syscall"

	"github.com/relaygate/gateway/pool/sockpeek"
)

// Peek waits until the bytes waiting on the connection satisfy enough, or
// fill buf, and copies them into buf without consuming them (recv with
// MSG_PEEK): whoever reads the connection next reads them again. It
// returns how many bytes buf holds. The wait ends at the read deadline
// (an error) or at the end of the stream (io.EOF with what arrived before
// it). A connection's classifier uses it to look at a ClientHello and
// still hand the untouched socket to TLS or to a splice. Only the
// goroutine serving the connection may call it.
func (c *Conn) Peek(buf []byte, enough func([]byte) bool) (int, error) {
	var n int
	var eof bool
	var errno syscall.Errno
	step := func(fd uintptr) bool {
		m, e := sockpeek.Peek(fd, buf)
		switch e {
		case syscall.EAGAIN:
			return false
		case 0:
		default:
			errno = e
			return true
		}
		if m == 0 {
			eof = true
			return true
		}
		if m == n && m < len(buf) && !enough(buf[:m]) {
			// The same bytes as last time: the poller woke for
			// nothing new. Wait for more.
			return false
		}
		n = m
		// Edge-triggered readiness: with bytes still waiting, the
		// poller wakes this again only when more arrive.
		return n == len(buf) || enough(buf[:n])
	}
	err := c.raw.Read(step)
	for err != nil {
		// The poller's timer may fire before the deadline asked for: it is
		// lazy, and parking's checks ride on it (rearm). A peek is never an
		// idle wait, so it never parks; it goes on until the real deadline.
		if again, _ := c.rearm(err); !again {
			return n, c.opError("read", err)
		}
		err = c.raw.Read(step)
	}
	if errno != 0 {
		return n, c.opError("read", errno)
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}

// Peek is Conn.Peek for a connection that cannot look without reading: it
// reads, and keeps what it read for the connection's next reads.
// What was read before stays whole: a peek shorter than an earlier one
// (a classifier's first byte after a PROXY header's peek) sees its start.
func (c *PromptConn) Peek(buf []byte, enough func([]byte) bool) (int, error) {
	n := copy(buf, c.peeked)
	for n < len(buf) && !enough(buf[:n]) {
		m, err := c.Conn.Read(buf[n:])
		c.peeked = append(c.peeked, buf[n:n+m]...)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
