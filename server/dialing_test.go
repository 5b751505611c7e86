package server

import (
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/config"
)

// TestBackendTCPDialing: a backend's tcp policy replaces config.backend's
// keepalive settings as a whole; fields it leaves out take the keepalive
// defaults, not config.backend's.
func TestBackendTCPDialing(t *testing.T) {
	off, on := false, true
	retries := 3
	global := backend.Dialing{
		ConnectTimeout: time.Second,
		Keepalive:      backend.Keepalive{Enabled: false, Time: time.Minute, Interval: time.Minute, Retries: 2},
		IPv4Only:       true,
	}
	dur := func(d time.Duration) *config.Duration { return &config.Duration{Duration: d} }
	tests := []struct {
		desc string
		tcp  config.BackendTCP
		want backend.Dialing
	}{
		{
			desc: "empty keepalives: the defaults",
			tcp:  config.BackendTCP{Keepalives: &config.Keepalive{}, ConnectTimeout: dur(2 * time.Second)},
			want: backend.Dialing{ConnectTimeout: 2 * time.Second, Keepalive: backend.DefaultKeepalive, IPv4Only: true},
		},
		{
			desc: "fields given win over the defaults",
			tcp:  config.BackendTCP{Keepalives: &config.Keepalive{Enabled: &on, Time: dur(30 * time.Second), Retries: &retries}, ConnectTimeout: dur(time.Second)},
			want: backend.Dialing{ConnectTimeout: time.Second, Keepalive: backend.Keepalive{Enabled: true, Time: 30 * time.Second, Interval: backend.DefaultKeepalive.Interval, Retries: 3}, IPv4Only: true},
		},
		{
			desc: "disabled",
			tcp:  config.BackendTCP{Keepalives: &config.Keepalive{Enabled: &off}, ConnectTimeout: dur(time.Second)},
			want: backend.Dialing{ConnectTimeout: time.Second, Keepalive: backend.Keepalive{Enabled: false, Time: backend.DefaultKeepalive.Time, Interval: backend.DefaultKeepalive.Interval, Retries: backend.DefaultKeepalive.Retries}, IPv4Only: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := backendTCPDialing(&tc.tcp, global); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestClientKeepalive: an accepted connection gets TCP keepalive probes only
// when frontendPolicies.tcp.keepalives asks for them, with its time (Go's
// listener would otherwise turn them on at 15 s for every connection).
func TestClientKeepalive(t *testing.T) {
	for _, tc := range []struct {
		desc, frontend string
		on             bool
		idle           int // seconds, when on
	}{
		{desc: "not configured", on: false},
		{desc: "configured", frontend: "frontendPolicies:\n  tcp: {keepalives: {time: 45s}}\n", on: true, idle: 45},
		{desc: "disabled", frontend: "frontendPolicies:\n  tcp: {keepalives: {enabled: false}}\n", on: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGateway(t, tc.frontend+`
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {directResponse: {status: 200}}
`, nil)
			c, br := rawConn(t, tg.addr(3000))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			readResponse(t, br, "GET") // served: dispatch has run
			var on, idle int
			found := 0
			for _, b := range tg.gw.binds {
				b.mu.Lock()
				for sc := range b.conns {
					tc, ok := sc.(*sock.Conn)
					if !ok {
						continue
					}
					raw, err := tc.SyscallConn()
					if err != nil {
						t.Fatal(err)
					}
					raw.Control(func(fd uintptr) {
						on, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
						idle, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
					})
					found++
				}
				b.mu.Unlock()
			}
			if found != 1 {
				t.Fatalf("%d server-side connections", found)
			}
			if (on != 0) != tc.on || tc.on && idle != tc.idle {
				t.Fatalf("SO_KEEPALIVE %d, TCP_KEEPIDLE %d; want on %v, idle %d", on, idle, tc.on, tc.idle)
			}
		})
	}
}
