package backend

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/relaygate/gateway/backend/sock"
)

// connStale reports whether an idle pooled connection can no longer carry
// a request (sock.Conn.Stale), for a plain connection and for TLS over
// one alike.
func connStale(c net.Conn) bool {
	switch c := c.(type) {
	case *sock.Conn:
		return c.Stale()
	case *tls.Conn:
		return tlsStale(c)
	}
	return false
}

// tlsReadAhead bounds tlsStale's read of what waits on a TLS connection.
// The bytes are there already (the socket said so); the bound only ends
// the read once crypto/tls has taken them all in and waits for more. A
// deadline already passed would not do: the poller refuses such a read
// before trying it.
const tlsReadAhead = 5 * time.Millisecond

// tlsStale is connStale under TLS. The socket is looked at first, as a
// plain one is; but bytes waiting on it are not staleness by themselves
// here: a TLS 1.3 server sends session tickets after its handshake, which
// crypto/tls takes in on the connection's next read. So they are read now:
// crypto/tls consumes what is not application data and then reports the
// deadline, which it does not keep as the connection's error (a timeout is
// temporary). Anything else is stale: the server's close_notify, the end
// of the stream, or bytes nobody asked for.
func tlsStale(c *tls.Conn) bool {
	sc, ok := c.NetConn().(*sock.Conn)
	if !ok || !sc.Stale() {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(tlsReadAhead))
	var b [1]byte
	n, err := c.Read(b[:])
	_ = c.SetReadDeadline(time.Time{})
	return n > 0 || err == nil || !sock.IsTimeout(err)
}
