package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/codec/logline"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/server/telemetry"
)

// Transport names how a bind accepts connections.
type Transport string

// Transports. Both hand every accepted connection to the same serve function.
// The standard library path is the default: under fasthttp it measured faster
// than netpoll (bench/RESULTS.md, docs/ARCHITECTURE.md); netpoll stays
// selectable and tested so the comparison can be repeated.
const (
	TransportNetpoll Transport = "netpoll"
	TransportStd     Transport = "std"
)

// acceptor accepts connections on one address until closed.
type acceptor interface {
	Addr() net.Addr
	// Close stops accepting; connections already accepted are not touched.
	Close() error
}

// acceptHooks is what an acceptor asks of its bind.
type acceptHooks struct {
	// serve owns a connection from the call on and closes it.
	serve func(net.Conn)
	// idle is the keep-alive idle time (netpoll turns on TCP keepalive
	// probes at it).
	idle func() time.Duration
	// firstByte says how long a new connection may stay silent (serve
	// applies it itself; netpoll calls serve only once bytes arrive, so
	// its acceptor has silent close a connection that stays silent
	// longer).
	firstByte func() time.Duration
	// silent closes, instead of serve, a connection that sent nothing for
	// the time firstByte gave it since its accept.
	silent func(c net.Conn, waited time.Duration)
	// atAccept reports whether a new connection is served at once, before
	// its first byte: a TCP listener's protocol may have the server speak
	// first.
	atAccept func() bool
	// acceptFailed is told of each accept that failed (the std acceptor's;
	// netpoll's event loop keeps its own).
	acceptFailed func(error)
}

// listen opens addr with the transport and calls h.serve for every
// connection, each on its own goroutine.
func listen(t Transport, addr string, h acceptHooks) (acceptor, error) {
	if t == TransportStd {
		return listenStd(addr, h)
	}
	return listenNetpoll(addr, h)
}

// silenceWatch closes a netpoll connection that sends nothing in time;
// served is set by whichever of the timer and the first request comes first.
type silenceWatch struct {
	timer  *time.Timer
	served atomic.Bool
}

type silenceWatchKey struct{}

type netpollAcceptor struct {
	ln   netpoll.Listener
	loop netpoll.EventLoop
	done chan struct{}
}

// listenNetpoll accepts on netpoll's event loop. netpoll reads each
// connection's socket into a buffer of its own whenever it is readable,
// whatever pace the reader keeps: it has no read backpressure
// (cloudwego/netpoll#422), so a client that sends faster than its request
// is forwarded is buffered in memory without bound. The std transport,
// which reads only as its reader asks, is the default for that reason too.
func listenNetpoll(addr string, h acceptHooks) (acceptor, error) {
	ln, err := netpoll.CreateListener(config.ListenNetwork(addr), addr)
	if err != nil {
		return nil, err
	}
	onConnect := func(ctx context.Context, conn netpoll.Connection) context.Context {
		if d := h.idle(); d > 0 {
			// netpoll's idle timeout only turns on TCP keepalive probes at
			// this interval (whole seconds): it does not close a connection
			// that never sends a byte, which netpoll does not hand to serve
			// until it does. Once a request arrives fasthttp's own idle
			// timeout applies. Set per connection, it follows reloads.
			_ = conn.SetIdleTimeout(d)
		}
		w := &silenceWatch{}
		if h.atAccept() {
			// Served here and now: netpoll calls OnRequest only once the
			// client sent a byte, which a client of a server-first
			// protocol never does. netpoll runs OnRequest only after
			// OnConnect returned, and serve has closed the connection by
			// then; served keeps OnRequest away all the same.
			w.served.Store(true)
			h.serve(conn)
			return context.WithValue(ctx, silenceWatchKey{}, w)
		}
		// netpoll hands a connection to onRequest only once it has bytes: a
		// silent one is closed here when its first-byte time passes.
		first := h.firstByte()
		w.timer = time.AfterFunc(first, func() {
			if w.served.CompareAndSwap(false, true) {
				h.silent(conn, first)
			}
		})
		return context.WithValue(ctx, silenceWatchKey{}, w)
	}
	onRequest := func(ctx context.Context, conn netpoll.Connection) error {
		if w, ok := ctx.Value(silenceWatchKey{}).(*silenceWatch); ok {
			if !w.served.CompareAndSwap(false, true) {
				return nil // closed for its silence meanwhile, or served at accept
			}
			w.timer.Stop()
		}
		// fasthttp reads the connection through net.Conn; this call returns when
		// the connection is finished (an upgrade tunnel included, see
		// bind.awaitTunnel), so netpoll never re-enters it.
		h.serve(conn)
		return nil
	}
	opts := []netpoll.Option{netpoll.WithOnConnect(onConnect)}
	loop, err := netpoll.NewEventLoop(onRequest, opts...)
	if err != nil {
		ln.Close()
		return nil, err
	}
	a := &netpollAcceptor{ln: ln, loop: loop, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		_ = loop.Serve(ln)
	}()
	return a, nil
}

func (a *netpollAcceptor) Addr() net.Addr { return a.ln.Addr() }

func (a *netpollAcceptor) Close() error {
	// Shutdown detaches the listener and closes connections netpoll sees as
	// idle; a cancelled context makes it return at once, leaving connections in
	// service to the bind's own drain.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		err := a.loop.Shutdown(ctx)
		select {
		case <-a.done:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-time.After(time.Millisecond):
			// Shutdown does nothing until Serve has started, which it may
			// not have yet when the listener is closed right after opening:
			// try again.
		}
	}
}

type stdAcceptor struct {
	ln   net.Listener
	wg   sync.WaitGroup
	once sync.Once
}

func listenStd(addr string, h acceptHooks) (acceptor, error) {
	// KeepAlive -1: no TCP keepalive probes on accepted connections unless
	// frontendPolicies.tcp.keepalives asks for them (dispatch sets them),
	// as in agentgateway. Go's default (probes after 15 s) is four
	// setsockopt calls on every connection that the config never asked for.
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), config.ListenNetwork(addr), addr)
	if err != nil {
		return nil, err
	}
	return serveStd(ln, h), nil
}

// serveStd accepts on ln until it is closed, handing each connection to
// h.serve on a goroutine of its own.
func serveStd(ln net.Listener, h acceptHooks) *stdAcceptor {
	a := &stdAcceptor{ln: ln}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		var delay time.Duration
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				if h.acceptFailed != nil {
					h.acceptFailed(err)
				}
				// Temporary errors (EMFILE): back off so the loop does not spin.
				if delay == 0 {
					delay = 5 * time.Millisecond
				} else if delay < time.Second {
					delay *= 2
				}
				time.Sleep(delay)
				continue
			}
			delay = 0
			go h.serve(c)
		}
	}()
	return a
}

// acceptErrorEvery is how often a bind's failed accepts are logged at most.
const acceptErrorEvery = logline.DefaultThrottle

// acceptErrors tells of a bind's failed accepts (too many open files, out
// of memory: the acceptor backs off and accepts again, while clients wait
// in the listen queue or time out): each is counted in the bind's metrics,
// and logged as a warning at most once per acceptErrorEvery, with how many
// failed since the last line, so that a descriptor shortage shows without
// a line per attempt.
type acceptErrors struct {
	log     *zap.Logger
	port    int
	metrics *telemetry.BindMetrics
	now     func() time.Time
	warns   logline.Throttle // at its default interval, acceptErrorEvery
}

// failed tells of the failed accept err.
func (a *acceptErrors) failed(err error) {
	a.metrics.AcceptFailed()
	if dropped, ok := a.warns.Allow(a.now()); ok {
		a.log.Warn("accepting connections failed; backing off", zap.String("bind", bindName(a.port)), zap.Error(err),
			logline.DroppedField(dropped), zap.Duration("warned at most every", acceptErrorEvery))
	}
}

func (a *stdAcceptor) Addr() net.Addr { return a.ln.Addr() }

func (a *stdAcceptor) Close() error {
	var err error
	a.once.Do(func() { err = a.ln.Close() })
	a.wg.Wait()
	return err
}
