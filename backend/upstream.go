package backend

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"github.com/relaygate/gateway/backend/sock"
)

// PoolSettings shape one upstream connection pool. Two backends with the same
// address and settings share a pool.
type PoolSettings struct {
	Dialing
	// IdleTimeout closes pooled connections idle for longer (config.backend.poolIdleTimeout).
	IdleTimeout time.Duration
	// MaxIdle is how many connections the pool keeps idle at most
	// (config.backend.poolMaxSize, in agentgateway's meaning): requests
	// still get as many connections as they need, up to MaxConns, and a
	// connection given back beyond MaxIdle idle ones closes. 0 means no
	// limit; NoIdleConns keeps none (every connection closes after its
	// request).
	MaxIdle int
	// MaxConns caps the connections to the address, busy and idle, on
	// each side (HTTP/1.1, HTTP/2); 0 means DefaultMaxConns. A request
	// that finds them all busy waits for one to come free (HTTP/2: for a
	// stream) for up to the connect timeout, and within its own deadline,
	// then fails with ErrPoolFull.
	MaxConns int
	// TLS makes the pool's connections TLS (LLM providers, backendTLS).
	TLS UpstreamTLS
}

// DefaultPoolIdleTimeout is agentgateway's default pool idle timeout.
const DefaultPoolIdleTimeout = 90 * time.Second

// NoIdleConns as PoolSettings.MaxIdle keeps no connection idle
// (poolMaxSize: 0).
const NoIdleConns = -1

// DefaultMaxConns caps the connections of one pool to one address, per
// HTTP version. fasthttp's own default, 512, with no wait, answered the
// 513th concurrent request 503 at once: six HTTP/2 clients with 100
// streams each against a 50 ms backend got 39% 503s, and six clients that
// stopped reading their responses held all 512. agentgateway (hyper) and
// nginx set no limit, Envoy's circuit breakers 1024 connections with 1024
// requests waiting. A cap stays, so that one backend cannot take every
// file descriptor of the process (the clients' connections need theirs):
// a pooled connection costs a socket and about 2 KiB of heap idle, 10 KiB
// more while a request is on it (the 8 KiB read buffer; the 8 KiB write
// buffer only while the request is written), measured over 1,000. Past
// the cap requests wait (PoolSettings.MaxConns).
const DefaultMaxConns = 4096

// ErrPoolFull is the failure of a request that found every connection of
// its upstream's pool busy (PoolSettings.MaxConns) and none came free
// within the wait (the connect timeout): nothing was sent. It is a 503, as
// a refused connection is, and a retry may try another backend.
var ErrPoolFull = errors.New("every connection to the upstream is busy (the pool's connection limit) and none came free within the connect timeout")

// Upstream is the connection pool to one address ("host:port").
type Upstream struct {
	Addr string
	// HostName is the DNS name of the address, empty for IP literals; the Host
	// header is set to it (with the port) for hostname-based backends.
	HostName string
	// HostHeader is the Host value for hostname-based backends: the name, with
	// the port unless it is 80.
	HostHeader []byte
	// TLS says the pool's connections speak TLS.
	TLS     bool
	client  *fasthttp.HostClient
	dialing Dialing
	tls     *tls.Config // nil: plain TCP; offers no h2 (the HTTP/1.1 side)
	tlsH2   *tls.Config // the HTTP/2 side's: offers h2
	tlsErr  error       // the TLS settings failed: every dial fails
	idle    time.Duration
	// h2 is the pool's HTTP/2 side (ExchangeH2), made on first use.
	h2 h2Pool
	// alpn is what backendTLS's alpn list says of the HTTP version.
	alpn alpnChoice
	// spokeHTTP1 is set once a backend offered h2 and http/1.1 (alpnAuto)
	// picked http/1.1: its requests go in HTTP/1.1 from then on.
	spokeHTTP1 atomic.Bool
	// closed is set by Close: connections coming back close (finishConn).
	closed atomic.Bool
	// maxIdle and maxConns are PoolSettings.MaxIdle and MaxConns, the
	// latter with its default applied; connWait is how long a request
	// waits for a connection (or an HTTP/2 stream) when all are busy.
	maxIdle, maxConns int
	connWait          time.Duration
}

// alpnChoice is the HTTP version an upstream's ALPN list decides.
type alpnChoice uint8

const (
	alpnUnsaid alpnChoice = iota // no h2 offered: the request decides
	alpnH2                       // h2 alone: HTTP/2
	alpnAuto                     // h2 and http/1.1: the backend's pick
)

// ALPNVersion says which HTTP version backendTLS's alpn list decides for
// the upstream's requests: decided is false when the list leaves it to
// the request (no h2 in it, or no TLS). A list with h2 alone means HTTP/2;
// one with h2 and http/1.1 means HTTP/2 until the backend picks http/1.1
// once (ErrPickedHTTP1), HTTP/1.1 after that.
func (u *Upstream) ALPNVersion() (h2, decided bool) {
	switch u.alpn {
	case alpnH2:
		return true, true
	case alpnAuto:
		return !u.spokeHTTP1.Load(), true
	}
	return false, false
}

// Dial opens a raw connection to the upstream, for tunnels (WebSocket
// upgrades); TLS when the pool's connections are.
func (u *Upstream) Dial() (net.Conn, error) {
	c, err := u.dial(u.dialing.netDialer(), u.dialing.network(), u.Addr, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBackendUnreachable, err)
	}
	return c, nil
}

// dial opens a connection: TCP, wrapped for the data path when dataPath,
// then TLS when the pool speaks it.
func (u *Upstream) dial(nd *net.Dialer, network, addr string, dataPath bool) (net.Conn, error) {
	if u.tlsErr != nil {
		return nil, u.tlsErr
	}
	c, err := nd.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	if dataPath {
		c = sock.DataPath(c)
	}
	if u.tls == nil {
		return c, nil
	}
	return handshake(c, addr, u.tls, u.dialing)
}

// splitALPN makes the two sides of an upstream's TLS out of c, which
// offers backendTLS's alpn list: the HTTP/1.1 side's offers the list
// without h2 (http/1.1 when nothing is left), since it cannot speak HTTP/2
// on a connection the backend would pick it for; the HTTP/2 side's offers
// the list when it has h2, else h2 alone (gRPC and http.version HTTP2
// need it).
func splitALPN(c *tls.Config) (h1, h2 *tls.Config, choice alpnChoice) {
	hasH2 := slices.Contains(c.NextProtos, http2.NextProtoTLS)
	switch {
	case hasH2 && slices.Contains(c.NextProtos, ALPNHTTP11):
		choice = alpnAuto
	case hasH2:
		choice = alpnH2
	}
	h1, h2 = c.Clone(), c.Clone()
	h1.NextProtos = slices.DeleteFunc(slices.Clone(c.NextProtos), func(p string) bool { return p == http2.NextProtoTLS })
	if len(h1.NextProtos) == 0 {
		h1.NextProtos = []string{ALPNHTTP11}
	}
	if !hasH2 {
		h2.NextProtos = []string{http2.NextProtoTLS}
	}
	return h1, h2, choice
}

// ResponseStreamThreshold is the response body size above which bodies stream
// through instead of being read whole.
const ResponseStreamThreshold = 8 << 10

func newUpstream(addr string, s PoolSettings) *Upstream { return newUpstreamTLS(addr, s, nil) }

// newUpstreamTLS is newUpstream with s.TLS's files read already, or nil.
func newUpstreamTLS(addr string, s PoolSettings, files *loadedTLS) *Upstream {
	host, _, _ := net.SplitHostPort(addr)
	u := &Upstream{Addr: addr, dialing: s.Dialing, TLS: s.TLS.Enabled}
	defaultPort := ":80"
	if s.TLS.Enabled {
		defaultPort = ":443"
		if files == nil {
			files = s.TLS.load()
		}
		if u.tls, u.tlsErr = s.TLS.config(files, host); u.tlsErr != nil {
			u.tlsErr = errTLSConfig{u.tlsErr}
		} else {
			u.tls, u.tlsH2, u.alpn = splitALPN(u.tls)
		}
	}
	if net.ParseIP(host) == nil {
		u.HostName = host
		u.HostHeader = []byte(addr)
		if strings.HasSuffix(addr, defaultPort) {
			u.HostHeader = []byte(host)
		}
	}
	nd := s.netDialer()
	network := s.network()
	idle := s.IdleTimeout
	if idle <= 0 {
		idle = DefaultPoolIdleTimeout
	}
	u.idle = idle
	u.maxIdle, u.maxConns = s.MaxIdle, s.MaxConns
	if u.maxConns <= 0 {
		u.maxConns = DefaultMaxConns
	}
	// Waiting for a busy pool's connection is waiting to be connected, as
	// HAProxy's queue timeout defaults to its connect timeout.
	u.connWait = nd.Timeout
	u.client = &fasthttp.HostClient{
		Addr: addr,
		Dial: func(a string) (net.Conn, error) {
			c, err := u.dial(nd, network, a, true)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBackendUnreachable, err)
			}
			return c, nil
		},
		MaxConns:                      u.maxConns,
		MaxConnWaitTimeout:            u.connWait,
		MaxIdleConnDuration:           idle,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: false,
		DisablePathNormalizing:        true,
		ConnPoolStrategy:              fasthttp.LIFO,
		// The HostClient serves as the connection pool only: Exchange does
		// the writing and reading, and its own stale-connection retry.
		// The read buffer holds nearly every response head; a larger one
		// moves to a larger reader, up to MaxResponseHeadBytes (respReader).
		ReadBufferSize:  8 << 10,
		WriteBufferSize: 8 << 10,
		// Errors without the upstream's bytes (logline.WithoutPeerBytes
		// does the same for Exchange's own reads).
		SecureErrorLogMessage: true,
	}
	return u
}

// Idempotent reports whether an HTTP method may be repeated safely (RFC 9110 9.2.2).
func Idempotent(method []byte) bool {
	switch string(method) {
	case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE":
		return true
	}
	return false
}

// Pools keeps upstream pools keyed by address and settings so that they
// survive config reloads: a reload that keeps a backend keeps its warm
// connections. It is safe for concurrent use.
type Pools struct {
	mu    sync.Mutex
	pools map[poolKey]*Upstream
}

type poolKey struct {
	addr     string
	settings PoolSettings
}

// NewPools returns an empty registry.
func NewPools() *Pools { return &Pools{pools: map[poolKey]*Upstream{}} }

// Get returns the pool for addr with settings s, creating it on first use.
func (p *Pools) Get(addr string, s PoolSettings) *Upstream {
	k := poolKey{addr, s}
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.pools[k]; ok {
		return u
	}
	u := newUpstream(addr, s)
	p.pools[k] = u
	return u
}

// Retain closes the idle connections of every pool not in keep and forgets it;
// requests still using a forgotten pool finish normally.
func (p *Pools) Retain(keep map[*Upstream]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, u := range p.pools {
		if !keep[u] {
			u.Close()
			delete(p.pools, k)
		}
	}
}

// NewUpstream returns a pool to addr with settings s, for callers that keep
// pools themselves (the gateway keeps them in a pool.Usage, by address and
// settings).
func NewUpstream(addr string, s PoolSettings) *Upstream { return newUpstream(addr, s) }

// Close closes the pool's idle connections; requests in flight finish on
// theirs, which close as they come back (finishConn; an HTTP/2 connection
// closes once its last stream ends). The gateway closes a pool when no
// snapshot uses it any more.
func (u *Upstream) Close() {
	u.closed.Store(true)
	u.client.CloseIdleConnections()
	u.closeH2()
}

// Len reports how many pools exist.
func (p *Pools) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pools)
}
