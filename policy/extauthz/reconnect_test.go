package extauthz

import (
	"net"
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
)

// TestReconnectBackoffIsBounded: while the service fails, the client tries
// it again at least about once a second (grpc-go's default backoff grows
// to 2 minutes), so a service back from an outage is used again at once.
// The service here accepts each connection and closes it.
func TestReconnectBackoffIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan time.Time, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case accepted <- time.Now():
			default:
			}
		}
	}()
	p := newPolicy(t, config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{GRPC: &config.ExtAuthzGRPC{}}}, ln.Addr().String())
	t.Cleanup(func() { _ = p.grpc.conn.Close() })
	p.grpc.conn.cc.Connect()
	// grpc-go's default waits 1, 1.6, 2.56, 4.1 s (±20%) between attempts:
	// six attempts take 9 s, and the third wait is over 2 s.
	const attempts, maxGap = 6, 1800 * time.Millisecond
	deadline := time.After(6 * time.Second)
	var last time.Time
	for i := range attempts {
		select {
		case at := <-accepted:
			if i > 0 && at.Sub(last) > maxGap {
				t.Fatalf("attempt %d came %v after the one before, want at most %v", i+1, at.Sub(last), maxGap)
			}
			last = at
		case <-deadline:
			t.Fatalf("%d connection attempts in 6 s, want %d", i, attempts)
		}
	}
}
