// Command fastproxy is the bare fasthttp reverse proxy that bench/run.sh
// measures as a reference (target "fasthttp"): one fasthttp.Server whose
// handler forwards every request through one fasthttp.HostClient, and
// nothing else: no routing, no metrics per request, and with -access-log
// one line per request in nginx's combined format, buffered as nginx
// buffers its own. Measured on the same machine as the gateway, it shows how
// much of the gateway's cost is the stack it is built on and how much is
// its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// maxBodySize bounds request and response bodies. The largest the benchmark
// moves is 1 MiB; the bound is explicit rather than fasthttp's defaults
// (4 MiB for requests, none for responses) so the limit is visible here.
const maxBodySize = 16 << 20

// hopByHop are the headers that describe one connection rather than the
// message (RFC 9110, 7.6.1); a proxy must not pass them on in either
// direction.
var hopByHop = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// stripHopByHop deletes the hop-by-hop headers from a request or response
// header.
func stripHopByHop(h interface{ Del(key string) }) {
	for _, k := range hopByHop {
		h.Del(k)
	}
}

type proxy struct {
	hc  *fasthttp.HostClient
	log *accessLog // nil: no access log
}

func (p *proxy) serve(ctx *fasthttp.RequestCtx) {
	// The request goes upstream as it is, the way fasthttp's own proxy
	// example does it, without a copy. Stripping its Connection header is
	// safe: the server noted a Connection: close before calling us.
	stripHopByHop(&ctx.Request.Header)
	if err := p.hc.Do(&ctx.Request, &ctx.Response); err != nil {
		ctx.Error("bad gateway: "+err.Error(), fasthttp.StatusBadGateway)
	} else {
		// The upstream's Connection: close (or keep-alive parameters)
		// concern its connection to us, not the client's to us.
		stripHopByHop(&ctx.Response.Header)
	}
	if p.log != nil {
		p.log.write(ctx, time.Now())
	}
}

// newServer returns a server that forwards every request to upstream
// (host:port) over one keep-alive connection pool, logging each to log
// unless it is nil.
func newServer(upstream string, log *accessLog) *fasthttp.Server {
	p := &proxy{log: log, hc: &fasthttp.HostClient{
		Addr:                upstream,
		MaxResponseBodySize: maxBodySize,
	}}
	return &fasthttp.Server{
		Handler:            p.serve,
		MaxRequestBodySize: maxBodySize,
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (host:port); port 0 picks a free one")
	upstream := flag.String("upstream", "", "upstream address, host:port (required)")
	accessLogPath := flag.String("access-log", "", "append one line per request to this file (nginx's combined format, buffered); none if empty")
	flag.Parse()
	if *upstream == "" {
		fmt.Fprintln(os.Stderr, "fastproxy: -upstream is required")
		os.Exit(2)
	}
	var access *accessLog
	if *accessLogPath != "" {
		var err error
		if access, err = openAccessLog(*accessLogPath); err != nil {
			log.Fatalf("fastproxy: access log: %v", err)
		}
	}

	ln, err := net.Listen("tcp4", *addr)
	if err != nil {
		log.Fatalf("fastproxy: listen %s: %v", *addr, err)
	}
	srv := newServer(*upstream, access)
	log.Printf("fastproxy: listening on %s, forwarding to %s", ln.Addr(), *upstream)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		log.Fatalf("fastproxy: serve: %v", err)
	case <-stop:
	}
	// Close idle connections and let requests in flight finish, with a
	// bound below run.sh's 5 s before SIGKILL.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.ShutdownWithContext(ctx); err != nil {
		log.Printf("fastproxy: shutdown: %v", err)
	}
	_ = ln.Close() // in case the signal came before Serve took the listener
	if access != nil {
		if err := access.Close(); err != nil {
			log.Printf("fastproxy: access log: %v", err)
		}
	}
}
