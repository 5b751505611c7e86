package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestUpstreamResponseHeadSizeE2E: an HTTP/1.1 upstream's response head
// passes up to 64 KiB, as an HTTP/2 upstream's does, and a larger one is a
// 502; an upgrade's answer is held to the same limit. The HTTP/1.1 side
// refused anything over its 8 KiB read buffer (502 "small read buffer"),
// the upgrade's handshake over 4 KiB.
func TestUpstreamResponseHeadSizeE2E(t *testing.T) {
	const get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	const upgrade = "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"
	// answer is a 200 whose head holds kb fields of 1,000 bytes.
	answer := func(kb int) string {
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
		for i := range kb {
			fmt.Fprintf(&b, "X-Field-%04d: %s\r\n", i, strings.Repeat("v", 1000-16))
		}
		b.WriteString("\r\nok")
		return b.String()
	}
	tests := []struct {
		desc    string
		request string
		kb      int
		status  int
		body    string
	}{
		{desc: "12 KiB head", request: get, kb: 12, status: 200, body: "ok"},
		{desc: "60 KiB head", request: get, kb: 60, status: 200, body: "ok"},
		{desc: "70 KiB head", request: get, kb: 70, status: 502, body: "bad upstream response\n"},
		{desc: "upgrade refused with a 12 KiB head", request: upgrade, kb: 12, status: 200, body: "ok"},
		{desc: "upgrade refused with a 70 KiB head", request: upgrade, kb: 70, status: 502, body: "bad upstream response\n"},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					up := requestUpstream(t, func(c net.Conn, _ *bufio.Reader, _ message) bool {
						_, err := io.WriteString(c, answer(tc.kb))
						return err == nil
					})
					tg := startGatewayWith(t, routesConfig("    - backends: [{host: '${UP}'}]\n"), map[string]string{"UP": up}, tr)
					c, br := dialRaw(t, tg.addr(3000))
					if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
						t.Fatal(err)
					}
					resp := roundTripRaw(t, c, br, "GET", tc.request)
					if resp.status() != tc.status || string(resp.body) != tc.body {
						t.Fatalf("got %q %q, want %d %q", resp.line, resp.body, tc.status, tc.body)
					}
					if tc.status == 200 {
						if n := len(resp.fields.values("X-Field-0000")) + len(resp.fields.values(fmt.Sprintf("X-Field-%04d", tc.kb-1))); n != 2 {
							t.Fatalf("the head's first and last fields did not both reach the client")
						}
					}
				})
			}
		})
	}
}
