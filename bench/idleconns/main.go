// Command idleconns opens many keep-alive HTTP/1.1 connections to a server,
// sends one request on each, then keeps them all open and idle until it gets
// SIGINT or SIGTERM. The benchmark harness (bench/run.sh) uses it to measure
// a proxy's memory per idle client connection.
//
// Output on stdout, one line each:
//
//	ready opened=N failed=F       once every connection was tried
//	exit open=M                   at the signal: how many the server kept open
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "", "server host:port (required)")
	path := flag.String("path", "/small", "request path")
	n := flag.Int("n", 10000, "number of connections")
	parallel := flag.Int("parallel", 64, "connections opened at a time")
	timeout := flag.Duration("timeout", 60*time.Second, "bound on opening all connections")
	flag.Parse()
	if *addr == "" || *n < 1 || *parallel < 1 {
		fmt.Fprintln(os.Stderr, "idleconns: need -addr, -n >= 1 and -parallel >= 1")
		os.Exit(2)
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	o := opener{addr: *addr, request: newRequest(*addr, *path), parallel: *parallel}
	pool, err := o.open(ctx, *n)
	fmt.Printf("ready opened=%d failed=%d\n", pool.opened(), *n-pool.opened())
	if err != nil {
		fmt.Fprintf(os.Stderr, "idleconns: first failure: %v\n", err)
	}

	<-stop
	fmt.Printf("exit open=%d\n", pool.stillOpen())
	pool.close()
}
