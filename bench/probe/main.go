// Command probe waits until an HTTP URL answers with an expected status and
// body length, polling with a bound. The benchmark harness (bench/run.sh)
// uses it to know a server is ready and that a proxy forwards correctly.
// With -then N it sends N more requests once the URL answers, one after
// another on one keep-alive connection, each checked the same way: a fixed
// amount of work for bench/logcost.sh and bench/llmcost.sh to count
// instructions over (-method, -body and -header make them POSTs).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	url := flag.String("url", "", "URL to GET (required)")
	status := flag.Int("status", http.StatusOK, "expected status code")
	length := flag.Int64("len", -1, "expected body length in bytes; -1 accepts any")
	timeout := flag.Duration("timeout", 10*time.Second, "give up after this long")
	interval := flag.Duration("interval", 50*time.Millisecond, "delay between attempts")
	pid := flag.Int("pid", 0, "give up as soon as this process has exited (0: do not watch)")
	then := flag.Int("then", 0, "once ready, send this many more requests (each checked)")
	method := flag.String("method", http.MethodGet, "request method")
	bodyFile := flag.String("body", "", "send this file's content as the request body")
	caFile := flag.String("ca", "", "for https URLs: trust the certificates of this PEM file (alone)")
	serverName := flag.String("servername", "", "for https URLs: the server name to send and verify (default: the URL's host)")
	var headers headerFlags
	flag.Var(&headers, "header", `add a request header, "Name: value" (repeatable)`)
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "probe: -url is required")
		os.Exit(2)
	}
	want := expectation{status: *status, length: *length, method: *method, header: http.Header(headers)}
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "probe: -body: %v\n", err)
			os.Exit(2)
		}
		want.body = b
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	if *caFile != "" || *serverName != "" {
		cfg, err := tlsConfig(*caFile, *serverName)
		if err != nil {
			fmt.Fprintf(os.Stderr, "probe: %v\n", err)
			os.Exit(2)
		}
		client.Transport = &http.Transport{TLSClientConfig: cfg}
	}
	try := func() error {
		if *pid > 0 {
			if err := checkProcess(*pid); err != nil {
				return err
			}
		}
		return want.check(ctx, client, *url)
	}
	if err := poll(ctx, *interval, try); err != nil {
		fmt.Fprintf(os.Stderr, "probe: %s: %v\n", *url, err)
		os.Exit(1)
	}
	for i := range *then {
		if err := want.check(ctx, client, *url); err != nil {
			fmt.Fprintf(os.Stderr, "probe: %s: request %d of -then: %v\n", *url, i+1, err)
			os.Exit(1)
		}
	}
}

// tlsConfig trusts the certificates of caFile ("": the system's) and
// sends and verifies serverName ("": the URL's host). HTTP/1.1 only, as
// the Transport speaks with a TLS configuration of its own.
func tlsConfig(caFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca: %s holds no certificate", caFile)
		}
	}
	return cfg, nil
}

// headerFlags collects -header "Name: value" flags.
type headerFlags http.Header

func (h *headerFlags) String() string { return fmt.Sprint(http.Header(*h)) }

func (h *headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q is not \"Name: value\"", v)
	}
	if *h == nil {
		*h = headerFlags{}
	}
	http.Header(*h).Add(strings.TrimSpace(name), strings.TrimSpace(value))
	return nil
}
