package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// startGatewayOnOwnPort starts a gateway whose bind listens on the port its
// config names (as outside tests), a free port of 127.0.0.1, ${PORT} in
// yaml; it returns the gateway and the port.
func startGatewayOnOwnPort(t *testing.T, yaml string) (*testGateway, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	core, logs := observer.New(zap.InfoLevel)
	gw := New(Options{
		Logger:     zap.New(core),
		ListenAddr: func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) },
	})
	tg := &testGateway{t: t, gw: gw, logs: logs}
	tg.apply(yaml, map[string]string{"PORT": strconv.Itoa(port)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	return tg, port
}

// TestDynamicTLSToTheGatewayItselfIsRefused: a dynamic passthrough route
// whose server name names the gateway (localhost, on the bind's own port)
// would dial itself again for each connection it makes, without end: the
// dial is refused and the client's connection closed, once.
func TestDynamicTLSToTheGatewayItselfIsRefused(t *testing.T) {
	tg, port := startGatewayOnOwnPort(t, `
binds:
- port: ${PORT}
  listeners:
  - protocol: TLS
    tcpRoutes:
    - backends: [{dynamic: {}}]
`)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, &tls.Config{ServerName: "localhost", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Fatal("the handshake went through")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection was left open: %v", err)
	}
	rec := connRecordOf(t, tg, c.LocalAddr().String())
	if rec["end"] != endConnectFailed || !strings.Contains(fmt.Sprint(rec["upstream_error"]), "loop detected") {
		t.Fatalf("record %v", rec)
	}
	if n := len(tg.accessLogs().FilterMessage("connection").All()); n != 1 {
		t.Fatalf("%d connection records; want 1 (no loop)", n)
	}
}

// dynamicHTTPRoute is a bind whose one route sends each request where its
// Host says.
const dynamicHTTPRoute = `
binds:
- port: ${PORT}
  listeners:
  - protocol: HTTP
    routes:
    - backends: [{dynamic: {}}]
`

// TestDynamicHTTPToTheGatewayItselfIsRefused: the same for a dynamic HTTP
// route and a Host naming the gateway, by name, by address, and by the
// unspecified address a dial takes for the local host: refused at once,
// as a backend that cannot be connected to is (503), where each request
// went round again until its headers were too long (431).
func TestDynamicHTTPToTheGatewayItselfIsRefused(t *testing.T) {
	_, port := startGatewayOnOwnPort(t, dynamicHTTPRoute)
	p := strconv.Itoa(port)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for _, host := range []string{"localhost:" + p, "127.0.0.1:" + p, "0.0.0.0:" + p, "[::ffff:127.0.0.1]:" + p} {
		t.Run(host, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://127.0.0.1:"+p+"/", nil)
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d %q; want 503", resp.StatusCode, body)
			}
		})
	}
}

func TestRefuseDial(t *testing.T) {
	tg, port := startGatewayOnOwnPort(t, dynamicHTTPRoute)
	r := (*selfRefuser)(tg.gw)
	other := uint16(port + 1)
	if port == 65535 {
		other = 1
	}
	tests := []struct {
		addr    string
		refused bool
	}{
		{"127.0.0.1:" + strconv.Itoa(port), true},
		{"127.0.0.2:" + strconv.Itoa(port), true},
		{"[::1]:" + strconv.Itoa(port), true},
		{"[::ffff:127.0.0.1]:" + strconv.Itoa(port), true},
		{"0.0.0.0:" + strconv.Itoa(int(other)), true},
		{"[::]:" + strconv.Itoa(int(other)), true},
		{"127.0.0.1:" + strconv.Itoa(int(other)), false},
		{"192.0.2.1:" + strconv.Itoa(port), false},
	}
	for _, tc := range tests {
		err := r.RefuseDial(netip.MustParseAddrPort(tc.addr))
		if refused := errors.Is(err, errSelfDestination); refused != tc.refused {
			t.Errorf("%s: %v; want refused=%v", tc.addr, err, tc.refused)
		}
	}
}
