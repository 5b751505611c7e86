package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// upgradeUpstream answers "Upgrade: echo" with 101 and then echoes bytes,
// preceded by a greeting sent in the same write as the 101; any other upgrade
// it refuses with a 400, and plain requests get 200 "plain".
func upgradeUpstream(t *testing.T) (string, <-chan message) {
	t.Helper()
	seen := make(chan message, 64)
	addr := requestUpstream(t, func(c net.Conn, br *bufio.Reader, m message) bool {
		seen <- m
		switch m.fields.get("Upgrade") {
		case "echo":
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\ngreeting\n")
			io.Copy(c, br) // echo until the client half-closes
			return false
		case "":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain")
		case "ignored":
			// An upstream that does not do upgrades answers as usual.
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nnot upgraded")
		default:
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 10\r\nConnection: close\r\n\r\nno upgrade")
			return false
		}
		return true
	})
	return addr, seen
}

// TestProxyUpgradeTunnel: an accepted upgrade becomes a byte tunnel in both
// directions, including bytes either side sent right behind the handshake.
func TestProxyUpgradeTunnel(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, seen := upgradeUpstream(t)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /ws/a%2Cb?x=%20y HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, X-Hop\r\nUpgrade: echo\r\nX-Hop: 1\r\nSec-WebSocket-Key: abc\r\n\r\n")
			resp, err := readReply(br, "GET")
			if err != nil || resp.status() != 101 {
				t.Fatalf("handshake: %q %v", resp.line, err)
			}
			if resp.fields.get("Upgrade") != "echo" || !strings.Contains(strings.ToLower(resp.fields.get("Connection")), "upgrade") {
				t.Errorf("101 fields %q: want Upgrade: echo and Connection: Upgrade", resp.fields)
			}
			got := nextSeen(t, seen)
			if got.target() != "/ws/a%2Cb?x=%20y" || got.fields.get("Upgrade") != "echo" ||
				!strings.EqualFold(got.fields.get("Connection"), "upgrade") ||
				got.fields.has("X-Hop") || got.fields.get("Sec-Websocket-Key") != "abc" {
				t.Errorf("upstream saw %q %q", got.line, got.fields)
			}
			if line, err := br.ReadString('\n'); err != nil || line != "greeting\n" {
				t.Fatalf("bytes the upstream sent with its 101: %q %v", line, err)
			}
			// A blank line after a line ("ping\n\n") is a tunnel's byte like
			// any other, not the end of a request head.
			for _, msg := range []string{"ping\n", "\n", "second message\n", strings.Repeat("x", 100) + "\n"} {
				io.WriteString(c, msg)
				if line, err := br.ReadString('\n'); err != nil || line != msg {
					t.Fatalf("echo of %q: %q %v", msg, line, err)
				}
			}
			// A large message, read while it is written.
			big := payload(2<<20, 21)
			go c.Write(big)
			echo := make([]byte, len(big))
			if _, err := io.ReadFull(br, echo); err != nil {
				t.Fatalf("echo of 2 MiB: %v", err)
			}
			if d := sameBytes(echo, big); d != "" {
				t.Fatalf("echo of 2 MiB: %s", d)
			}
			// The client half-closes; the upstream ends; the client sees the end.
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			rest, err := io.ReadAll(br)
			if err != nil || len(rest) != 0 {
				t.Fatalf("after the client half-closed: %q %v; want the tunnel closed", rest, err)
			}
		})
	}
}

// TestProxyUpgradeEarlyData: bytes the client sends right behind the upgrade
// request, before the 101 arrives, reach the upstream once it switched.
func TestProxyUpgradeEarlyData(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, _ := upgradeUpstream(t)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nearly\n")
			if resp, err := readReply(br, "GET"); err != nil || resp.status() != 101 {
				t.Fatalf("handshake: %q %v", resp.line, err)
			}
			var got bytes.Buffer
			for got.String() != "greeting\nearly\n" {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("after the 101: got %q, %v; want the greeting and the echo of the early bytes", got.String(), err)
				}
				got.WriteString(line)
			}
		})
	}
}

// TestProxyUpgradeRefused: an upstream that does not switch protocols answers
// an ordinary response, relayed as such, and the client's connection goes on
// serving requests.
func TestProxyUpgradeRefused(t *testing.T) {
	tests := []struct {
		desc     string
		protocol string
		want     int
		wantBody string
	}{
		{desc: "refused with 400", protocol: "other", want: 400, wantBody: "no upgrade"},
		{desc: "ignored with 200", protocol: "ignored", want: 200, wantBody: "not upgraded"},
	}
	for _, tr := range e2eTransports {
		for _, tc := range tests {
			t.Run(string(tr)+"/"+tc.desc, func(t *testing.T) {
				up, _ := upgradeUpstream(t)
				tg := startGatewayWith(t, oneRoute(up), nil, tr)
				c, br := dialRaw(t, tg.addr(3000))
				resp := roundTripRaw(t, c, br, "GET", "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: "+tc.protocol+"\r\n\r\n")
				if resp.status() != tc.want || string(resp.body) != tc.wantBody {
					t.Fatalf("got %q %q, want %d %q", resp.line, resp.body, tc.want, tc.wantBody)
				}
				if resp.fields.has("Upgrade") || resp.fields.has("Connection") {
					t.Errorf("relayed response carries %q", resp.fields)
				}
				next := roundTripRaw(t, c, br, "GET", "GET /plain HTTP/1.1\r\nHost: a\r\n\r\n")
				if next.status() != 200 || string(next.body) != "plain" {
					t.Fatalf("request after the refusal: %q %q", next.line, next.body)
				}
			})
		}
	}
}

// TestProxyUpgradeShutdown: an open tunnel is a request in flight: Shutdown
// waits for it until its context ends, then closes it.
func TestProxyUpgradeShutdown(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, _ := upgradeUpstream(t)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			if resp, err := readReply(br, "GET"); err != nil || resp.status() != 101 {
				t.Fatalf("handshake: %q %v", resp.line, err)
			}
			if line, err := br.ReadString('\n'); err != nil || line != "greeting\n" {
				t.Fatalf("greeting: %q %v", line, err)
			}
			const grace = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			start := time.Now()
			tg.gw.Shutdown(ctx)
			if took := time.Since(start); took < grace-50*time.Millisecond {
				t.Errorf("Shutdown returned after %v, without waiting for the open tunnel", took)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if b, err := br.ReadByte(); !isClosed(err) {
				t.Fatalf("tunnel still open after Shutdown: read %q %v", b, err)
			}
		})
	}
}

// TestProxyUpgradeAccessLog: an upgrade tunnel leaves one access line,
// written when the tunnel ends (as Envoy and nginx log an upgraded
// connection), with status 101, the bytes that went through it each way
// and its whole duration; with or without an accessLog policy, whose
// fields still read the request then.
func TestProxyUpgradeAccessLog(t *testing.T) {
	tests := []struct {
		desc   string
		policy string
		want   map[string]any
	}{
		{desc: "built-in fields"},
		{desc: "accessLog policy", policy: `
frontendPolicies:
  accessLog:
    add:
      upgrade: request.headers["upgrade"]
`, want: map[string]any{"upgrade": "echo"}},
	}
	for _, tr := range e2eTransports {
		for _, tc := range tests {
			t.Run(string(tr)+"/"+tc.desc, func(t *testing.T) {
				up, _ := upgradeUpstream(t)
				tg := startGatewayWith(t, tc.policy+oneRoute(up), nil, tr)
				c, br := dialRaw(t, tg.addr(3000))
				io.WriteString(c, "GET /ws?x=1 HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
				if resp, err := readReply(br, "GET"); err != nil || resp.status() != 101 {
					t.Fatalf("handshake: %q %v", resp.line, err)
				}
				opened := time.Now()
				if line, err := br.ReadString('\n'); err != nil || line != "greeting\n" {
					t.Fatalf("greeting: %q %v", line, err)
				}
				big := payload(64<<10, 7)
				go c.Write(big)
				if _, err := io.ReadFull(br, make([]byte, len(big))); err != nil {
					t.Fatalf("echo: %v", err)
				}
				if n := tg.accessLogs().FilterMessage("request").Len(); n != 0 {
					t.Fatalf("%d access lines while the tunnel is open, want none until it ends", n)
				}
				// A tunnel that stays open a while, quiet.
				time.Sleep(50 * time.Millisecond)
				io.WriteString(c, "ping\n")
				if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
					t.Fatalf("echo of ping: %q %v", line, err)
				}
				open := time.Since(opened)
				c.(*net.TCPConn).CloseWrite()
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
					t.Fatalf("after the client half-closed: %q %v", rest, err)
				}
				eventually(t, 5*time.Second, "the tunnel's access line", func() bool { return tg.accessLogs().FilterMessage("request").Len() > 0 })
				line := lastAccessLine(t, tg.accessLogs(), 1)
				want := map[string]any{"method": "GET", "path": "/ws", "status": int64(101),
					"bytes_in": int64(len(big) + len("ping\n")), "bytes_out": int64(len("greeting\n") + len(big) + len("ping\n"))}
				for k, v := range tc.want {
					want[k] = v
				}
				requireFields(t, line, want)
				if d, _ := line["duration"].(time.Duration); d < open {
					t.Errorf("duration %v, want the tunnel's whole life (over %v)", line["duration"], open)
				}
			})
		}
	}
}
