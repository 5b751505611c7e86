// Command upstream is the origin server used by the benchmark harness
// (bench/run.sh): a minimal keep-alive fasthttp server whose responses are
// precomputed so that it costs as little CPU as possible per request.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (host:port); port 0 picks a free one")
	flag.Parse()

	ln, err := net.Listen("tcp4", *addr)
	if err != nil {
		log.Fatalf("upstream: listen %s: %v", *addr, err)
	}
	srv := &fasthttp.Server{
		Handler:                       newHandler().serve,
		Name:                          "upstream",
		NoDefaultDate:                 true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
	}
	log.Printf("upstream: listening on %s", ln.Addr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		_ = ln.Close()
	}()
	if err := srv.Serve(ln); err != nil {
		log.Fatalf("upstream: serve: %v", err)
	}
}
