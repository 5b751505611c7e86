package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// tlsSummary is what one run of TLS connections measured. Its key=value
// form is the one bench/report reads for constant-rate runs (requests,
// errors, throughput, p50_us, p99_us), a request being a connection.
type tlsSummary struct {
	Conns    int // completed connections
	Errors   int
	FirstErr string
	Elapsed  time.Duration
	P50, P99 time.Duration
}

func (s tlsSummary) kv() string {
	var b strings.Builder
	tp := 0.0
	if s.Elapsed > 0 {
		tp = float64(s.Conns) / s.Elapsed.Seconds()
	}
	fmt.Fprintf(&b, "requests=%d\nerrors=%d\nthroughput=%.2f\np50_us=%d\np99_us=%d\nseconds=%.6f\n",
		s.Conns, s.Errors, tp, s.P50.Microseconds(), s.P99.Microseconds(), s.Elapsed.Seconds())
	if s.FirstErr != "" {
		fmt.Fprintf(&b, "first_error=%s\n", strings.Join(strings.Fields(s.FirstErr), " "))
	}
	return b.String()
}

func runTLS(args []string) error {
	fs := flag.NewFlagSet("tls", flag.ContinueOnError)
	addr := fs.String("addr", "", "address of the TLS server, or of a proxy in front of it")
	sni := fs.String("sni", "", "server name to send and verify")
	caFile := fs.String("ca", "", "PEM file of the certificate(s) to trust")
	workers := fs.Int("conns", 50, "concurrent workers, each opening one connection at a time")
	duration := fs.Duration("duration", 3*time.Second, "length of the run")
	out := fs.String("out", "", "file for the key=value summary; standard output if empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" || *sni == "" || *caFile == "" || *workers <= 0 || *duration <= 0 {
		return errors.New("tls needs -addr, -sni, -ca, a positive -conns and -duration")
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s holds no certificate", *caFile)
	}
	return output(*out, handshakes(*addr, clientConfig(*sni, roots), *workers, *duration).kv())
}

// clientConfig is a client's TLS 1.3 with X25519 alone (what OpenSSL 3.0
// clients offer first; crypto/tls would offer its post-quantum hybrid
// too, which the upstream would pick at several times the cost), and no
// session cache: every handshake is a full one.
func clientConfig(sni string, roots *x509.CertPool) *tls.Config {
	return &tls.Config{
		ServerName:       sni,
		RootCAs:          roots,
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
	}
}

// handshakes runs workers connection loops for d.
func handshakes(addr string, cfg *tls.Config, workers int, d time.Duration) tlsSummary {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		s   tlsSummary
		lat []time.Duration
	)
	start := time.Now()
	end := start.Add(d)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			errs, first := 0, ""
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				if err := oneConn(addr, cfg); err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			s.Errors += errs
			if s.FirstErr == "" {
				s.FirstErr = first
			}
		}()
	}
	wg.Wait()
	s.Elapsed = time.Since(start)
	s.Conns = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		s.P50 = lat[len(lat)/2]
		s.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return s
}

// request is what a client sends on each connection: one request, and the
// connection closed after its answer.
const request = "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"

// oneConn dials, completes the handshake, sends one request, reads the
// answer to its end and closes.
func oneConn(addr string, cfg *tls.Config) error {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(raw, cfg)
	if err := c.Handshake(); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if _, err := fmt.Fprintf(c, request, cfg.ServerName); err != nil {
		return fmt.Errorf("writing the request: %w", err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200 ") || !strings.HasSuffix(string(got), "\r\n\r\nok") {
		return fmt.Errorf("answer %q, want a 200 with body \"ok\"", got)
	}
	return nil
}
