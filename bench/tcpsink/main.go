// Command tcpsink is the upstream of bench/run.sh's connection-layer cases.
//
// On -addr (the TCP throughput case) it reads every connection to its end
// and throws the bytes away; when the client half-closes, it answers with
// the count it read (8 bytes, big-endian) and closes, so the client knows
// that every byte it wrote went through, and when.
//
// On -tls-addr (the TLS passthrough case) it completes a TLS handshake with
// the certificate of -cert and -key (crypto/tls, TLS 1.3 at least, no
// session tickets: every client handshake is a full one and nothing is
// spent on tickets nobody uses), reads one HTTP/1.1 request head, answers
// it with "ok" and Connection: close, and closes: each connection is one
// short request, as wrk makes them with "Connection: close".
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "", "TCP address of the sink (bulk bytes, read and discarded)")
	tlsAddr := flag.String("tls-addr", "", "TCP address of the TLS server (handshake, one HTTP request answered, close)")
	certFile := flag.String("cert", "", "certificate (PEM) of the TLS server")
	keyFile := flag.String("key", "", "private key (PEM) of the TLS server")
	flag.Parse()
	if *addr == "" && *tlsAddr == "" {
		log.Fatal("tcpsink: give -addr, -tls-addr or both")
	}
	if *addr != "" {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			log.Fatalf("tcpsink: %v", err)
		}
		go acceptLoop(ln, sink)
	}
	if *tlsAddr != "" {
		pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			log.Fatalf("tcpsink: %v", err)
		}
		ln, err := net.Listen("tcp", *tlsAddr)
		if err != nil {
			log.Fatalf("tcpsink: %v", err)
		}
		cfg := serverConfig(pair)
		go acceptLoop(ln, func(c net.Conn) { greet(c, cfg) })
	}
	// bench/run.sh waits for this line.
	log.Printf("tcpsink: ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}

// serverConfig is the TLS server's configuration: TLS 1.3, crypto/tls's
// default key exchange groups and suites, no session tickets.
func serverConfig(pair tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates:           []tls.Certificate{pair},
		MinVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true,
	}
}

func acceptLoop(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			log.Printf("tcpsink: accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serve(c)
	}
}

// sinkBufSize is the read size of the sink: large, as bulk receivers read.
const sinkBufSize = 256 << 10

// sink reads c to its end, then writes the count it read and closes.
func sink(c net.Conn) {
	defer c.Close()
	n, err := drain(c)
	if err != nil {
		return
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	_, _ = c.Write(b[:])
}

// drain reads r to its end and returns how many bytes it read.
func drain(r io.Reader) (int64, error) {
	buf := make([]byte, sinkBufSize)
	var n int64
	for {
		m, err := r.Read(buf)
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// answer is the TLS server's response to every request.
const answer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

// maxHead bounds a request head.
const maxHead = 8 << 10

// greet completes the handshake, reads a request head, answers it and
// closes (close_notify, then FIN).
func greet(c net.Conn, cfg *tls.Config) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Server(c, cfg)
	if err := tc.Handshake(); err != nil {
		return
	}
	if err := readHead(tc); err != nil {
		return
	}
	if _, err := io.WriteString(tc, answer); err != nil {
		return
	}
	_ = tc.Close()
}

// readHead reads from r until the end of an HTTP request head (an empty
// line), at most maxHead bytes.
func readHead(r io.Reader) error {
	buf := make([]byte, 0, 1024)
	for len(buf) < maxHead {
		n, err := r.Read(buf[len(buf):min(cap(buf), maxHead)])
		buf = buf[:len(buf)+n]
		if bytes.Contains(buf, []byte("\r\n\r\n")) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
	return errors.New("request head too long")
}
