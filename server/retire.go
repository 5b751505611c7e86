package server

import (
	"net"
	"sync/atomic"

	"github.com/relaygate/gateway/backend/sock"
)

// Connections a reload retires. A bind whose port stays keeps its socket and
// its connections across a reload, and each request reads the bind's
// configuration as it is now; but what a connection's setup decided stays
// as it was: its TLS handshake (the certificate, the client certificate
// checked against the client CAs, the version, suite and ALPN protocol), and
// that the port serves it HTTP at all. A connection whose setup the new
// configuration would not make is retired, closed the graceful way, as Envoy
// drains the connections of a changed filter chain: a terminated one whose
// listener (the one its server name picks now) has other TLS settings
// (tlsDigest), or none; a cleartext one on a port that serves no cleartext
// HTTP any more (a TCP listener, TLS listeners alone). So rotating or
// revoking a client CA, or turning mTLS on, reaches clients that keep their
// connections open, and pooled clients of a port whose protocol changed
// reconnect instead of getting 404s forever.
//
// The reload walks the bind's connections (retireStale): an idle HTTP/1.1
// one closes at once, one with a request in flight closes once it is
// answered (with Connection: close: finish), an HTTP/2 one gets GOAWAY and
// finishes its streams. The mark of one in flight is a bit in its state
// word (connRetiring), which its next change of state takes off and acts
// on, so the request path pays for it only while some connection of the
// bind is marked: a look at the connection's word in finish. A connection
// that has not begun a request is never closed by the walk, since its
// first request may be on its way (a client sends it right after its
// handshake, and does not retry a request on a fresh connection, as it
// may one on a reused connection the server closed: RFC 9112 9.3.1):
// one whose handshake is under way or done, parked or not, is caught by
// its first request instead (begin), as Envoy drains a connection by its
// next response; one not yet classified (parked before its first byte)
// is classified under the new configuration when it wakes. begin's check
// is one comparison of digests per request over TLS, and nothing on a
// cleartext request that found its listener. Forwarded connections (TCP, TLS
// passthrough or termination) and upgrade tunnels are left alone: they
// carry bytes, not requests, and end when their peers end them.

// servesPlain reports whether the port serves HTTP in cleartext, as
// dispatch decides: no TCP listener, and plain HTTP listeners or no TLS
// ones.
func (bc *bindConfig) servesPlain() bool {
	return bc.tcp == nil && (len(bc.listeners) > 0 || len(bc.tlsListeners) == 0)
}

// keeps reports whether bc still serves the HTTP connection c as its setup
// made it: a terminated one, under the TLS settings of its handshake for the
// listener its server name picks now; a cleartext one, at all.
func (bc *bindConfig) keeps(c net.Conn) bool {
	if tc, ok := c.(*tlsConn); ok {
		l := bc.httpsListenerFor(tc.sni)
		return l != nil && l.tlsDigest == tc.tlsDigest
	}
	return bc.servesPlain()
}

// setsUpAs reports whether bc sets connections up as o does: cleartext HTTP
// served or not alike, and the same TLS listeners (by hostname, protocol and
// TLS settings, in the same order). A reload from o to bc retires nothing,
// and need not look at the connections.
func (bc *bindConfig) setsUpAs(o *bindConfig) bool {
	if bc.servesPlain() != o.servesPlain() || len(bc.tlsListeners) != len(o.tlsListeners) {
		return false
	}
	for i, l := range bc.tlsListeners {
		ol := o.tlsListeners[i]
		if l.hostname != ol.hostname || l.protocol != ol.protocol || l.tlsDigest != ol.tlsDigest {
			return false
		}
	}
	return true
}

// retireStale retires the connections that the bind's new configuration
// bc, replacing prev, does not keep. The reload calls it once bc is the
// bind's current one, so that a connection set up after the walk was set
// up under bc.
func (b *bind) retireStale(prev, bc *bindConfig) {
	// Cleartext connections go when the port stops serving cleartext HTTP.
	// Idle ones not classified yet (parked before their first byte) stay:
	// their first bytes, which may be on their way, are classified under
	// bc when they wake (dispatch).
	plainEnds := prev.servesPlain() && !bc.servesPlain()
	b.mu.Lock()
	defer b.mu.Unlock()
	h2 := make(map[net.Conn]bool, len(b.h2conns))
	for hc := range b.h2conns {
		h2[hc.conn] = true
		if !bc.keeps(hc.conn) {
			hc.goAway()
		}
	}
	for c, st := range b.conns {
		_, terminated := c.(*tlsConn)
		if h2[c] || !terminated && !plainEnds || bc.keeps(c) {
			continue
		}
		if w := stateWord(c); w != nil {
			b.retireWord(c, w, terminated)
			continue
		}
		switch st {
		case connIdle:
			if begunRequest(c, terminated) {
				c.Close()
				delete(b.conns, c)
			}
		case connActive:
			b.markRetiring(c)
		}
	}
}

// retireWord retires the connection c, whose state is in its word w: an
// idle one closes, an active one is marked to close once its request is
// answered, in one step with the connection's own change of state (a
// request ending now either is marked, and closes itself at the end, or is
// idle, and closes here). A connection that has begun no request is left
// alone (new, or parked before its first request or its first byte): its
// first request may be on its way, and is checked when it comes (begin).
// mu is held: a parked connection that wakes stores its new state, and
// classifies itself, only after taking it (trackConn).
func (b *bind) retireWord(c net.Conn, w *atomic.Int32, terminated bool) {
	for {
		old := connState(w.Load())
		switch old &^ connRetiring {
		case connNew:
			return
		case connIdle:
			if !begunRequest(c, terminated) {
				return
			}
			c.Close()
			delete(b.conns, c)
			return
		case connActive:
			if old&connRetiring != 0 {
				return
			}
			if w.CompareAndSwap(int32(old), int32(old|connRetiring)) {
				b.closing.Add(1)
				return
			}
			// Its state changed meanwhile: look again.
		default:
			return
		}
	}
}

// begunRequest reports whether the idle connection c (terminated: a
// tlsConn) has begun a request: read a byte of one, or, cleartext, been
// classified, which only its first bytes do. One that has not is parked
// before its first request, which may be on its way.
func begunRequest(c net.Conn, terminated bool) bool {
	if terminated {
		return c.(*tlsConn).begun.Load()
	}
	f := sock.ServerFields(c)
	return f == nil || f.ServerClassified
}

// retireConn retires the HTTP connection of the request rs, found set up
// under another configuration by the request: an HTTP/2 connection gets
// GOAWAY (its streams go on), an HTTP/1 one closes once this request is
// answered.
func (b *bind) retireConn(rs *requestState) {
	if rs.h2 != nil {
		rs.h2.hc.goAway()
		return
	}
	c := rs.pc.Fast.Conn()
	if w := stateWord(c); w != nil {
		if connState(w.Or(int32(connRetiring)))&connRetiring == 0 {
			b.closing.Add(1)
		}
		return
	}
	b.mu.Lock()
	b.markRetiring(c)
	b.mu.Unlock()
}

// markRetiring marks the connection c, which has no state word, to close
// once its request is answered (mu held).
func (b *bind) markRetiring(c net.Conn) {
	if _, ok := b.retiring[c]; !ok {
		b.retiring[c] = struct{}{}
		b.closing.Add(1)
	}
}

// endRetired reports whether c, which has no state word, was marked
// retiring, and forgets it (mu held).
func (b *bind) endRetired(c net.Conn) bool {
	if len(b.retiring) == 0 {
		return false
	}
	if _, ok := b.retiring[c]; !ok {
		return false
	}
	delete(b.retiring, c)
	b.closing.Add(-1)
	return true
}

// lastResponse reports whether the response on c is its last: the bind
// drains, or a reload retired c. Asked when closing is not zero.
func (b *bind) lastResponse(c net.Conn) bool {
	if b.draining.Load() {
		return true
	}
	if w := stateWord(c); w != nil {
		return connState(w.Load())&connRetiring != 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, retiring := b.retiring[c]
	return retiring
}
