package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"golang.org/x/net/http2"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/codec/tlshello"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/server/router"
)

// anyListener compiles a listener of any protocol: HTTP routes for HTTP and
// HTTPS, TCP routes for TCP and TLS, and the TLS configuration of those
// that terminate.
func (c *compiler) anyListener(path string, b *config.Bind, l *config.Listener) (*listenerConfig, error) {
	proto := l.ListenerProtocol()
	var lc *listenerConfig
	var errs config.Errors
	switch proto {
	case "HTTP", "HTTPS":
		var err error
		if lc, err = c.listener(path, b, l); err != nil {
			errs = appendErrors(errs, err)
		}
	default:
		lc = &listenerConfig{name: l.Name, hostname: strings.ToLower(strings.TrimSuffix(l.Hostname, "."))}
		routes, rerrs := c.tcpRoutes(path, bindPort(b), l)
		errs = append(errs, rerrs...)
		lc.tcpRoutes = routes
	}
	if l.TLS != nil {
		var alpn []string
		if proto == "HTTPS" {
			// HTTP/2 first, as agentgateway offers them (the spec's
			// alpnProtocols default); frontendPolicies.tls.alpnProtocols
			// replaces the list.
			alpn = []string{"h2", "http/1.1"}
		}
		var ft *config.FrontendTLS
		if c.file.FrontendPolicies != nil {
			ft = c.file.FrontendPolicies.TLS
		}
		cfg, digest, err := serverTLS(path+".tls", l.TLS, ft, alpn)
		if err != nil {
			errs = appendErrors(errs, err)
		} else if lc != nil {
			lc.tls, lc.tlsDigest = cfg, digest
			lc.tickets = newSessionTickets(cfg, digest, time.Now())
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	lc.protocol = proto
	return lc, nil
}

// clientKeepalive is frontendPolicies.tcp.keepalives as the socket takes
// it: what the file leaves out takes the spec's defaults (probes after 180 s
// idle, every 180 s, 9 of them), as a backend's tcp policy does.
func clientKeepalive(f *config.File) *net.KeepAliveConfig {
	fp := f.FrontendPolicies
	if fp == nil || fp.TCP == nil || fp.TCP.Keepalives == nil {
		return nil
	}
	cfg := dialingFrom(fp.TCP.Keepalives, nil, backend.Dialing{Keepalive: backend.DefaultKeepalive}).Keepalive.Config()
	return &cfg
}

// tlsListenerFor returns the TLS or HTTPS listener for server name sni
// ("" when the client sent none), or nil.
func (bc *bindConfig) tlsListenerFor(sni string) *listenerConfig {
	for _, l := range bc.tlsListeners {
		if l.hostname == "" || l.hostname == "*" || sni != "" && router.MatchHostname(l.hostname, []byte(sni)) {
			return l
		}
	}
	return nil
}

// misdirected checks the Host of a request over TLS against the listener l
// its connection's server name chose, as the Gateway API asks: when another
// TLS or HTTPS listener of the port serves host more specifically (or l
// does not serve it and another does), the client reused a connection for a
// name it was not opened for, which that listener's TLS settings (a client
// certificate required, another certificate) never saw: 421, so that the
// client opens one for it (RFC 9110 15.5.20). When no listener serves host,
// 404. 0: l serves host. A request without a host is l's.
func (bc *bindConfig) misdirected(l *listenerConfig, host []byte) int {
	if len(host) == 0 {
		return 0
	}
	for _, o := range bc.tlsListeners { // most specific first
		if o.hostname == "" || o.hostname == "*" || router.MatchHostname(o.hostname, host) {
			if o == l {
				return 0
			}
			return fasthttp.StatusMisdirectedRequest
		}
	}
	return fasthttp.StatusNotFound
}

// httpsListenerFor returns the HTTPS listener for server name sni, or nil
// (a reload may have taken it away from a connection it served).
func (bc *bindConfig) httpsListenerFor(sni string) *listenerConfig {
	if l := bc.tlsListenerFor(sni); l != nil && l.protocol == "HTTPS" {
		return l
	}
	return nil
}

// dispatch serves a new connection by what its port's listeners are: plain
// HTTP at once; a TCP listener's connections are forwarded; on a port with
// TLS listeners the ClientHello's server name picks the listener (a plain
// HTTP request there, told apart by its first byte, goes to the HTTP
// listeners).
func (b *bind) dispatch(c net.Conn) {
	bc := b.current.Load()
	if f := sock.ServerFields(c); f != nil {
		f.ServerClassified = true
	}
	if bc.keepalive != nil {
		if sc, ok := c.(*sock.Conn); ok {
			_ = sc.SetKeepAliveConfig(*bc.keepalive)
		}
	}
	if _, tunneled := c.(*tunnelConn); bc.proxy != nil && !tunneled && !b.takeProxyHeader(c, bc, bc.proxy) {
		return
	}
	switch {
	case bc.tcp != nil:
		b.serveTCP(c, bc)
	case len(bc.tlsListeners) > 0:
		b.serveTLS(c, bc)
	default:
		if !bc.connect && !b.netAllowed(bc, c, c, tunnelHost(c), b.destPort(c), true) {
			b.closeUnserved(c)
			return
		}
		b.servePlain(c)
	}
}

// tunnelHost is the host a CONNECT tunnel's stream was going to, or "".
func tunnelHost(c net.Conn) string {
	if tc, ok := c.(*tunnelConn); ok {
		return tc.host
	}
	return ""
}

// helloPeek is a look at a connection's first bytes (readHello): their
// buffer, the ClientHello parsed from them, and the test Peek calls, made
// once per pooled value so that a look allocates nothing.
type helloPeek struct {
	buf    []byte
	hello  tlshello.Hello
	enough func([]byte) bool
}

var helloPeeks = sync.Pool{New: func() any {
	h := &helloPeek{buf: make([]byte, tlshello.MaxInput)}
	// One look: a first byte that is no TLS record settles it (plain
	// HTTP), else the whole ClientHello does.
	h.enough = func(b []byte) bool {
		return len(b) > 0 && (!tlshello.LooksLikeTLS(b[0]) || !errors.Is(h.hello.Parse(b), tlshello.ErrNeedMore))
	}
	return h
}}

// peeker is a connection that can show what arrived without consuming it
// (sock.Conn, sock.PromptConn).
type peeker interface {
	Peek(buf []byte, enough func([]byte) bool) (int, error)
}

// serveTCP forwards a TCP listener's connection.
func (b *bind) serveTCP(c net.Conn, bc *bindConfig) {
	r := bc.tcp.tcpRouteFor("")
	if r == nil {
		b.closeUnrouted(c, c, bc, bc.tcp, "")
		return
	}
	if !b.netAllowed(bc, c, c, tunnelHost(c), b.destPort(c), false) {
		b.closeUnserved(c)
		return
	}
	b.forwardConn(c, c, r, "")
}

// serveTLS reads the ClientHello (without consuming it), picks the
// listener by its server name, and passes the connection through, or
// terminates TLS and serves HTTP or forwards the decrypted bytes.
func (b *bind) serveTLS(c net.Conn, bc *bindConfig) {
	p, ok := c.(peeker)
	if !ok {
		b.closeUnserved(c)
		return
	}
	now := time.Now()
	deadline := now.Add(bc.handshakeTimeout)
	_ = c.SetReadDeadline(deadline)
	sni, kind := b.readHello(c, p)
	switch kind {
	case helloPlain:
		if len(bc.listeners) > 0 {
			// Plain HTTP on a port that also has TLS listeners: checked
			// as on a port of HTTP listeners alone.
			if !bc.connect && !b.netAllowed(bc, c, c, tunnelHost(c), b.destPort(c), true) {
				b.closeUnserved(c)
				return
			}
			_ = c.SetReadDeadline(deadlineAfter(requestHeadTimeout()))
			b.servePlain(c)
			return
		}
		b.closeLogged(c, c, bc, nil, "", endTLSFailed)
		return
	case helloBad:
		b.closeLogged(c, c, bc, nil, "", endTLSFailed)
		return
	}
	// networkAuthorization (and networkExtAuthz) sees the connection as
	// it is when it would be served: on a listener that terminates, after
	// the handshake, so that the client certificate's identity is in
	// source (as agentgateway checks it); else at once.
	netHost := firstNonEmpty(sni, tunnelHost(c))
	l := bc.tlsListenerFor(sni)
	if (l == nil || l.tls == nil) && !bc.connect && !b.netAllowed(bc, c, c, netHost, b.destPort(c), false) {
		b.closeUnserved(c)
		return
	}
	if l == nil {
		b.gw.log.Debug("tls: no listener for the server name", zap.String("sni", sni), zap.Stringer("client", c.RemoteAddr()))
		b.closeUnrouted(c, c, bc, nil, sni)
		return
	}
	if l.tls == nil {
		// Passthrough: the ClientHello is still in the socket and goes
		// upstream with the rest.
		r := l.tcpRouteFor(sni)
		if r == nil {
			b.closeUnrouted(c, c, bc, l, sni)
			return
		}
		b.forwardConn(c, c, r, sni)
		return
	}
	l.tickets.refresh(now)
	tc := tls.Server(c, l.tls)
	var hc *tlsConn
	if l.protocol != "TLS" {
		// Served as HTTP: the socket follows the records from the
		// handshake's first byte on (sock.Layer).
		hc = newTLSConn(tc, c, sni, l.tlsDigest)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		b.gw.log.Debug("tls: handshake failed", zap.String("sni", sni), zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		b.closeLogged(c, c, bc, l, sni, endTLSFailed)
		return
	}
	if !bc.connect {
		var via net.Conn = hc
		if hc == nil {
			via = &tlsConn{Conn: tc, raw: c} // its client certificate, for source
		}
		if !b.netAllowed(bc, c, via, netHost, b.destPort(c), false) {
			tc.Close()
			b.connClosed(c)
			return
		}
	}
	if l.protocol == "TLS" {
		r := l.tcpRouteFor(sni)
		if r == nil {
			b.closeUnrouted(c, tc, bc, l, sni)
			return
		}
		b.forwardConn(c, tc, r, sni)
		return
	}
	// Its first request's first byte is due as a plain connection's is
	// (firstByte: the idle timeout, but no longer than a request head).
	_ = c.SetReadDeadline(deadlineAfter(b.firstByte()))
	// From here the bind tracks the TLS connection, not the socket under it
	// (they share the state word).
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	b.trackConn(hc, connNew)
	if tc.ConnectionState().NegotiatedProtocol == http2.NextProtoTLS {
		if !b.serveH2(hc, hc, nil, nil) {
			b.connClosed(hc)
		}
		return
	}
	if hc.layer.Parks() && !b.awaitFirstRequest(hc) {
		return
	}
	b.serve(hc)
}

// awaitFirstRequest waits for the first byte of an HTTPS connection's first
// request (sock.Layer.AwaitFirstByte), and parks the connection if it stays
// silent for a check period, as awaitFirstByte does for a plain one before
// its handshake could. It reports whether the caller serves the connection
// now; if not, the connection is parked or closed and accounted for. One
// silent until its head deadline is closed without an answer.
func (b *bind) awaitFirstRequest(c *tlsConn) bool {
	err := c.layer.AwaitFirstByte(c.Conn)
	switch {
	case err == nil:
		return true
	case err == sock.ErrParked:
		if c.Close(); c.Held() && b.park(c) {
			return false
		}
	default:
		c.Close()
	}
	b.connClosed(c)
	return false
}

// What a connection's first bytes were.
const (
	helloTLS   = iota // a ClientHello
	helloPlain        // not TLS
	helloBad          // a broken, oversized or unfinished hello, or nothing
)

// readHello looks at a connection's first bytes without consuming them:
// the server name of its ClientHello (lower case, "" for none), or that it
// is not TLS at all.
func (b *bind) readHello(c net.Conn, p peeker) (sni string, kind int) {
	h := helloPeeks.Get().(*helloPeek)
	defer func() {
		h.hello = tlshello.Hello{} // no views of the bytes kept
		helloPeeks.Put(h)
	}()
	buf, hello := h.buf, &h.hello
	n, err := p.Peek(buf, h.enough)
	if n == 0 {
		return "", helloBad
	}
	if !tlshello.LooksLikeTLS(buf[0]) {
		return "", helloPlain
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.gw.log.Debug("tls: no ClientHello", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		return "", helloBad
	}
	if err = hello.Parse(buf[:n]); err != nil {
		b.gw.log.Debug("tls: bad ClientHello", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		return "", helloBad
	}
	if len(hello.ServerName) == 0 {
		return "", helloTLS
	}
	var name [tlshello.MaxServerName]byte
	return string(hello.AppendLowerServerName(name[:0])), helloTLS
}

// closedSilent records a new connection the bind closed because it sent
// nothing by its first-byte deadline, where its first bytes are looked at
// before it is served: as one that sent too few of them is refused, with
// a PROXY protocol header due, proxy_header; on a port of TLS listeners
// alone (whose deadline is the handshake's), tls_failed. On a port that
// serves plain HTTP it goes unrecorded, as an idle keep-alive connection.
func (b *bind) closedSilent(c net.Conn) {
	bc := b.current.Load()
	end := endProxyHeader
	switch {
	case bc.proxy != nil:
	case bc.tlsOnly():
		end = endTLSFailed
	default:
		return
	}
	rec := newConnRecord(bc.connProtocol(false), bindName(bc.port), "", c, "")
	rec.End = end
	b.logConn(rec, c, c, nil, "", b.destPort(c))
}

// tlsOnly reports whether the port has TLS listeners alone: every
// connection must begin with a ClientHello.
func (bc *bindConfig) tlsOnly() bool {
	return bc.tcp == nil && len(bc.tlsListeners) > 0 && len(bc.listeners) == 0
}

// closeUnserved closes a connection no listener took.
func (b *bind) closeUnserved(c net.Conn) {
	c.Close()
	b.connClosed(c)
}

// forwardConn forwards the connection c accepted (through via: c itself,
// or the TLS terminated on it) on route r until both directions end. It is
// in service meanwhile, so that drain waits for it (and cuts it when its
// time is up), without the HTTP deadlines: the one its classification set
// is lifted.
func (b *bind) forwardConn(c, via net.Conn, r *tcpRoute, sni string) {
	_ = c.SetReadDeadline(time.Time{})
	b.trackConn(c, connForwarding)
	b.forwardTCP(c, via, r, sni)
	b.connClosed(c)
}

// tlsConn is a terminated TLS connection served as HTTP. What sock does for
// the server on the socket goes on through its sock.Layer: the bare-LF head
// watch runs on the decrypted bytes, the server's words stay in the socket,
// and an HTTP/1.1 connection idle between requests parks (sock.Parkable)
// and is served again as the same tlsConn, its TLS session kept.
type tlsConn struct {
	*tls.Conn
	raw net.Conn
	sni string
	// tlsDigest is the digest of the TLS settings it was handshaken under
	// (listenerConfig.tlsDigest): a reload that changes them retires it
	// (retire.go).
	tlsDigest string
	layer     sock.Layer
	// begun is set once a byte of its first request is read: a reload
	// does not close a connection before (retire.go).
	begun atomic.Bool
}

// newTLSConn is the connection tc, terminated on raw with server name sni
// under the TLS settings of digest, before its handshake.
func newTLSConn(tc *tls.Conn, raw net.Conn, sni, digest string) *tlsConn {
	c := &tlsConn{Conn: tc, raw: raw, sni: sni, tlsDigest: digest}
	c.layer.Init(raw)
	return c
}

// Read reads the decrypted stream under the head watch, counting the reads
// that found its end or failed (server/body.go tells a cut-short body by
// them).
func (c *tlsConn) Read(p []byte) (int, error) {
	n, err := c.layer.Read(c.Conn, p)
	if n > 0 && !c.begun.Load() {
		c.begun.Store(true)
	}
	return n, err
}

// ReadEnds is sock.Conn.ReadEnds for the decrypted stream.
func (c *tlsConn) ReadEnds() int { return c.layer.ReadEnds() }

// SetReadDeadline sets the socket's read deadline; it ends a request head.
func (c *tlsConn) SetReadDeadline(t time.Time) error {
	c.layer.EndHead()
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both of the socket's deadlines; it ends a request head.
func (c *tlsConn) SetDeadline(t time.Time) error {
	c.layer.EndHead()
	return c.Conn.SetDeadline(t)
}

// Close sends close_notify and closes, or, when the server lets go of the
// connection to park it, holds it (sock.Layer.Close).
func (c *tlsConn) Close() error { return c.layer.Close(c.Conn) }

// SockLayer is sock.Layered's.
func (c *tlsConn) SockLayer() *sock.Layer { return &c.layer }

// Held is sock.Parkable's.
func (c *tlsConn) Held() bool { return c.layer.Held() }

// Park is sock.Parkable's: the handler gets this tlsConn back.
func (c *tlsConn) Park(h sock.ParkHandler) error { return c.layer.Park(c, h) }

// PeerCertificates is the client's verified certificate chain, for CEL's
// source identity (celrules).
func (c *tlsConn) PeerCertificates() []*x509.Certificate {
	return c.ConnectionState().PeerCertificates
}
