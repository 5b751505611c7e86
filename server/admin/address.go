package admin

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/relaygate/gateway/config"
)

// unixPrefix marks a unix domain socket address: "unix:/run/gw/admin.sock".
const unixPrefix = "unix:"

// listenAddr is a parsed side-server address.
type listenAddr struct {
	network string // "tcp", "tcp4" (an IPv4 host) or "unix"
	address string // host:port, or the socket path
}

// errDisabled reports an address that turns its server off.
var errDisabled = errors.New("disabled")

// parseAddr parses "host:port", "unix:/path", or "off"/"" (errDisabled).
func parseAddr(s string) (listenAddr, error) {
	if s == "" || strings.EqualFold(s, "off") {
		return listenAddr{}, errDisabled
	}
	if err := config.CheckListenAddr(s); err != nil {
		return listenAddr{}, err
	}
	if path, ok := strings.CutPrefix(s, unixPrefix); ok {
		return listenAddr{network: "unix", address: path}, nil
	}
	// An IPv4 address is IPv4 alone (past firewall rules written for
	// IPv4, a dual-stack socket would answer on every IPv6 address).
	return listenAddr{network: config.ListenNetwork(s), address: s}, nil
}

// listen binds a. A unix socket file left behind by a process that died
// (nothing accepts on it) is removed and the bind retried once; a live
// socket or a file that is not a socket is left alone and reported.
func (a listenAddr) listen() (net.Listener, error) {
	ln, err := net.Listen(a.network, a.address)
	if err == nil || a.network != "unix" || !errors.Is(err, syscall.EADDRINUSE) || !staleSocket(a.address) {
		return ln, err
	}
	if rmErr := os.Remove(a.address); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen(a.network, a.address)
}

// staleSocket reports whether path is a socket file nobody listens on.
func staleSocket(path string) bool {
	if strings.HasPrefix(path, "@") { // Linux abstract namespace: no file
		return false
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// boundAddr renders a listener's address the way Options spell it.
func boundAddr(ln net.Listener) string {
	if ln.Addr().Network() == "unix" {
		return unixPrefix + ln.Addr().String()
	}
	return ln.Addr().String()
}

// browserURL turns a bound TCP address and a path into a URL a local browser
// can open: a wildcard host becomes the loopback address of its family.
// It returns "" for unix sockets.
func browserURL(bound, path string) string {
	if bound == "" || strings.HasPrefix(bound, unixPrefix) {
		return ""
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + path
}
