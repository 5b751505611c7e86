// Command logsink is the local syslog receiver bench/run.sh gives HAProxy,
// which logs to syslog and not to files (its docs: writing to a file "will
// significantly slow HAProxy down"), and finds no syslog daemon on a machine
// without one. It reads UDP datagrams on a loopback port, one log line each,
// as a syslog daemon does, and appends them to a file through a buffer, as
// nginx writes its own buffered access log.
package main

import (
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "UDP address to listen on")
	out := flag.String("out", "", "file to append the lines to (required)")
	flag.Parse()
	if *out == "" {
		log.Fatal("logsink: -out is required")
	}
	conn, err := listen(*addr)
	if err != nil {
		log.Fatalf("logsink: %v", err)
	}
	s, err := openSink(*out)
	if err != nil {
		log.Fatalf("logsink: %v", err)
	}
	// bench/run.sh waits for this line before it starts HAProxy.
	log.Printf("logsink: ready on %s", conn.LocalAddr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		_ = conn.Close() // ends receive
	}()
	s.receive(conn)
	if err := s.Close(); err != nil {
		log.Fatalf("logsink: %v", err)
	}
}
