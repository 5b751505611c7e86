package extproc

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/policytest"
)

// TestReconnectBackoffIsBounded: while the service fails, the client tries
// it again at least about once a second (grpc-go's default backoff grows
// to 2 minutes), so a service back from an outage is used again at once.
func TestReconnectBackoffIsBounded(t *testing.T) {
	addr, attempts := policytest.ClosingService(t)
	p := compile(t, addr, false, time.Second)
	p.conn.cc.Connect()
	policytest.Reconnects(t, attempts, 6, 1800*time.Millisecond, 6*time.Second)
}
