package server

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strconv"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/celrules"
)

// A CONNECT bind (tunnelProtocol: connect) is an HTTP proxy for tunnels:
// each `CONNECT host:port` request, once allowed, is answered 200 and its
// connection becomes a stream served by the bind of the destination port
// (a listening bind, an internal one, or the internal bind without a port),
// as if it had been accepted there: TLS is sniffed for SNI, routes apply,
// and dynamic backends go to the SNI's or Host's name on that port.

// parseConnectTarget reads a CONNECT request's authority-form target
// (RFC 9110 9.3.6): host:port with a port, the host a DNS name, an IPv4
// address or a bracketed IPv6 address; nothing else (no userinfo, path or
// query). The host is returned lower-cased, without brackets.
func parseConnectTarget(target []byte) (host string, port int, err error) {
	i := bytes.LastIndexByte(target, ':')
	if i <= 0 || i == len(target)-1 {
		return "", 0, errors.New("the target must be host:port")
	}
	h, p := target[:i], target[i+1:]
	port = 0
	for _, c := range p {
		if c < '0' || c > '9' || port > 65535 {
			return "", 0, errors.New("invalid port")
		}
		port = port*10 + int(c-'0')
	}
	if port < 1 || port > 65535 || len(p) > 5 {
		return "", 0, errors.New("invalid port")
	}
	if h[0] == '[' {
		if h[len(h)-1] != ']' {
			return "", 0, errors.New("invalid IPv6 address")
		}
		a, err := netip.ParseAddr(string(h[1 : len(h)-1]))
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", 0, errors.New("invalid IPv6 address")
		}
		return targetAddr(a, port)
	}
	if a, err := netip.ParseAddr(string(h)); err == nil {
		if !a.Is4() {
			return "", 0, errors.New("an IPv6 address must be in brackets")
		}
		return targetAddr(a, port)
	}
	lower := bytes.ToLower(h)
	if err := config.CheckHostname(string(lower)); err != nil || bytes.IndexByte(lower, '*') >= 0 {
		return "", 0, errors.New("invalid host")
	}
	lower = bytes.TrimSuffix(lower, []byte("."))
	if numericLabel(lower[bytes.LastIndexByte(lower, '.')+1:]) {
		return "", 0, errors.New("invalid host: a number where a name's top-level domain is")
	}
	return string(lower), port, nil
}

// targetAddr is a CONNECT target's IP address as the rules see it and the
// tunnel dials it: an IPv4-mapped IPv6 address is its IPv4 address (or
// ::ffff:127.0.0.1 would pass a rule about 127.0.0.0/8 and reach it), and
// an unspecified address (0.0.0.0, ::), which a dial takes for the local
// host, is refused.
func targetAddr(a netip.Addr, port int) (string, int, error) {
	a = a.Unmap()
	if a.IsUnspecified() {
		return "", 0, errors.New("an unspecified address names no destination")
	}
	return a.String(), port, nil
}

// numericLabel says a name's last label is a number (digits, or 0x and hex
// digits): no top-level domain is, and resolvers that take such a name
// for an IPv4 address in a short form (127.1, 2130706433, 0x7f.1) would
// reach an address no rule about addresses saw.
func numericLabel(label []byte) bool {
	if len(label) > 2 && label[0] == '0' && label[1] == 'x' {
		label = label[2:]
		for _, c := range label {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	for _, c := range label {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(label) > 0
}

// destination is networkAuthorization's `destination` for a host and port;
// an IPv4-mapped IPv6 address is its IPv4 address, as connections see it.
func destination(host string, port int) map[string]any {
	d := map[string]any{"port": int64(port)}
	if a, err := netip.ParseAddr(host); err == nil {
		d["address"] = a.Unmap().String()
	} else if host != "" {
		d["hostname"] = host
	}
	return d
}

// destHost is the host a connection goes to, as networkAuthorization
// and connection records see it: host (its server name), else a tunnel's
// target, else the address it arrived on.
func destHost(c net.Conn, host string) string {
	if host != "" {
		return host
	}
	if h := tunnelHost(c); h != "" {
		return h
	}
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// netAllowed applies frontendPolicies.networkAuthorization and then
// networkExtAuthz (netextauthz.go) to a connection (or a CONNECT tunnel's
// stream) going to host:port, before anything is opened for it; a CONNECT
// bind's connections carry CONNECT requests, checked by connectAllowed
// instead. c is the connection as accepted, via what carries its bytes (c,
// or the TLS terminated on it, whose client certificate source shows). A
// connection it refuses gets its access record here; plain says the
// connection carries plain HTTP (on a port with TLS listeners too).
func (b *bind) netAllowed(bc *bindConfig, c, via net.Conn, host string, port int, plain bool) bool {
	if bc.netAuthz == nil && bc.netExtAuthz == nil {
		return true
	}
	in := celrules.NetworkInput(via, destination(destHost(c, host), port))
	end := endDenied
	switch {
	case !bc.netAuthz.Allowed(&in):
		b.gw.log.Debug("connection refused by networkAuthorization", zap.Stringer("client", c.RemoteAddr()), zap.String("host", host), zap.Int("port", port))
	case bc.netExtAuthz == nil:
		return true
	default:
		if end = b.netExtAuthzEnd(bc, c, &in); end == "" {
			return true
		}
	}
	b.logRefused(bc, c, via, host, port, plain, end)
	return false
}

// connectAllowed applies networkAuthorization to a CONNECT request, whose
// refusal its request line records. networkExtAuthz does not run here, as
// in agentgateway: the tunnel's stream is a connection of the bind of its
// destination port, which checks it as it arrives.
func (b *bind) connectAllowed(bc *bindConfig, c net.Conn, host string, port int) bool {
	if bc.netAuthz == nil {
		return true
	}
	in := celrules.NetworkInput(c, destination(destHost(c, host), port))
	if bc.netAuthz.Allowed(&in) {
		return true
	}
	b.gw.log.Debug("CONNECT refused by networkAuthorization", zap.Stringer("client", c.RemoteAddr()), zap.String("host", host), zap.Int("port", port))
	return false
}

// logRefused writes the access record of a connection refused before it
// was served (end says by what), going to host:port. The callers pass as
// host the server name (a TLS port), else a tunnel's target: a name that
// is not the tunnel's is the server name, and so is any on a TLS port
// outside a tunnel.
func (b *bind) logRefused(bc *bindConfig, c, via net.Conn, host string, port int, plain bool, end string) {
	proto := bc.connProtocol(plain)
	listener, route, sni := "", "", ""
	switch proto {
	case "tcp":
		listener = bc.tcp.name
		if r := bc.tcp.tcpRouteFor(""); r != nil {
			route = r.name
		}
	case "tls":
		if host != tunnelHost(c) {
			sni = host
		}
	}
	rec := newConnRecord(proto, bindName(bc.port), listener, c, sni)
	rec.Route, rec.End = route, end
	b.logConn(rec, c, via, nil, host, port)
}

// localPort is the port a connection arrived on (0 if unknown).
func localPort(c net.Conn) int {
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// connectStatusLine answers an accepted CONNECT; no header follows (a 2xx
// answer to CONNECT has no body, and its framing headers mean nothing).
var connectStatusLine = []byte("HTTP/1.1 200 OK\r\n\r\n")

// connect serves a request on a CONNECT bind and returns its status.
func (b *bind) connect(rs *requestState) int {
	fctx := rs.pc.Fast
	if !fctx.IsConnect() {
		respondError(fctx, fasthttp.StatusMethodNotAllowed, "only CONNECT is served on this port")
		fctx.Response.Header.Set("Allow", "CONNECT")
		return fasthttp.StatusMethodNotAllowed
	}
	if declaredBodyLen(&fctx.Request.Header) != 0 {
		// A CONNECT request has no content (RFC 9110 9.3.6): framing
		// would have part of what follows taken as a body (swallowed, or
		// its chunk framing tunnelled), where another proxy in front
		// takes it all as tunnel data.
		return respondErrorClose(fctx, fasthttp.StatusBadRequest, "a CONNECT request has no content")
	}
	host, port, err := parseConnectTarget(fctx.Request.Header.RequestURI())
	if err != nil {
		return respondErrorClose(fctx, fasthttp.StatusBadRequest, "invalid CONNECT target: "+err.Error())
	}
	// networkAuthorization decides first: a client the rules refuse gets
	// 403 whatever the port, and learns nothing of which ports have binds
	// (404) or are the proxy's own (508).
	if !b.connectAllowed(rs.bind, fctx.Conn(), host, port) {
		return respondError(fctx, fasthttp.StatusForbidden, "forbidden")
	}
	target := b.gw.tunnelBind(port)
	if target == nil {
		return respondError(fctx, fasthttp.StatusNotFound, "no listener for port "+strconv.Itoa(port))
	}
	if tunnelOf(fctx.Conn()) != nil || target.isConnect() {
		// A tunnel served by a CONNECT bind takes CONNECT requests again,
		// each one nesting a tunnel in the last on the same connection,
		// with no end to the memory they hold: a tunnel goes to a port
		// that serves its stream, never to a CONNECT port of the gateway.
		b.gw.log.Debug("CONNECT refused: its target is a CONNECT port of the gateway", zap.Stringer("client", fctx.RemoteAddr()), zap.String("host", host), zap.Int("port", port))
		return respondError(fctx, fasthttp.StatusLoopDetected, "loop detected: the target is the proxy's own CONNECT port")
	}
	raw := fctx.Conn()
	done := b.startTunnel(raw, nil, nil)
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(client net.Conn) {
		defer close(done)
		setWriteStall(raw, 0) // a tunnel, not a response
		if _, err := client.Write(connectStatusLine); err != nil {
			return
		}
		target.serveTunnel(client, raw, host, port)
	})
	return fasthttp.StatusOK
}

// tunnelConn is a CONNECT tunnel's stream as the bind of its destination
// serves it: what the client sends after the CONNECT head (peekable, as
// classification needs), with where the tunnel was going.
type tunnelConn struct {
	sock.PromptConn
	// raw is the client's connection itself, under fasthttp's hijacking
	// wrapper (which hands out the bytes it had read ahead first): its
	// socket is what a write stall and a hang-up watch work on.
	raw  net.Conn
	host string
	port int
}

// serveTunnel serves a CONNECT tunnel's stream c on this bind, as a
// connection accepted here, until it ends; raw is the client's connection
// under it.
func (b *bind) serveTunnel(c, raw net.Conn, host string, port int) {
	tc := &tunnelConn{PromptConn: sock.PromptConn{Conn: c}, raw: raw, host: host, port: port}
	b.metrics.ConnOpened()
	if b.draining.Load() {
		b.closeUnserved(tc)
		return
	}
	setConnOpened(tc, monoNow())
	b.trackConn(tc, connNew)
	_ = tc.SetReadDeadline(deadlineAfter(b.firstByte()))
	b.dispatch(tc)
}

// destPort is the port a dynamic backend reaches for a connection: a
// tunnel's destination port, else the port the connection arrived on
// (the bind's own, unless the bind is the internal one of every port).
func (b *bind) destPort(c net.Conn) int {
	if tc, ok := c.(*tunnelConn); ok {
		return tc.port
	}
	if f := sock.ServerFields(c); f != nil && f.Local != nil {
		// A PROXY protocol header named the destination: its port, as
		// its address is (LocalAddr).
		if a, ok := f.Local.(*net.TCPAddr); ok {
			return a.Port
		}
	}
	if b.port != 0 {
		return b.port
	}
	return localPort(c)
}

// ServerFields are the stream's own (sock.ServerFields).
func (c *tunnelConn) ServerFields() *sock.Server { return &c.PromptConn.Server }

// CloseWrite half-closes the tunnel: the client's connection stops sending
// (a FIN, or under TLS a close_notify), so that a TCP route passes the
// upstream's half-close on through the tunnel.
func (c *tunnelConn) CloseWrite() error {
	if cw, ok := c.raw.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// NetConn is the client's connection the tunnel runs on, whose socket the
// hang-up watch of a request inside the tunnel watches (sock.Hangups).
func (c *tunnelConn) NetConn() net.Conn { return c.raw }

// isConnect says the bind is a CONNECT bind (tunnelProtocol: connect).
func (b *bind) isConnect() bool {
	bc := b.current.Load()
	return bc != nil && bc.connect
}

// tunnelBind is the bind serving CONNECT tunnels to port: the bind of that
// port (listening or internal), else the internal bind of every port, else
// nil.
func (g *Gateway) tunnelBind(port int) *bind {
	m := g.tunnelBinds.Load()
	if m == nil {
		return nil
	}
	if b := (*m)[port]; b != nil {
		return b
	}
	return (*m)[0]
}
