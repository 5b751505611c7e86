package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/tcpproxy"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/server/router"
	"github.com/relaygate/gateway/server/telemetry"
)

// tcpRoute is one compiled tcpRoutes entry of a TCP or TLS listener.
type tcpRoute struct {
	name string
	// bind, listener and protocol (tcp or tls) name where the route is,
	// in its connections' records.
	bind, listener, protocol string
	// hostnames are matched against the SNI (lower case, "*." wildcards);
	// none matches every connection.
	hostnames []string
	backends  []*tcpBackend
	weights   []int // cumulative
	total     int
	// metrics counts the bytes of the listener's forwarded connections.
	metrics *telemetry.TCPMetrics
}

// tcpBackend is where a TCP route's connections go.
type tcpBackend struct {
	name string
	// addr is host:port; empty for a dynamic backend, whose destination is
	// the connection's SNI on the listener's port.
	addr    string
	dialing backend.Dialing
	// tls originates TLS to the backend (backendTLS); nil: the bytes go
	// as they came.
	tls *backend.UpstreamTLS
	// cel is CEL's `backend` for the connections it takes.
	cel map[string]any
}

// tcpIdleTimeout closes a forwarded connection on which no byte moved
// either way for this long (Envoy's tcp_proxy default).
const tcpIdleTimeout = time.Hour

// tcpRoutes compiles a listener's tcpRoutes, most specific hostname first.
func (c *compiler) tcpRoutes(path string, port int, l *config.Listener) ([]*tcpRoute, config.Errors) {
	var errs config.Errors
	proto := "tcp"
	if l.ListenerProtocol() == "TLS" {
		proto = "tls"
	}
	metrics := c.gw.metrics.TCP(port, l.Name, proto)
	var out []*tcpRoute
	for ri := range l.TCPRoutes {
		r := &l.TCPRoutes[ri]
		rpath := r.SourcePath(fmt.Sprintf("%s.tcpRoutes[%d]", path, ri))
		tr := &tcpRoute{name: r.Name, metrics: metrics, bind: bindName(port), listener: l.Name, protocol: proto}
		if tr.name == "" {
			tr.name = fmt.Sprintf("%s/tcp%d", l.Name, ri)
		}
		for _, h := range r.Hostnames {
			tr.hostnames = append(tr.hostnames, strings.ToLower(strings.TrimSuffix(h, ".")))
		}
		for bi := range r.Backends {
			rb := &r.Backends[bi]
			bpath := fmt.Sprintf("%s.backends[%d]", rpath, bi)
			tb := &tcpBackend{dialing: c.defaults.Dialing}
			switch rb.Kind {
			case config.BackendHost:
				tb.addr, tb.name = rb.Host, rb.Host
			case config.BackendDynamic:
				tb.name = "dynamic"
				tb.dialing.Refuse = (*selfRefuser)(c.gw)
			case config.BackendRef:
				nb := c.named[rb.Backend]
				if nb == nil {
					errs = append(errs, &decode.FieldError{Path: bpath + ".backend", Msg: fmt.Sprintf("no backend named %q in the top-level backends", rb.Backend)})
					continue
				}
				if nb.Kind != config.BackendHost {
					errs = append(errs, &decode.FieldError{Path: bpath + ".backend", Msg: fmt.Sprintf("backend %q is not a host backend: a TCP route forwards bytes to a host:port", rb.Backend)})
					continue
				}
				tb.addr, tb.name = nb.Host, nb.Name
				if nb.Policies != nil && nb.Policies.TCP != nil {
					tb.dialing = backendTCPDialing(nb.Policies.TCP, tb.dialing)
				}
			}
			// backendTLS: the backend's own replaces the route's whole.
			btls, tlsPath := (*config.BackendTLS)(nil), ""
			if r.Policies != nil && r.Policies.BackendTLS != nil {
				btls, tlsPath = r.Policies.BackendTLS, rpath+".policies.backendTLS"
			}
			if rb.Policies != nil && rb.Policies.BackendTLS != nil {
				btls, tlsPath = rb.Policies.BackendTLS, bpath+".policies.backendTLS"
			}
			if btls != nil {
				t, err := compileBackendTLS(btls)
				if err != nil {
					errs = append(errs, kindError(tlsPath, err))
					continue
				}
				tb.tls = &t
			}
			if rb.Weight == 0 {
				continue
			}
			typ := "static"
			if tb.addr == "" {
				typ = "dynamic"
			}
			tb.cel = map[string]any{"name": tb.name, "type": typ, "protocol": "tcp"}
			tr.backends = append(tr.backends, tb)
			tr.total += rb.Weight
			tr.weights = append(tr.weights, tr.total)
		}
		out = append(out, tr)
	}
	// Most specific first: an exact name over a wildcard over none, file
	// order among equals.
	rank := func(r *tcpRoute) int {
		best := 0
		for _, h := range r.hostnames {
			best = max(best, hostnameRank(h))
		}
		return best
	}
	slices.SortStableFunc(out, func(a, b *tcpRoute) int { return cmp.Compare(rank(b), rank(a)) })
	return out, errs
}

// tcpRouteFor returns the route for a connection with server name sni ("":
// none, or a TCP listener), or nil.
func (lc *listenerConfig) tcpRouteFor(sni string) *tcpRoute {
	for _, r := range lc.tcpRoutes {
		if len(r.hostnames) == 0 {
			return r
		}
		for _, h := range r.hostnames {
			if sni != "" && (h == "*" || router.MatchHostname(h, []byte(sni))) {
				return r
			}
		}
	}
	return nil
}

// pick chooses a backend by weight.
func (r *tcpRoute) pick() *tcpBackend {
	switch len(r.backends) {
	case 0:
		return nil
	case 1:
		return r.backends[0]
	}
	n := rand.IntN(r.total)
	for i, w := range r.weights {
		if n < w {
			return r.backends[i]
		}
	}
	return r.backends[len(r.backends)-1]
}

// forwardTCP connects a client connection to the route's backend, moves
// bytes both ways until both directions end, and writes the connection's
// access record. c is the connection as accepted, via what carries its
// bytes (c, or the TLS terminated on it); sni is its server name. A
// dynamic backend goes to the server name on the connection's destination
// port.
func (b *bind) forwardTCP(c, via net.Conn, r *tcpRoute, sni string) {
	port := b.destPort(c)
	rec := newConnRecord(r.protocol, r.bind, r.listener, c, sni)
	rec.Route = r.name
	be := r.pick()
	if be == nil {
		rec.End = endNoBackend
		via.Close()
		b.logConn(rec, c, via, nil, sni, port)
		return
	}
	rec.Backend = be.name
	addr := be.addr
	if addr == "" {
		if sni == "" {
			rec.End = endNoBackend
			via.Close()
			b.logConn(rec, c, via, be, sni, port)
			return
		}
		addr = net.JoinHostPort(sni, strconv.Itoa(port))
	}
	rec.Endpoint = addr
	up, err := be.dialing.Dial(addr)
	if err == nil && be.tls != nil {
		up, err = originateTLS(up, addr, be)
	}
	if err != nil {
		b.gw.log.Debug("tcp: cannot connect to the backend", zap.String("route", r.name), zap.String("backend", addr), zap.Error(err))
		rec.End, rec.UpstreamError = endConnectFailed, err
		via.Close()
		b.logConn(rec, c, via, be, sni, port)
		return
	}
	res := tcpproxy.Pipe(via, up, tcpproxy.Options{Idle: tcpIdleTimeout})
	r.metrics.Forwarded(res.ClientBytes, res.UpstreamBytes)
	if ce := b.gw.log.Check(zap.DebugLevel, "tcp: connection forwarded"); ce != nil {
		ce.Write(zap.String("route", r.name), zap.String("backend", addr), zap.Stringer("client", via.RemoteAddr()),
			zap.Int64("received", res.ClientBytes), zap.Int64("sent", res.UpstreamBytes), zap.Duration("duration", res.Duration),
			zap.Stringer("method", res.Method), zap.String("ended", res.First.Side.String()+" "+res.First.Reason.String()))
	}
	rec.BytesIn, rec.BytesOut = res.ClientBytes, res.UpstreamBytes
	rec.End, rec.UpstreamError = pipeEnd(&res)
	b.logConn(rec, c, via, be, sni, port)
}

// closeUnrouted closes a connection of a TCP or TLS port that no listener
// or route takes for its server name sni (l: the listener picked, if one
// was), with its access record. via is what would have carried its bytes
// (c, or the TLS terminated on it).
func (b *bind) closeUnrouted(c, via net.Conn, bc *bindConfig, l *listenerConfig, sni string) {
	b.closeLogged(c, via, bc, l, sni, endNoRoute)
}

// closeLogged closes a connection the bind would not serve, with its
// access record saying why (end).
func (b *bind) closeLogged(c, via net.Conn, bc *bindConfig, l *listenerConfig, sni, end string) {
	listener := ""
	if l != nil {
		listener = l.name
	}
	rec := newConnRecord(bc.connProtocol(false), bindName(bc.port), listener, c, sni)
	rec.End = end
	via.Close()
	b.logConn(rec, c, via, nil, sni, b.destPort(c))
	b.connClosed(c)
}

// connProtocol is the protocol of a connection record on the port: tcp
// for a TCP listener's connections, tls on a port with TLS listeners
// (but for a connection plain says carries plain HTTP there), else http.
func (bc *bindConfig) connProtocol(plain bool) string {
	switch {
	case bc.tcp != nil:
		return "tcp"
	case len(bc.tlsListeners) > 0 && !plain:
		return "tls"
	}
	return "http"
}

// originateTLS runs the client side of TLS on a TCP route's upstream
// connection, within the connect timeout. ALPN is offered only when
// backendTLS lists it: the bytes carried are not HTTP/1.1.
func originateTLS(up net.Conn, addr string, be *tcpBackend) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	cfg, err := be.tls.Config(host)
	if err != nil {
		up.Close()
		return nil, err
	}
	if be.tls.ALPN == "" {
		cfg.NextProtos = nil
	}
	timeout := be.dialing.ConnectTimeout
	if timeout <= 0 {
		timeout = backend.DefaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tc := tls.Client(up, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		up.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}
