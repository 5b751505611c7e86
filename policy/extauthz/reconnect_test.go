package extauthz

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/policytest"
)

// TestReconnectBackoffIsBounded: while the service fails, the client tries
// it again at least about once a second (grpc-go's default backoff grows
// to 2 minutes), so a service back from an outage is used again at once.
func TestReconnectBackoffIsBounded(t *testing.T) {
	addr, attempts := policytest.ClosingService(t)
	p := newPolicy(t, config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{GRPC: &config.ExtAuthzGRPC{}}}, addr)
	t.Cleanup(func() { _ = p.grpc.conn.Close() })
	p.grpc.conn.cc.Connect()
	policytest.Reconnects(t, attempts, 6, 1800*time.Millisecond, 6*time.Second)
}
