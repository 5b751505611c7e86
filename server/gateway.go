// Package server owns the running gateway: listeners and their transports, the
// HTTP request path, the compiled configuration snapshot and its atomic swap on
// reload, graceful draining, and the admin, stats and readiness endpoints.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/pool"
	"github.com/relaygate/gateway/server/telemetry"
)

// Options configure a Gateway.
type Options struct {
	Logger *zap.Logger
	// AccessLog receives one record per request and one per connection of
	// a TCP or TLS listener (logline.Conn); nil logs them through
	// Logger (logline.ZapAccess).
	AccessLog logline.AccessLogger
	// Transport accepts connections; the default is TransportStd, which
	// measured faster than netpoll under fasthttp (docs/ARCHITECTURE.md).
	Transport Transport
	// BindHost is the address binds listen on; "" means every interface
	// (IPv4's alone when the config turns IPv6 off: listenAddr).
	BindHost string
	// Metrics is the registry to record into; nil creates one.
	Metrics *telemetry.Registry
	// ListenAddr, when set, maps a configured port to the address to listen on
	// (tests use it to let the OS choose ports); Addrs reports the result. An
	// address without a host is every interface, as with BindHost "".
	ListenAddr func(port int) string
}

// Gateway is the data plane: its binds, the current snapshot and the runtime
// state (connection pools, metrics) that outlives snapshots.
type Gateway struct {
	log       *zap.Logger
	accessLog logline.AccessLogger
	transport Transport
	bindHost  string
	listenAt  func(port int) string
	metrics   *telemetry.Registry

	// usage holds the runtime state snapshots lease (Snapshot.lease).
	usage *pool.Usage

	reloads    *telemetry.ReloadMetrics
	lastReload atomic.Pointer[ReloadStatus]

	mirrorSlots chan struct{}

	snap  atomic.Pointer[Snapshot]
	mu    sync.Mutex // serialises Apply and Shutdown
	binds map[int]*bind
	// tunnelBinds is binds for CONNECT tunnels to look up without the
	// lock (port 0: the internal bind of every port).
	tunnelBinds atomic.Pointer[map[int]*bind]
	ready       atomic.Bool
	draining    bool // StartDraining was called; a reload must not restore readiness
	shutdown    bool
}

// New returns a gateway with no binds; Apply starts serving a config.
func New(opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.AccessLog == nil {
		opts.AccessLog = logline.ZapAccess(opts.Logger)
	}
	if opts.Transport == "" {
		opts.Transport = TransportStd
	}
	if opts.Metrics == nil {
		opts.Metrics = telemetry.NewRegistry()
	}
	return &Gateway{
		log:         opts.Logger,
		accessLog:   opts.AccessLog,
		transport:   opts.Transport,
		bindHost:    opts.BindHost,
		listenAt:    opts.ListenAddr,
		metrics:     opts.Metrics,
		usage:       pool.NewUsage(),
		reloads:     opts.Metrics.Reload(),
		mirrorSlots: make(chan struct{}, maxMirrorsInFlight),
		binds:       map[int]*bind{},
	}
}

// Apply compiles f and makes it the running config: binds for new ports open,
// binds for removed ports drain and close, binds whose port stays keep their
// sockets and connections. On error nothing changes.
func (g *Gateway) Apply(f *config.File) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutdown {
		return errors.New("gateway is shutting down")
	}
	s, err := compile(g, f)
	if err != nil {
		return err
	}
	opened := map[int]*bind{}
	var replaced, moved []*bind
	v4 := ipv4Only(f)
	for port, bc := range s.binds {
		addr := g.listenAddr(port, v4)
		if old, ok := g.binds[port]; ok {
			if old.internal == bc.internal && (bc.internal || old.addr == addr) {
				continue
			}
			// A bind becoming internal closes its socket; one leaving
			// internal opens one; one whose address changes (enableIpv6)
			// opens another, once the old one, which holds the port, is
			// closed: a new bind each time.
			replaced = append(replaced, old)
			if !old.internal && !bc.internal {
				old.stopAccepting()
				moved = append(moved, old)
			}
		}
		bc := s.binds[port]
		bc.frontend = s.frontend
		b, err := newBind(g, port, addr, bc)
		if err != nil {
			for _, nb := range opened {
				nb.stopAccepting()
			}
			for _, old := range moved {
				// Back where it was, as the running config has it.
				if lerr := old.listen(old.addr); lerr != nil {
					g.log.Error("reopening a port after a failed reload", zap.Int("port", old.port), zap.Error(lerr))
				}
			}
			s.lease.Release()
			return fmt.Errorf("binds: port %d: %w", port, err)
		}
		opened[port] = b
	}
	for _, old := range replaced {
		g.closeBind(old)
	}
	for port, b := range opened {
		g.binds[port] = b
	}
	for port, b := range g.binds {
		bc := s.binds[port]
		if bc == nil {
			continue
		}
		bc.frontend = s.frontend
		prev := b.current.Swap(bc)
		b.applyFrontend(s.frontend)
		if _, fresh := opened[port]; !fresh && !bc.setsUpAs(prev) {
			// Connections whose TLS handshake or protocol the new
			// configuration would not make end gracefully (retire.go).
			b.retireStale(prev, bc)
		}
	}
	prev := g.snap.Swap(s)
	s.lease.Start()
	if prev != nil {
		// What only the previous snapshot used is closed; in the
		// background, as an MCP backend's stdio servers take a moment to
		// stop.
		go prev.lease.Release()
	}
	for port, b := range g.binds {
		if _, keep := s.binds[port]; keep {
			continue
		}
		delete(g.binds, port)
		g.closeBind(b)
	}
	tunnels := make(map[int]*bind, len(g.binds))
	for port, b := range g.binds {
		tunnels[port] = b
	}
	g.tunnelBinds.Store(&tunnels)
	for port, b := range opened {
		if b.acceptor != nil {
			g.log.Info("listening", zap.Int("port", port), zap.String("address", b.acceptor.Addr().String()))
		}
	}
	g.ready.Store(!g.draining)
	return nil
}

// ReloadStatus is the outcome of a configuration reload.
type ReloadStatus struct {
	At     time.Time
	Source string // the file, or how the config came
	Err    string // why it failed; empty when it succeeded
}

// NoteReload records a reload of the running gateway's configuration (a
// changed file): counted in agentgateway_config_reloads_total and the last
// reload's gauges, and shown on the admin page until the next, so a failed
// reload, which leaves the previous configuration running, is seen beyond
// the log. err is the reload's error, parsing included.
func (g *Gateway) NoteReload(source string, err error) {
	st := &ReloadStatus{At: time.Now(), Source: source}
	if err != nil {
		st.Err = err.Error()
	}
	g.reloads.Record(st.At, err)
	g.lastReload.Store(st)
}

// LastReload returns the last reload noted, if any.
func (g *Gateway) LastReload() (ReloadStatus, bool) {
	if st := g.lastReload.Load(); st != nil {
		return *st, true
	}
	return ReloadStatus{}, false
}

// removedBindDrain bounds draining a bind removed by a reload.
const removedBindDrain = 30 * time.Second

// closeBind ends a bind a reload removed or replaced: its socket closes now,
// not in the background drain, so that a later reload can open the same
// port again at once, and the log says the port stopped listening when it
// did; its connections end in the background, within removedBindDrain, and
// the log says when (by then the port may be listening again, in another
// bind).
func (g *Gateway) closeBind(b *bind) {
	b.startDraining()
	b.stopAccepting()
	if b.acceptor != nil {
		g.log.Info("stopped listening", zap.Int("port", b.port))
	}
	go func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), removedBindDrain)
		defer cancel()
		cut := b.drain(ctx)
		g.log.Info("closed bind drained", zap.Int("port", b.port), zap.Duration("took", time.Since(start)), zap.Int("cut", cut))
	}()
}

// listenAddr is the address the bind of port listens on: ListenAddr's, or
// BindHost's. Without a host it is every interface: IPv6's and IPv4's
// (dual stack) by default, IPv4's alone when the config turns IPv6 off
// (v4), as agentgateway binds 0.0.0.0 then.
func (g *Gateway) listenAddr(port int, v4 bool) string {
	addr := net.JoinHostPort(g.bindHost, strconv.Itoa(port))
	if g.listenAt != nil {
		addr = g.listenAt(port)
	}
	if host, p, err := net.SplitHostPort(addr); err == nil && host == "" && v4 {
		return net.JoinHostPort("0.0.0.0", p)
	}
	return addr
}

// Ready reports whether every bind of the running config is listening and the
// gateway is not draining.
func (g *Gateway) Ready() bool { return g.ready.Load() }

// StartDraining turns readiness off for good; listeners keep accepting, and
// a reload during the drain leaves readiness off.
func (g *Gateway) StartDraining() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.draining = true
	g.ready.Store(false)
}

// Shutdown stops accepting on every bind and waits for in-flight requests
// until ctx ends, then closes the remaining connections.
func (g *Gateway) Shutdown(ctx context.Context) {
	g.mu.Lock()
	g.shutdown = true
	g.ready.Store(false)
	binds := make([]*bind, 0, len(g.binds))
	for _, b := range g.binds {
		binds = append(binds, b)
	}
	g.binds = map[int]*bind{}
	g.mu.Unlock()
	if s := g.snap.Load(); s != nil {
		// MCP clients' streams carry no call to wait for: they end now
		// rather than hold the drain to its deadline, and their clients
		// reconnect elsewhere, resuming their sessions.
		for _, m := range s.mcp {
			m.EndStreams()
		}
	}
	var wg sync.WaitGroup
	for _, b := range binds {
		wg.Add(1)
		go func(b *bind) {
			defer wg.Done()
			b.drain(ctx)
		}(b)
	}
	wg.Wait()
	if s := g.snap.Load(); s != nil {
		// The telemetry exporters send what they hold (up to 5 s each,
		// against a collector that hangs): within the drain's deadline,
		// past which the process is killed anyway (a pod's grace period),
		// and a second at least once it passed. Unbounded, a hung
		// collector held the exit 10 s past an idle drain.
		released := make(chan struct{})
		go func() {
			s.lease.Release()
			close(released)
		}()
		select {
		case <-released:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-released:
		case <-t.C:
			g.log.Warn("telemetry exporters did not finish sending within the drain's deadline; what they held is lost")
		}
	}
}

// Addrs returns the listening address of every bind, by configured port.
func (g *Gateway) Addrs() map[int]net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int]net.Addr, len(g.binds))
	for port, b := range g.binds {
		if b.acceptor != nil {
			out[port] = b.acceptor.Addr()
		}
	}
	return out
}

// recordsPending counts the connections whose last request's record (its
// access line and metrics) waits to be written once its response is out
// (deferRecord): tests that read the log or the metrics wait for none.
func (g *Gateway) recordsPending() int {
	g.mu.Lock()
	binds := make([]*bind, 0, len(g.binds))
	for _, b := range g.binds {
		binds = append(binds, b)
	}
	g.mu.Unlock()
	n := 0
	for _, b := range binds {
		n += b.recordsPending()
	}
	return n
}

// Ports returns the configured ports, sorted.
func (g *Gateway) Ports() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]int, 0, len(g.binds))
	for port := range g.binds {
		out = append(out, port)
	}
	sort.Ints(out)
	return out
}

// Metrics is the gateway's metric registry.
func (g *Gateway) Metrics() *telemetry.Registry { return g.metrics }

// ConfigDump returns the running config as JSON.
func (g *Gateway) ConfigDump() ([]byte, error) {
	s := g.snap.Load()
	if s == nil {
		return []byte("{}"), nil
	}
	return json.MarshalIndent(s.file, "", "  ")
}
