package backend

import (
	"context"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Keepalive configures TCP keepalive probes on upstream connections.
type Keepalive struct {
	Enabled  bool
	Time     time.Duration
	Interval time.Duration
	Retries  int
}

// DefaultKeepalive is agentgateway's default: probes after 3 minutes idle, every
// 3 minutes, 9 of them.
var DefaultKeepalive = Keepalive{Enabled: true, Time: 3 * time.Minute, Interval: 3 * time.Minute, Retries: 9}

// Dialing is how upstream connections are opened.
type Dialing struct {
	ConnectTimeout time.Duration
	Keepalive      Keepalive
	// IPv4Only makes DNS names resolve to IPv4 addresses only (enableIpv6: false).
	IPv4Only bool
	// Refuse, if set, is asked about each address a dial resolved to,
	// before connecting to it: an error fails the dial (a dynamic
	// backend's destination must not be the gateway itself). It is an
	// interface, as PoolSettings is a map key: a pointer keeps pools
	// across reloads.
	Refuse DialRefuser
}

// DialRefuser judges the addresses a dial resolved to (Dialing.Refuse).
type DialRefuser interface {
	RefuseDial(netip.AddrPort) error
}

// DefaultConnectTimeout bounds establishing an upstream connection.
const DefaultConnectTimeout = 10 * time.Second

func (d Dialing) netDialer() *net.Dialer {
	nd := &net.Dialer{Timeout: d.ConnectTimeout}
	if nd.Timeout <= 0 {
		nd.Timeout = DefaultConnectTimeout
	}
	if d.Keepalive.Enabled {
		nd.KeepAliveConfig = d.Keepalive.Config()
	} else {
		nd.KeepAlive = -1
	}
	if refuse := d.Refuse; refuse != nil {
		nd.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return refuse.RefuseDial(ap)
		}
	}
	return nd
}

// Config is k as a socket takes it (net.Dialer.KeepAliveConfig,
// net.TCPConn.SetKeepAliveConfig).
func (k Keepalive) Config() net.KeepAliveConfig {
	return net.KeepAliveConfig{Enable: k.Enabled, Idle: k.Time, Interval: k.Interval, Count: k.Retries}
}

func (d Dialing) network() string {
	if d.IPv4Only {
		return "tcp4"
	}
	return "tcp"
}

// Dial opens a raw connection to addr with these settings; used for tunnels.
func (d Dialing) Dial(addr string) (net.Conn, error) {
	return d.netDialer().Dial(d.network(), addr)
}
