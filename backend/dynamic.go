package backend

import (
	"errors"
	"net"
	"sync"
)

// Dynamic picks its upstream per request from the destination the request
// names (its Host header). It lets clients steer traffic anywhere the gateway
// can reach, so it must sit behind access controls.
type Dynamic struct {
	settings PoolSettings
	// files is what the TLS settings' files held when the backend was
	// made, for every destination's pool (nil without TLS).
	files  *loadedTLS
	max    int
	mu     sync.RWMutex
	byAddr map[string]*Upstream
}

// DefaultDynamicPools bounds how many destinations a dynamic backend keeps
// pools for; past it, an arbitrary pool is closed to make room.
const DefaultDynamicPools = 1024

// NewDynamic returns a dynamic backend that opens pools with settings s.
func NewDynamic(s PoolSettings) *Dynamic {
	d := &Dynamic{settings: s, max: DefaultDynamicPools, byAddr: map[string]*Upstream{}}
	if s.TLS.Enabled {
		d.files = s.TLS.load()
	}
	return d
}

// DefaultPort is the port of a destination named without one: 443 when
// the pools speak TLS, else 80.
func (d *Dynamic) DefaultPort() string {
	if d.settings.TLS.Enabled {
		return "443"
	}
	return "80"
}

// ErrNoDestination is returned when the request names no usable destination.
var ErrNoDestination = errors.New("request names no destination host")

// For returns the upstream for a request authority ("host" or "host:port");
// defaultPort is used when it has no port.
func (d *Dynamic) For(authority []byte, defaultPort string) (*Upstream, error) {
	d.mu.RLock()
	u, ok := d.byAddr[string(authority)]
	d.mu.RUnlock()
	if ok {
		return u, nil
	}
	key := string(authority)
	addr := key
	if len(authority) == 0 {
		return nil, ErrNoDestination
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(key, defaultPort)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return nil, ErrNoDestination
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if u, ok := d.byAddr[key]; ok {
		return u, nil
	}
	if len(d.byAddr) >= d.max {
		for k, old := range d.byAddr {
			old.Close()
			delete(d.byAddr, k)
			break
		}
	}
	u = newUpstreamTLS(addr, d.settings, d.files)
	d.byAddr[key] = u
	return u, nil
}

// Close closes the idle connections of every pool.
func (d *Dynamic) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, u := range d.byAddr {
		u.Close()
		delete(d.byAddr, k)
	}
}
