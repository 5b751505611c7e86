package policy

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// GRPCReconnect bounds grpc-go's reconnect backoff for the services the
// gateway calls (extAuthz, extProc, the remote rate limit, the trace
// collector). grpc-go's default grows from 1 s to 120 s: after an outage
// of a service the gateway kept treating it as down for up to two minutes
// after its return (the failure mode deciding meanwhile, or spans lost).
// Reconnects start after 100 ms and wait at most 1 s, so a service is used
// again within about a second of its return; an unreachable one costs a
// dial a second.
var GRPCReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 20 * time.Second, // grpc-go's default (the zero value would give dials no time)
})
