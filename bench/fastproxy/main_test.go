package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// serveOn serves srv on a fresh 127.0.0.1 listener until the test ends and
// returns its address. The listener is bound before Serve runs, so requests
// may be sent at once.
func serveOn(t *testing.T, srv *fasthttp.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// echoUpstream answers with the request body, reports in X-Seen which
// hop-by-hop request headers reached it, and sends some of its own.
func echoUpstream(ctx *fasthttp.RequestCtx) {
	var seen []string
	for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "Te"} {
		if len(ctx.Request.Header.Peek(k)) > 0 {
			seen = append(seen, k)
		}
	}
	ctx.Response.Header.Set("X-Seen", strings.Join(seen, ","))
	ctx.Response.Header.Set("X-End-To-End", string(ctx.Request.Header.Peek("X-End-To-End")))
	ctx.Response.Header.Set("Keep-Alive", "timeout=5")
	ctx.Response.Header.Set("Proxy-Authenticate", "Basic")
	ctx.SetBody(ctx.Request.Body())
}

func TestProxyForwards(t *testing.T) {
	up := serveOn(t, &fasthttp.Server{Handler: echoUpstream, MaxRequestBodySize: maxBodySize})
	proxyAddr := serveOn(t, newServer(up, nil))
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)

	for _, size := range []int{100, 1 << 20} {
		body := bytes.Repeat([]byte("relaygate-"), size/10+1)[:size]
		req, err := http.NewRequest(http.MethodPost, "http://"+proxyAddr+"/echo", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
		req.Header.Set("Proxy-Connection", "keep-alive")
		req.Header.Set("Keep-Alive", "timeout=5")
		req.Header.Set("Te", "trailers")
		req.Header.Set("X-End-To-End", "kept")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%d B: %v", size, err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("%d B: reading the body: %v", size, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d B: status %d, body %.200q", size, resp.StatusCode, got)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("%d B: body came back as %d bytes, not intact", size, len(got))
		}
		if seen := resp.Header.Get("X-Seen"); seen != "" {
			t.Errorf("%d B: hop-by-hop request headers reached the upstream: %s", size, seen)
		}
		if e := resp.Header.Get("X-End-To-End"); e != "kept" {
			t.Errorf("%d B: end-to-end request header arrived as %q, want %q", size, e, "kept")
		}
		for _, k := range []string{"Keep-Alive", "Proxy-Authenticate"} {
			if v := resp.Header.Get(k); v != "" {
				t.Errorf("%d B: hop-by-hop response header %s: %s reached the client", size, k, v)
			}
		}
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	// A port that was free a moment ago: connecting to it is refused.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close()

	proxyAddr := serveOn(t, newServer(down, nil))
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("http://" + proxyAddr + "/small")
	if err := fasthttp.Do(&req, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != fasthttp.StatusBadGateway {
		t.Fatalf("status %d, want %d", resp.StatusCode(), fasthttp.StatusBadGateway)
	}
}

// The client's Connection: close is stripped from what goes upstream but
// still closes the client's connection after the answer.
func TestProxyKeepsTheClientsClose(t *testing.T) {
	up := serveOn(t, &fasthttp.Server{Handler: echoUpstream})
	proxyAddr := serveOn(t, newServer(up, nil))
	for _, closeConn := range []bool{false, true} {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.SetRequestURI("http://" + proxyAddr + "/small")
		if closeConn {
			req.SetConnectionClose()
		}
		if err := fasthttp.Do(&req, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != fasthttp.StatusOK || resp.ConnectionClose() != closeConn {
			t.Errorf("Connection: close asked %v: status %d, answer closes %v", closeConn, resp.StatusCode(), resp.ConnectionClose())
		}
	}
}
