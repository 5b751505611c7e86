// Command llmupstream is the LLM provider that bench/run.sh puts behind the
// proxies in its LLM case: an OpenAI-compatible endpoint that answers POST
// /v1/chat/completions at once with a fixed chat completion (with usage), so
// that what the benchmark measures is the proxy's work, not a model's.
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
	key := flag.String("key", "bench-key", "API key every request must carry as \"Authorization: Bearer KEY\"")
	flag.Parse()

	ln, err := net.Listen("tcp4", *addr)
	if err != nil {
		log.Fatalf("llmupstream: listen %s: %v", *addr, err)
	}
	srv := &fasthttp.Server{
		Handler:       newHandler(*key).serve,
		Name:          "llmupstream",
		NoDefaultDate: true,
		// A chat request of the benchmark is about 1 KiB; the bound is
		// generous and explicit.
		MaxRequestBodySize: 1 << 20,
	}
	log.Printf("llmupstream: listening on %s", ln.Addr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		_ = ln.Close()
	}()
	if err := srv.Serve(ln); err != nil {
		log.Fatalf("llmupstream: serve: %v", err)
	}
}
