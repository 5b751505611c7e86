package server

import (
	"errors"
	"net"
	"net/netip"

	"go.uber.org/zap"
)

// A dynamic backend goes where the client names (a TLS server name, a Host
// header, a CONNECT target): a name of the gateway itself on one of its
// own ports would have each connection dial the gateway again, without
// end, until sockets or ports run out. Each address such a dial resolves
// to is checked before connecting (backend.Dialing.Refuse): an unspecified
// address (which a dial takes for the local host) and a local address on
// a port the gateway listens on are refused. Any local address counts, as
// a bind on a wildcard address is reached on every one; a bind on one
// address makes the others refused too, on its port only.

// errSelfDestination fails a dynamic backend's dial to the gateway itself.
var errSelfDestination = errors.New("loop detected: the destination is the gateway itself")

// selfRefuser is dynamic backends' backend.Dialing.Refuse: the gateway,
// refusing connections to its own listening addresses. (The gateway's
// pointer keeps the pools' keys the same across reloads.)
type selfRefuser Gateway

// RefuseDial refuses a connection to the gateway's own listening
// addresses. Only an address on a port the gateway listens on costs more
// than a comparison (a look at the host's interface addresses).
func (r *selfRefuser) RefuseDial(ap netip.AddrPort) error {
	g := (*Gateway)(r)
	a := ap.Addr().Unmap()
	if a.IsUnspecified() || g.listensOn(int(ap.Port())) && isLocalAddr(a) {
		g.log.Debug("dynamic backend: refused a destination that is the gateway itself", zap.Stringer("address", ap))
		return errSelfDestination
	}
	return nil
}

// listensOn says a bind of the gateway accepts connections on port.
func (g *Gateway) listensOn(port int) bool {
	m := g.tunnelBinds.Load()
	if m == nil {
		return false
	}
	for _, b := range *m {
		if p := b.listenPort.Load(); p != 0 && int(p) == port {
			return true
		}
	}
	return false
}

// isLocalAddr says a is an address of this host: a loopback address or one
// of its interfaces'.
func isLocalAddr(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: taken for local, which only refuses a gateway port
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}
