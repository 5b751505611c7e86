package server

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/server/telemetry"
)

// bind is one listening port. Its socket and fasthttp server live across
// reloads; each request reads the bind's current compiled config once.
type bind struct {
	port     int
	gw       *Gateway
	acceptor acceptor // nil for an internal bind
	addr     string   // the address acceptor was opened at (Gateway.listenAddr)
	// listenPort is the acceptor's port (0 for none; port may be 0, the
	// OS's choice), read from other binds' goroutines (Gateway.listensOn)
	// while listen may set it again.
	listenPort atomic.Int32
	internal   bool
	// srv serves the bind's connections; a reload that changes a setting
	// fasthttp reads (maxBufferSize) swaps in a new one, which the next
	// connections get (serve).
	srv      atomic.Pointer[fasthttp.Server]
	current  atomic.Pointer[bindConfig]
	metrics  *telemetry.BindMetrics
	unrouted *telemetry.RouteMetrics

	draining atomic.Bool
	// closing counts what has connections close once their request is
	// answered: closingDrain while the bind drains, and one for each
	// connection a reload retired with a request in flight (retire.go).
	// finish reads it once per request, and looks at the connection only
	// when it is not zero.
	closing atomic.Int32
	// cutAt is when a drain's time ran out and cut the requests still in
	// flight (monoNow; 0: not cut), for their records (record).
	cutAt   atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]connState
	tunnels map[net.Conn]*tunnel // client connections becoming or being upgrade tunnels
	h2conns map[*h2Conn]struct{} // connections served in HTTP/2 (goAwayH2)
	// retiring holds the HTTP/1 connections without a state word
	// (stateWord) that a reload retired with a request in flight: they close
	// once it is answered (retire.go). One with a word carries the mark in
	// it (connRetiring).
	retiring map[net.Conn]struct{}
}

// frontendSettings are the per-process HTTP settings of frontendPolicies.http
// that shape the fasthttp server; a change needs new binds.
type frontendSettings struct {
	maxHeaders    int
	idleTimeout   time.Duration
	maxConnLife   time.Duration
	maxBufferSize int
	accessLog     *accessLogPolicy // nil: every request, the built-in fields
	h2            h2Settings
}

// idle is how long a keep-alive connection may wait for its next request:
// http1IdleTimeout, 10 minutes unless set (spec, FrontendHTTP).
func (fs frontendSettings) idle() time.Duration {
	if fs.idleTimeout > 0 {
		return fs.idleTimeout
	}
	return defaultIdleTimeout
}

// defaultIdleTimeout is http1IdleTimeout's default.
const defaultIdleTimeout = 10 * time.Minute

// idleDeadline is when a connection waiting for its next request is
// closed: after http1IdleTimeout, or once it reaches maxConnectionDuration
// (at once if it has already: the response it just sent was its last).
func (b *bind) idleDeadline(c net.Conn) time.Time {
	fs := &b.current.Load().frontend
	idle := fs.idle()
	if fs.maxConnLife > 0 {
		if left, ok := connLifeLeft(c, monoNow(), fs.maxConnLife); ok {
			idle = min(idle, max(left, 0))
		}
	}
	return deadlineAfter(idle)
}

// keepaliveIdle is http1IdleTimeout as the running snapshot says, for the
// netpoll transport's TCP keepalive probes on each new connection.
func (b *bind) keepaliveIdle() time.Duration {
	if bc := b.current.Load(); bc != nil {
		return bc.frontend.idleTimeout
	}
	return 0
}

// firstByte is how long a new connection may wait for its first byte: it is
// idle until then, but no longer than a request head may take.
func (b *bind) firstByte() time.Duration {
	idle := defaultIdleTimeout
	if bc := b.current.Load(); bc != nil {
		idle = bc.frontend.idle()
	}
	return min(idle, requestHeadTimeout())
}

// firstWait is how long a new connection of the bind's configuration bc
// may stay silent: its first-byte time, and no longer than a handshake may
// take on a port of TLS listeners alone, where the first byte begins the
// ClientHello.
func (b *bind) firstWait(bc *bindConfig) time.Duration {
	first := b.firstByte()
	if bc.tlsOnly() {
		first = min(first, bc.handshakeTimeout)
	}
	return first
}

// newBind opens port with its first configuration bc, which serves from
// the first connection on.
func newBind(gw *Gateway, port int, addr string, bc *bindConfig) (*bind, error) {
	b := &bind{port: port, gw: gw, conns: map[net.Conn]connState{}, tunnels: map[net.Conn]*tunnel{}, h2conns: map[*h2Conn]struct{}{}, retiring: map[net.Conn]struct{}{}}
	b.metrics = gw.metrics.Bind(port)
	b.unrouted = gw.metrics.Route("", "")
	b.srv.Store(b.newServer(bc.frontend))
	b.current.Store(bc)
	startReclaimer()
	if bc.internal {
		// Reached through CONNECT tunnels only.
		b.internal = true
		return b, nil
	}
	if err := b.listen(addr); err != nil {
		return nil, err
	}
	return b, nil
}

// listen opens the bind's socket at addr: at its start, or again after a
// failed reload closed it to open the port at another address.
func (b *bind) listen(addr string) error {
	a, err := listen(b.gw.transport, addr, acceptHooks{
		serve:        b.serveConn,
		idle:         b.keepaliveIdle,
		firstByte:    func() time.Duration { return b.firstWait(b.current.Load()) },
		silent:       b.closeSilentAtAccept,
		atAccept:     func() bool { return b.current.Load().tcp != nil },
		acceptFailed: (&acceptErrors{log: b.gw.log, port: b.port, metrics: b.metrics, now: time.Now}).failed,
	})
	if err != nil {
		return err
	}
	b.acceptor, b.addr = a, addr
	if ta, ok := a.Addr().(*net.TCPAddr); ok {
		b.listenPort.Store(int32(ta.Port))
	}
	return nil
}

// h1HeadLimit is the largest HTTP/1.x request head (request line and
// header fields), and fasthttp's read buffer per connection being served
// (a connection parked while idle holds none). 32 KiB is what nginx takes
// by default (4 buffers of 8 KiB), room for a large JWT beside a page's
// cookies; Envoy takes 60 KiB, HAProxy about 15 KiB. HTTP/2's header list
// limit (http2MaxHeaderSize) is separate, 64 KiB by default.
const h1HeadLimit = 32 << 10

// newServer is the bind's fasthttp server for frontend settings fs.
func (b *bind) newServer(fs frontendSettings) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      b.handle,
		ExpectHandler:                b.expect,
		ErrorHandler:                 b.handleParseError,
		ConnState:                    b.fastConnState,
		Name:                         "",
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		StreamRequestBody:            true,
		// With StreamRequestBody, bodies up to this size are read before the
		// handler runs; larger and chunked bodies stream to the backend.
		MaxRequestBodySize: fs.maxBufferSize,
		// The read buffer is also the request head's size limit (431
		// beyond it): h1HeadLimit.
		ReadBufferSize:  h1HeadLimit,
		WriteBufferSize: 16 << 10,
		// Buffers go back to the pools between requests: about 0.2 µs of
		// CPU per request, but an idle connection then holds ~24 KiB less,
		// which the 10,000-idle-connection budget needs.
		ReduceMemoryUsage: true,
		// The request head's deadline and the idle one are the bind's own
		// (serveConn, trackConn), from the deadline clock: fasthttp would
		// read the clock twice for each, on every request. A body gets
		// bodyReadTimeout (HeaderReceived), since it may stream.
		ReadTimeout:    0,
		IdleTimeout:    0,
		HeaderReceived: bodyReadConfig,
		// The handler takes its own start time (monoNow).
		LazyRequestTime:   true,
		KeepHijackedConns: false,
		CloseOnShutdown:   true,
		Logger:            fasthttpLogger{b.gw.log},
		// Parse errors without the request's bytes: a malformed request
		// may carry credentials, and the errors reach the debug log.
		SecureErrorLogMessage: true,
	}
}

// applyFrontend makes the bind follow frontend settings fs: what is read
// per request (header count, idle and connection age limits) follows the
// snapshot already; what fasthttp fixes per server (the size up to which a
// body is read before the handler runs) takes a new server, which serves
// the connections accepted from now on.
func (b *bind) applyFrontend(fs frontendSettings) {
	if srv := b.srv.Load(); srv.MaxRequestBodySize != fs.maxBufferSize {
		b.srv.Store(b.newServer(fs))
	}
}

// requestHeadTimeout bounds how long a client may take to send a request
// head, from its first byte (or, for a connection's first request, from the
// connection's start).
func requestHeadTimeout() time.Duration { return time.Duration(headTimeout.Load()) }

// headTimeout holds requestHeadTimeout, atomic so that tests can shorten it
// while connections of other tests' gateways may still read it.
var headTimeout = newAtomicInt64(int64(60 * time.Second))

// bodyReadTimeout bounds reading a streamed request body as a whole.
const bodyReadTimeout = time.Hour

// bodyIdleTimeout bounds the wait for each next piece of a request body
// being forwarded (nginx's client_body_timeout): a client that stops
// sending is answered 408 then, not an hour later.
var bodyIdleTimeout = newAtomicInt64(int64(60 * time.Second))

// declaredBodyLen is the length of the request's body as its head declares
// it: Content-Length, 0 when the head has neither Content-Length nor
// Transfer-Encoding (a request without framing has no body, RFC 9112 6.3;
// fasthttp reports -2), or -1 for a chunked body.
func declaredBodyLen(h *fasthttp.RequestHeader) int {
	if n := h.ContentLength(); n != -2 {
		return n
	}
	return 0
}

// newAtomicInt64 returns an atomic.Int64 holding v, for the package's
// settings that tests change while other tests' connections may read them.
func newAtomicInt64(v int64) *atomic.Int64 {
	var n atomic.Int64
	n.Store(v)
	return &n
}

// A request without a body keeps the head's deadline: nothing reads the
// connection again before the next request sets its own, and skipping the
// update saves a clock read and a deadline per request.
func bodyReadConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if declaredBodyLen(h) == 0 {
		return fasthttp.RequestConfig{}
	}
	// fasthttp's pre-read of the body (and its drain of a body nobody
	// reads) must progress within bodyIdleTimeout; a body being forwarded
	// moves the deadline on with every read (requestBody).
	return fasthttp.RequestConfig{ReadTimeout: time.Duration(bodyIdleTimeout.Load())}
}

func (b *bind) serveConn(conn net.Conn) {
	c := sock.DataPath(conn)
	b.metrics.ConnOpened()
	if b.draining.Load() {
		c.Close()
		b.connClosed(c)
		return
	}
	setConnOpened(c, monoNow())
	b.trackConn(c, connNew)
	bc := b.current.Load()
	if bc.tcp != nil {
		// A TCP listener's protocol may have the server speak first: the
		// connection is forwarded at once.
		b.dispatch(c)
		return
	}
	_ = c.SetReadDeadline(deadlineAfter(b.firstWait(bc)))
	if sc, ok := c.(*sock.Conn); ok {
		after := time.Duration(parkIdleAfter.Load())
		sc.EnableParking(after)
		if after > 0 && !b.awaitFirstByte(sc, after) {
			return
		}
	}
	b.dispatch(c)
}

// awaitFirstByte waits up to after for a new connection's first byte, and
// parks it if none came: a connection opened ahead of use (a browser's
// preconnect, a client's warmed pool) or left silent holds no goroutine
// while it waits. It reports whether the caller serves the connection now;
// if not, the connection is parked or closed and accounted for. A connection
// silent until its first-byte deadline is closed without an answer
// (closedSilent).
func (b *bind) awaitFirstByte(c *sock.Conn, after time.Duration) bool {
	readable, err := c.AwaitFirstByte(after)
	switch {
	case err != nil:
		c.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.closedSilent(c)
		}
	case readable:
		return true
	case c.Hold() && b.park(c):
		return false
	}
	b.connClosed(c)
	return false
}

// closeSilentAtAccept is netpoll's acceptor closing a connection that sent
// nothing for waited (firstWait) since its accept: netpoll never handed it
// to serveConn, so it is counted here, and closed and recorded as the std
// transport does one it waited for (closedSilent).
func (b *bind) closeSilentAtAccept(conn net.Conn, waited time.Duration) {
	c := sock.DataPath(conn)
	b.metrics.ConnOpened()
	setConnOpened(c, monoNow()-waited)
	c.Close()
	b.closedSilent(c)
	b.connClosed(c)
}

// serve runs fasthttp's loop on c until c closes or parks. A connection
// that parks (a sock.Conn, or TLS over one: tlsConn) ends fasthttp's loop
// with sock.ErrParked and is Held after fasthttp's Close.
func (b *bind) serve(c net.Conn) {
	setWriteStall(c, time.Duration(responseWriteStall.Load()))
	setLingerClose(c, true)
	_ = b.srv.Load().ServeConn(c)
	b.awaitTunnel(c)
	if p, ok := c.(sock.Parkable); ok && p.Held() && b.park(p) {
		return
	}
	b.connClosed(c)
}

// responseWriteStall bounds how long writing a response may wait for the
// client to take bytes (each wait afresh, as nginx's send_timeout): a client
// that stops reading would otherwise hold its request, and the upstream
// connection streaming to it, for as long as it stays connected. HTTP/2
// connections have their own (h2WriteStall); tunnels (WebSocket, CONNECT,
// h2c's upgrade) take it off, since a peer that reads nothing for a while
// is theirs to allow.
var responseWriteStall = newAtomicInt64(int64(60 * time.Second)) // settable by tests

// halfCloseGrace is how long a plain route's request still waits on its
// upstream after its client's FIN: a client may half-close after its
// request and wait for the answer (RFC 9112 9.6), but one that closed for
// good must not hold the request, its goroutine and an upstream connection
// for as long as a silent upstream keeps it (a reset ends the wait at once,
// and LLM and MCP requests take any hang-up at once, as nginx does).
var halfCloseGrace = newAtomicInt64(int64(60 * time.Second)) // settable by tests

// setWriteStall gives the client connection c (under TLS, its socket) the
// write stall d (0: none): sock.Conn.SetWriteStall, and for netpoll's
// connections their write timeout, which bounds each wait of a flush.
// Only the goroutine writing to c may call it.
func setWriteStall(c net.Conn, d time.Duration) {
	switch x := clientSocket(c).(type) {
	case *sock.Conn:
		x.SetWriteStall(d)
	case netpoll.Connection:
		_ = x.SetWriteTimeout(d)
	}
}

// setLingerClose has the client connection c's socket linger at its close
// while the client still sends (sock.Conn.SetLingerClose), so that an
// answer written before the close is not lost to a reset: a client that
// uploads a body the gateway refuses without reading (a 401, a 413, an
// upstream's early answer) gets that answer.
func setLingerClose(c net.Conn, on bool) {
	switch x := dataPathConn(c).(type) {
	case *sock.Conn:
		x.SetLingerClose(on)
	case *sock.PromptConn:
		x.SetLingerClose(on)
	}
}

// setPeerOwes tells the client connection c's socket whether the client
// owes body bytes the gateway did not read (sock.Conn.SetPeerOwes): its
// lingering close then lingers even before they arrive. netpoll's
// connections linger at every close already.
func setPeerOwes(c net.Conn, owes bool) {
	if x, ok := dataPathConn(c).(*sock.Conn); ok {
		x.SetPeerOwes(owes)
	}
}

// clientSocket is the connection under c that holds the client's socket:
// through terminated TLS, a CONNECT tunnel's stream (its client's
// connection) and the prompt wrapper of netpoll's connections. It is a
// *sock.Conn, a netpoll.Connection, or c itself when c is neither nor
// wraps one.
func clientSocket(c net.Conn) net.Conn {
	c = dataPathConn(c)
	if pc, ok := c.(*sock.PromptConn); ok {
		return pc.Conn
	}
	return c
}

// dataPathConn is the connection under c as sock.DataPath made it (a
// *sock.Conn or a *sock.PromptConn): through terminated TLS and a CONNECT
// tunnel's stream; c itself when it wraps neither.
func dataPathConn(c net.Conn) net.Conn {
	for {
		switch x := c.(type) {
		case *tlsConn:
			c = x.raw
		case *tunnelConn:
			c = x.raw
		default:
			return c
		}
	}
}

// connClosed is the bookkeeping of a client connection's end.
func (b *bind) connClosed(c net.Conn) {
	b.trackConn(c, connClosed)
	b.metrics.ConnClosed()
}

// parkIdleAfter is the check period of parking (sock.EnableParking): a
// keep-alive connection that received nothing for a whole period and waits
// for its next request gives up its goroutine and buffers. Between one and
// two periods of idleness, then; a client sending a request every few
// seconds pays a few microseconds for each, which is nothing next to what
// 10,000 idle connections would otherwise hold (bench/RESULTS.md, Memory).
var parkIdleAfter = newAtomicInt64(int64(time.Second)) // settable by tests

// park hands a connection fasthttp let go of (sock.ErrParked) to the
// parker, as idle; it reports false (and c is closed) when the bind is
// draining or parking failed.
func (b *bind) park(c sock.Parkable) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.draining.Load() {
		if w := stateWord(c); w != nil {
			b.storeState(w, connIdle)
		}
		b.conns[c] = connIdle
		b.metrics.ConnParked()
		if err := c.Park(parking{b}); err == nil {
			return true
		}
		b.metrics.ConnUnparked()
		delete(b.conns, c)
	}
	c.Close()
	return false
}

// parking is the bind's sock.ParkHandler.
type parking struct{ b *bind }

// Wake serves a parked connection that became readable, on a goroutine of
// its own; the bytes that woke it are the start of a request (or its end),
// so the head's deadline applies at once. A TLS connection is the same
// tlsConn, its session as it was; the record that woke it may carry no
// request bytes (a TLS 1.3 KeyUpdate), so its first decrypted byte is
// awaited as an idle wait first, under the idle deadline it parked with
// (awaitFirstRequest: it parks again if none comes).
func (p parking) Wake(c net.Conn) {
	p.b.metrics.ConnUnparked()
	go func() {
		p.b.trackConn(c, connNew)
		f := sock.ServerFields(c)
		if f == nil || !f.ServerClassified {
			// Parked before its first byte (awaitFirstByte).
			_ = c.SetReadDeadline(deadlineAfter(requestHeadTimeout()))
			p.b.dispatch(c)
			return
		}
		if tc, ok := c.(*tlsConn); ok && !p.b.awaitFirstRequest(tc) {
			return
		}
		_ = c.SetReadDeadline(deadlineAfter(requestHeadTimeout()))
		p.b.serve(c)
	}()
}

// Closed accounts for a parked connection the parker (or drain) closed.
// One parked before its first byte that the bind, not draining, did not
// close was closed at its first-byte deadline (closedSilent).
func (p parking) Closed(c net.Conn) {
	p.b.metrics.ConnUnparked()
	if f := sock.ServerFields(c); f != nil && !f.ServerClassified && !p.b.draining.Load() {
		p.b.closedSilent(c)
	}
	p.b.connClosed(c)
}

// trackConn follows the bind's connections through their states (drain
// needs them), and sets the read deadline each state has: a request's head
// must arrive within requestHeadTimeout of its first byte, and the next
// request's first byte within the idle timeout (http1IdleTimeout, as the
// bind's configuration has it now).
//
// The map holds the connections; their state is kept in the connection's
// own word where it has one (stateWord), so that the two changes every
// request makes (active, then idle) take no lock.
func (b *bind) trackConn(c net.Conn, st connState) {
	w := stateWord(c)
	retired := false
	if w != nil {
		retired = b.storeState(w, st)
	}
	switch st {
	case connActive:
		_ = c.SetReadDeadline(deadlineAfter(requestHeadTimeout()))
		// Reading a head: one ending in a bare-LF blank line gets 400 at
		// once instead of waiting for the head's deadline (sock.ErrBareLFHead).
		sock.ServerWaits(c, false)
		if w != nil {
			return
		}
	case connIdle:
		_ = c.SetReadDeadline(b.idleDeadline(c))
		sock.ServerWaits(c, true) // may park
		if w != nil && !retired && !b.draining.Load() {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch st {
	case connClosed:
		delete(b.conns, c)
		b.endRetired(c)
	case connHijacked:
		// An upgrade tunnel: in flight until it ends, so drain waits for it
		// and closes it when its time is up.
		b.endRetired(c)
		if t := b.tunnels[c]; t != nil {
			t.started = true
			b.conns[c] = st
		} else {
			delete(b.conns, c)
		}
	case connIdle:
		if b.endRetired(c) || retired || b.draining.Load() {
			// A finished request on a draining bind, or on a connection a
			// reload retired: close instead of waiting for the next one.
			c.Close()
			delete(b.conns, c)
			return
		}
		b.conns[c] = st
	default:
		b.conns[c] = st
	}
}

// fastConnState is fasthttp's ConnState hook.
func (b *bind) fastConnState(c net.Conn, st fasthttp.ConnState) {
	if st != fasthttp.StateActive {
		// The response is out (or the connection gone): the record the
		// request left (deferRecord).
		recordPending(c)
		if st == fasthttp.StateClosed || st == fasthttp.StateHijacked {
			sock.ForgetHangup(c)
		}
		if st == fasthttp.StateHijacked {
			// A tunnel passes resets on: its close must not linger.
			setLingerClose(c, false)
		}
	}
	b.trackConn(c, fromFastHTTP(st))
}

// stateWord returns the word in which a connection keeps its state for the
// bind, or nil for a connection without one (the map then keeps it).
func stateWord(c net.Conn) *atomic.Int32 {
	if f := sock.ServerFields(c); f != nil {
		return &f.ServerState
	}
	return nil
}

// setConnOpened records when serving c began (monoNow), where c has room
// for it. (fasthttp's RequestCtx.ConnTime is lost between requests when
// ReduceMemoryUsage releases the context.)
func setConnOpened(c net.Conn, t time.Duration) {
	if f := sock.ServerFields(c); f != nil {
		f.ServerOpened = t
	}
}

// connLifeLeft returns how long c, served since setConnOpened recorded, has
// left at now before it reaches life (maxConnectionDuration), and false
// when c has no record of its start.
func connLifeLeft(c net.Conn, now, life time.Duration) (time.Duration, bool) {
	f := sock.ServerFields(c)
	if f == nil {
		return 0, false
	}
	return f.ServerOpened + life - now, true
}

// connState returns a tracked connection's state; mapped is its value in
// the map.
func stateOf(c net.Conn, mapped connState) connState {
	if w := stateWord(c); w != nil {
		return connState(w.Load()) &^ connRetiring
	}
	return mapped
}

// storeState makes st the state in a connection's word w, and reports
// whether the connection was marked retiring (retire.go), which the store
// takes off. A Swap: as cheap as a store where it matters (amd64's is an
// XCHG either way).
func (b *bind) storeState(w *atomic.Int32, st connState) (retired bool) {
	if connState(w.Swap(int32(st)))&connRetiring == 0 {
		return false
	}
	b.closing.Add(-1)
	return true
}

// stopAccepting closes the listening socket.
func (b *bind) stopAccepting() {
	if b.acceptor == nil {
		return
	}
	if err := b.acceptor.Close(); err != nil {
		b.gw.log.Warn("closing listener", zap.Int("port", b.port), zap.Error(err))
	}
}

// startDraining has the bind's connections close once their requests are
// answered (and new ones close at once).
func (b *bind) startDraining() {
	if b.draining.CompareAndSwap(false, true) {
		b.closing.Add(closingDrain)
	}
}

// closingDrain is what draining adds to bind.closing.
const closingDrain = 1 << 24

// drain stops accepting, closes idle connections, and waits for in-flight
// requests until ctx ends; then it closes whatever is left, and returns how
// many connections that cut (0: every one ended by itself).
func (b *bind) drain(ctx context.Context) (cut int) {
	b.startDraining()
	b.stopAccepting()
	// HTTP/2 connections are told to go away (GOAWAY) and close once their
	// streams are done; drain waits for that as for requests in flight.
	b.goAwayH2()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if b.closeIdle() == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return b.cut()
		case <-tick.C:
		}
	}
}

// closeIdle closes idle connections and reports how many are still active.
func (b *bind) closeIdle() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	active := 0
	for c, st := range b.conns {
		if st = stateOf(c, st); st == connIdle || st == connNew {
			c.Close()
			delete(b.conns, c)
			continue
		}
		active++
	}
	return active
}

// cut ends what is left when a drain's time ran out: a request waiting on
// an upstream stops waiting, as at its client's hang-up (an HTTP/2 stream's
// ends as its connection closes), and every connection closes. Each
// request cut leaves its one record, saying so (record), and cut waits for
// them, up to cutGrace: Shutdown's caller exits the process next, and
// their lines would be lost. (A request held where the cut does not reach,
// a policy's call to an external service, may outlast the wait.) It
// returns how many connections it closed.
func (b *bind) cut() int {
	b.cutAt.Store(int64(monoNow()))
	b.mu.Lock()
	conns := make([]net.Conn, 0, len(b.conns))
	for c := range b.conns {
		sock.CutHangup(c)
		c.Close()
		// Left in the map: a connection leaves it once its serving ended,
		// its requests' records written (connClosed).
		conns = append(conns, c)
	}
	h2 := make([]*h2Conn, 0, len(b.h2conns))
	for hc := range b.h2conns {
		h2 = append(h2, hc)
	}
	b.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(cutGrace)
	for b.serving(conns, h2) && time.Now().Before(deadline) {
		<-tick.C
	}
	return len(conns)
}

// cutGrace bounds cut's wait for the records of the requests it cut. A
// Kubernetes grace period leaves at least a second after the drain
// (graceBeforeKill, cmd/gateway).
const cutGrace = 500 * time.Millisecond

// serving reports whether any of conns is still served, or any of h2 still
// runs a stream's handler (whose record is written before it ends).
func (b *bind) serving(conns []net.Conn, h2 []*h2Conn) bool {
	b.mu.Lock()
	for _, c := range conns {
		if _, ok := b.conns[c]; ok {
			b.mu.Unlock()
			return true
		}
	}
	b.mu.Unlock()
	for _, hc := range h2 {
		hc.mu.Lock()
		n := hc.handlers
		hc.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// fasthttpLogger sends fasthttp's own messages to zap at debug level.
type fasthttpLogger struct{ log *zap.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Sugar().Debugf(format, args...)
}
