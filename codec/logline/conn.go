package logline

import (
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Conn is one connection's access record: a connection the gateway
// forwarded (a TCP route, TLS passthrough, TLS terminated and forwarded, a
// CONNECT tunnel's stream), or one it closed before forwarding it (refused,
// no route). Its line is the request line's sibling: the same logger name,
// the message ConnMessage, the fields in the order below. A logger keeps
// nothing a points to after LogConn returns.
type Conn struct {
	Protocol string // tcp, tls, or http for a refused plain HTTP connection
	Bind     string
	Listener string
	Route    string
	Backend  string
	Src      net.Addr // nil: unknown (no field)
	SNI      string   // the ClientHello's server name; "": none
	// Destination is a CONNECT tunnel's target (host:port); "": the
	// connection was not tunnelled.
	Destination string
	// Endpoint is the upstream address dialed; "": none was.
	Endpoint string
	// BytesIn went from the client upstream, BytesOut from the upstream
	// to the client.
	BytesIn, BytesOut int64
	Duration          time.Duration
	// End is why the connection ended (the gateway's Conn* names).
	End           string
	UpstreamError error // nil: none
	// Extra are fields the configuration adds (accessLog.add), last.
	Extra []AccessField
	// Omit are the built-in fields the line leaves out (accessLog.remove).
	Omit AccessFields
}

// ConnMessage is the message of every connection line.
const ConnMessage = "connection"

// has reports whether the line writes field f.
func (c *Conn) has(f AccessFields) bool { return c.Omit&f == 0 }

// maxConnFields bounds a connection record's built-in fields.
const maxConnFields = 16

// connFieldArrays holds the fields of a connection line while zap writes
// it, as accessFieldArrays does for request lines.
var connFieldArrays = sync.Pool{New: func() any { return new([maxConnFields]zap.Field) }}

// LogConn logs c as an entry at info level with message ConnMessage.
func (z zapAccess) LogConn(c *Conn) {
	ce := z.l.Check(zap.InfoLevel, ConnMessage)
	if ce == nil {
		return
	}
	arr := connFieldArrays.Get().(*[maxConnFields]zap.Field)
	fields := arr[:0]
	add := func(f AccessFields, field zap.Field) {
		if c.has(f) {
			fields = append(fields, field)
		}
	}
	add(FieldProtocol, zap.String("protocol", c.Protocol))
	add(FieldBind, zap.String("bind", c.Bind))
	add(FieldListener, zap.String("listener", c.Listener))
	add(FieldRoute, zap.String("route", c.Route))
	add(FieldBackend, zap.String("backend", c.Backend))
	if c.Src != nil {
		add(FieldSrc, zap.Stringer("src", c.Src))
	}
	if c.SNI != "" {
		add(FieldSNI, zap.String("tls.sni", c.SNI))
	}
	if c.Destination != "" {
		add(FieldDestination, zap.String("destination", c.Destination))
	}
	if c.Endpoint != "" {
		add(FieldEndpoint, zap.String("endpoint", c.Endpoint))
	}
	add(FieldBytesIn, zap.Int64("bytes_in", c.BytesIn))
	add(FieldBytesOut, zap.Int64("bytes_out", c.BytesOut))
	add(FieldDuration, zap.Duration("duration", c.Duration))
	add(FieldEnd, zap.String("end", c.End))
	if c.UpstreamError != nil {
		add(FieldUpstreamError, zap.NamedError("upstream_error", c.UpstreamError))
	}
	for i := range c.Extra {
		fields = append(fields, c.Extra[i].zapField())
	}
	ce.Write(fields...)
	clear(arr[:])
	connFieldArrays.Put(arr)
}

// The connection line's built-in keys, in the line's order.
const (
	connProtocol = iota
	connBind
	connListener
	connRoute
	connBackend
	connSrc
	connSNI
	connDestination
	connEndpoint
	connBytesIn
	connBytesOut
	connDuration
	connEnd
	connKeyCount
)

var connKeyNames = [connKeyCount]string{"protocol", "bind", "listener", "route", "backend", "src", "tls.sni",
	"destination", "endpoint", "bytes_in", "bytes_out", "duration", "end"}

// connLineKeys are a format's constant parts of the connection line: the
// head (after the time) and each key with the separator before it, for a
// line that leaves none out.
type connLineKeys struct {
	head string
	keys [connKeyCount]string
}

func connKeysOf(head, first, sep, colon string) *connLineKeys {
	k := &connLineKeys{head: head}
	for i, name := range connKeyNames {
		s := sep
		if i == 0 {
			s = first
		}
		k.keys[i] = s + `"` + name + `"` + colon
	}
	return k
}

var (
	consoleConnKeys = connKeysOf("\tINFO\t"+AccessLoggerName+"\t"+ConnMessage+"\t{", "", ", ", ": ")
	jsonConnKeys    = connKeysOf(`","logger":"`+AccessLoggerName+`","msg":"`+ConnMessage+`"`, ",", ",", ":")
)

// LogConn writes c's line.
func (w *AccessWriter) LogConn(c *Conn) {
	var stack [maxStackLine]byte
	w.sink.write(w.appendConnLine(stack[:0], c, w.now()))
}

// appendConnLine appends c's line stamped with t. Every key goes through
// appendKey, which puts the separator its place needs, so an omitted
// field needs no other care. The client's address is formatted afresh, not
// through the writer's address cache: each connection has an address of
// its own, which the cache would only copy and keep.
func (w *AccessWriter) appendConnLine(bs []byte, c *Conn, t time.Time) []byte {
	k := w.keys
	spaced := !k.json
	ck := consoleConnKeys
	if k.json {
		ck = jsonConnKeys
		bs = append(bs, `{"level":"info","ts":"`...)
	}
	bs = seconds.appendTime(bs, t, true)
	bs = append(bs, ck.head...)
	// A line that leaves nothing out writes constant keys; otherwise each
	// key is written with the separator its place needs.
	whole := c.Omit&ConnFields == 0
	key := func(f AccessFields, i int) bool {
		switch {
		case whole:
			bs = append(bs, ck.keys[i]...)
		case c.has(f):
			bs = appendKey(bs, connKeyNames[i], spaced)
		default:
			return false
		}
		return true
	}
	if key(FieldProtocol, connProtocol) {
		bs = appendQuoted(bs, c.Protocol)
	}
	if key(FieldBind, connBind) {
		bs = appendQuoted(bs, c.Bind)
	}
	if key(FieldListener, connListener) {
		bs = appendQuoted(bs, c.Listener)
	}
	if key(FieldRoute, connRoute) {
		bs = appendQuoted(bs, c.Route)
	}
	if key(FieldBackend, connBackend) {
		bs = appendQuoted(bs, c.Backend)
	}
	if c.Src != nil && c.has(FieldSrc) {
		if addr, ok := c.Src.(*net.TCPAddr); ok {
			var text [64]byte
			key(FieldSrc, connSrc)
			bs = appendQuoted(bs, appendTCPAddr(text[:0], addr))
		} else {
			bs = w.addField(bs, zap.Stringer("src", c.Src))
		}
	}
	if c.SNI != "" && key(FieldSNI, connSNI) {
		bs = appendQuoted(bs, c.SNI)
	}
	if c.Destination != "" && key(FieldDestination, connDestination) {
		bs = appendQuoted(bs, c.Destination)
	}
	if c.Endpoint != "" && key(FieldEndpoint, connEndpoint) {
		bs = appendQuoted(bs, c.Endpoint)
	}
	if key(FieldBytesIn, connBytesIn) {
		bs = appendInt(bs, c.BytesIn)
	}
	if key(FieldBytesOut, connBytesOut) {
		bs = appendInt(bs, c.BytesOut)
	}
	if key(FieldDuration, connDuration) {
		bs = appendSeconds(bs, c.Duration)
	}
	if key(FieldEnd, connEnd) {
		bs = appendQuoted(bs, c.End)
	}
	if c.UpstreamError != nil && c.has(FieldUpstreamError) {
		bs = w.addField(bs, zap.NamedError("upstream_error", c.UpstreamError))
	}
	for i := range c.Extra {
		bs = appendKey(bs, c.Extra[i].Key, spaced)
		bs = c.Extra[i].appendValue(bs)
	}
	return append(bs, k.end...)
}
