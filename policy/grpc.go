package policy

import (
	"strings"
	"time"
	"unicode/utf8"

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

// ProtoString is s made a valid protobuf string, which must be UTF-8 (grpc-go
// refuses to marshal one that is not): each run of bytes that are not is
// replaced with U+FFFD; s itself when it is UTF-8. For the strings a gRPC
// policy builds from a client's bytes (headers, paths, bodies, descriptor
// values), which HTTP lets hold any byte.
func ProtoString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
