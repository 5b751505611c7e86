package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/backend/tcpproxy"
	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// accessLogPolicy is frontendPolicies.accessLog compiled: the filter and
// the added fields, evaluated once a request is answered.
type accessLogPolicy struct {
	filter cel.Program
	add    []accessLogField // sorted by key
	// omit and connOmit are the removed fields each line has: a removal
	// of a connection line's field leaves request lines on their fast
	// path.
	omit, connOmit logline.AccessFields
	otlp           *otlpAccessLog // accessLog.otlp; nil: none
}

type accessLogField struct {
	key  string
	prog cel.Program
}

func newAccessLogPolicy(cfg *config.AccessLogPolicy) (*accessLogPolicy, error) {
	p := &accessLogPolicy{}
	if cfg.Filter != nil {
		prog, err := config.CompileValueExpression(string(*cfg.Filter), true)
		if err != nil {
			return nil, err
		}
		p.filter = prog
	}
	for key, expr := range cfg.Add {
		prog, err := config.CompileValueExpression(string(expr), false)
		if err != nil {
			return nil, err
		}
		p.add = append(p.add, accessLogField{key: key, prog: prog})
		// One named like a built-in field replaces it (agentgateway's
		// semantics): the built-in is left out, whether the expression
		// gives a value or not.
		if f, ok := logline.AccessFieldNamed(key); ok {
			p.omit |= f & logline.RequestFields
			p.connOmit |= f & logline.ConnFields
		}
	}
	sort.Slice(p.add, func(i, j int) bool { return p.add[i].key < p.add[j].key })
	for _, name := range cfg.Remove {
		f, ok := logline.AccessFieldNamed(name)
		if !ok {
			return nil, fmt.Errorf("remove: %q is not a field of the access line", name)
		}
		p.omit |= f & logline.RequestFields
		p.connOmit |= f & logline.ConnFields
	}
	return p, nil
}

// apply decides whether the request is logged and adds the fields to a,
// and exports its record over OTLP when accessLog.otlp says so (sc is the
// request's span, if it had one). Expressions see the request and its
// response; a failing filter logs the request, a failing field is left
// out.
func (p *accessLogPolicy) apply(c *policy.Ctx, a *logline.Access, sc trace.SpanContext) bool {
	c.Responding = true
	a.Omit = p.omit
	in := celrules.LiveInput(c)
	logged := keeps(p.filter, &in)
	// The added fields go in the line, and in the OTLP record unless it
	// has fields of its own.
	if logged || p.otlp != nil && !p.otlp.own {
		a.Extra = p.addFields(a.Extra, &in)
	}
	if p.otlp != nil {
		p.otlp.export(&in, a, logged, sc)
	}
	return logged
}

// keeps is a filter's verdict on a record: false only when it evaluates
// to false (none, or one that fails, keeps it).
func keeps(filter cel.Program, in *celrules.Input) bool {
	if filter == nil {
		return true
	}
	if v, err := celrules.EvalLLM(filter, in, nil); err == nil {
		if b, ok := v.Value().(bool); ok && !b {
			return false
		}
	}
	return true
}

// addFields appends the added fields whose expressions evaluate.
func (p *accessLogPolicy) addFields(extra []logline.AccessField, in *celrules.Input) []logline.AccessField {
	for _, f := range p.add {
		v, err := celrules.EvalLLM(f.prog, in, nil)
		if err != nil {
			continue
		}
		extra = append(extra, accessField(f.key, v))
	}
	return extra
}

// accessField is an added field with its value's type: a number or a bool
// is written bare ("code":200, as agentgateway writes an expression's
// value), a list, a map or null as JSON, anything else as text
// (celrules.Text).
func accessField(key string, v ref.Val) logline.AccessField {
	switch x := v.(type) {
	case types.Int:
		return logline.AccessField{Key: key, Kind: logline.AccessInt, Int: int64(x)}
	case types.Uint:
		return logline.AccessField{Key: key, Kind: logline.AccessUint, Uint: uint64(x)}
	case types.Double:
		return logline.AccessField{Key: key, Kind: logline.AccessFloat, Float: float64(x)}
	case types.Bool:
		f := logline.AccessField{Key: key, Kind: logline.AccessBool}
		if x {
			f.Int = 1
		}
		return f
	case traits.Lister, traits.Mapper, types.Null:
		// A list, a map or null as its JSON ("groups":["a","b"]), as
		// agentgateway writes it; text when it has none.
		// (celrules.Text writes them as encoding/json does; "" when it
		// cannot.)
		if text := celrules.Text(v); text != "" {
			return logline.AccessField{Key: key, Kind: logline.AccessJSON, Value: text}
		}
	}
	return logline.AccessField{Key: key, Value: celrules.Text(v)}
}

// Connection records. Every connection a TCP or TLS listener (or a CONNECT
// tunnel's stream) takes gets one line when it ends: forwarded, or closed
// unforwarded because networkAuthorization or networkExtAuthz refused it
// or nothing routes its server name. A refused plain HTTP connection gets
// one too: no request line will tell of it. The line's `end` says why it
// ended:
const (
	endClosed        = "closed"         // both sides ended their sending in order
	endClientReset   = "client_reset"   // the client reset it
	endUpstreamReset = "upstream_reset" // the upstream reset it, or refused what was written
	endClientError   = "client_error"   // another failure of the client's side
	endUpstreamError = "upstream_error" // another failure of the upstream's side
	endIdleTimeout   = "idle_timeout"   // no byte moved for tcpIdleTimeout
	endMaxDuration   = "max_duration"   // the pipe reached its longest life
	endShutdown      = "shutdown"       // the gateway closed it: a drain's time ran out
	endConnectFailed = "connect_failed" // the backend was not reached (dial, or the TLS to it)
	endNoBackend     = "no_backend"     // no backend to pick, or a dynamic one without a name to go to
	endNoRoute       = "no_route"       // no listener or route for the server name
	endDenied        = "denied"         // frontendPolicies.networkAuthorization, or networkExtAuthz's service, refused it
	endTLSFailed     = "tls_failed"     // a malformed, late or absent ClientHello, or a failed handshake
	endProxyHeader   = "proxy_header"   // a PROXY protocol header missing, malformed, refused or late
	// networkExtAuthz's service could not decide (unreachable, too slow)
	// and its failureMode denies.
	endExtAuthzFailed = "ext_authz_failed"
)

// pipeEnd is the end of a pipe's connection and the upstream's error
// behind it, if any: its first end unless that was an orderly close (the
// first failure caused the rest), else its last.
func pipeEnd(res *tcpproxy.Result) (string, error) {
	e := res.First
	if e.Reason == tcpproxy.ReasonEOF || e.Reason == tcpproxy.ReasonNone {
		e = res.Last
	}
	up := e.Side == tcpproxy.SideUpstream
	switch e.Reason {
	case tcpproxy.ReasonReset:
		if up {
			return endUpstreamReset, e.Err
		}
		return endClientReset, nil
	case tcpproxy.ReasonError:
		switch {
		case up:
			return endUpstreamError, e.Err
		case errors.Is(e.Err, net.ErrClosed):
			// Only the bind closes a client connection under its pipe.
			return endShutdown, nil
		}
		return endClientError, nil
	case tcpproxy.ReasonIdle:
		return endIdleTimeout, nil
	case tcpproxy.ReasonMaxDuration:
		return endMaxDuration, nil
	}
	return endClosed, nil
}

// connRecords are connection records between uses: a record handed to the
// access logger through its interface would otherwise be allocated for
// each connection.
var connRecords = sync.Pool{New: func() any { return new(logline.Conn) }}

// newConnRecord starts the record of connection c (as accepted: a tunnel's
// stream says where the tunnel went) whose server name is sni.
func newConnRecord(protocol, bind, listener string, c net.Conn, sni string) *logline.Conn {
	rec := connRecords.Get().(*logline.Conn)
	rec.Protocol, rec.Bind, rec.Listener, rec.Src, rec.SNI = protocol, bind, listener, c.RemoteAddr(), sni
	if tc, ok := c.(*tunnelConn); ok {
		rec.Destination = net.JoinHostPort(tc.host, strconv.Itoa(tc.port))
	}
	return rec
}

// bindName is how records name a bind (as its metrics do).
func bindName(port int) string { return "bind/" + strconv.Itoa(port) }

// logConn finishes rec and writes it, unless accessLog's filter refuses
// it, then returns it to the pool. c is the connection as accepted (its
// duration runs from then), via what carried its bytes (c, or the TLS
// terminated on it, whose client certificate CEL's source shows), be the
// backend picked (nil: none), host and port where the connection was going
// as networkAuthorization sees it (host "": the address it arrived on).
func (b *bind) logConn(rec *logline.Conn, c, via net.Conn, be *tcpBackend, host string, port int) {
	now := monoNow()
	if f := sock.ServerFields(c); f != nil && f.ServerOpened > 0 && f.ServerOpened <= now {
		rec.Duration = now - f.ServerOpened
	}
	logged := true
	if bc := b.current.Load(); bc != nil && bc.frontend.accessLog != nil {
		logged = bc.frontend.accessLog.applyConn(rec, c, via, be, host, port)
	}
	if logged {
		b.gw.accessLog.LogConn(rec)
	}
	extra := rec.Extra
	clear(extra)
	*rec = logline.Conn{Extra: extra[:0]}
	connRecords.Put(rec)
}

// applyConn is apply for a connection's record. Its expressions see
// `source`, `destination` and `backend` (as networkAuthorization and a
// TCP route know them); `request` is empty and `response` absent, so that
// an expression reading them fails: its field is left out, and a filter
// that fails logs the connection. Without expressions nothing is built.
func (p *accessLogPolicy) applyConn(rec *logline.Conn, c, via net.Conn, be *tcpBackend, host string, port int) bool {
	rec.Omit = p.connOmit
	if p.filter == nil && len(p.add) == 0 && p.otlp == nil {
		return true
	}
	peer := via
	if tc, ok := via.(*tls.Conn); ok {
		peer = &tlsConn{Conn: tc, raw: c} // its client certificate, for source
	}
	in := celrules.NetworkInput(peer, destination(destHost(c, host), port))
	if be != nil {
		in.Backend = be.cel
	}
	logged := keeps(p.filter, &in)
	if logged || p.otlp != nil && !p.otlp.own {
		rec.Extra = p.addFields(rec.Extra, &in)
	}
	if p.otlp != nil {
		p.otlp.exportConn(&in, rec, logged)
	}
	return logged
}
