package admin

import (
	"net"
	"net/http"
	"strings"
)

// localHostsOnly guards an admin server that listens on a loopback address
// against DNS rebinding: a web page whose name a hostile DNS server points
// at 127.0.0.1 is same-origin with the admin server as far as the browser
// knows, and could read the config dump or drive pprof. Such a request
// carries the page's name in its Host header, so only names that cannot be
// rebound are served: localhost and its subdomains (RFC 6761, resolved by
// the machine itself) and IP literals. A server bound to another address
// is reached by whatever name its operators gave it, and is not guarded.
func localHostsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !localHost(r.Host) {
			writeBody(w, http.StatusForbidden, "text/plain; charset=utf-8",
				[]byte("admin: the Host header must be localhost or an IP address (DNS rebinding guard)\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// localHost reports whether hostport (a Host header) names the machine
// itself in a way no DNS answer can change.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return net.ParseIP(host) != nil
}

// loopbackListener reports whether ln accepts only this machine's
// connections over TCP: a loopback address (a unix socket is no browser's
// to reach).
func loopbackListener(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// sameOriginWrites refuses a request that changes or computes something
// (any method but GET, HEAD and OPTIONS: POST /cel, pprof's symbol lookup)
// when a browser sent it from another origin (net/http's
// CrossOriginProtection, by Sec-Fetch-Site or Origin against Host): a page
// cannot make the gateway work for it through its operator's browser (a
// form posted to localhost:15000/cel needs no preflight). Tools such as
// curl send neither header and pass.
func sameOriginWrites(h http.Handler) http.Handler {
	return http.NewCrossOriginProtection().Handler(h)
}
