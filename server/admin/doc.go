// Package admin owns the gateway's three side servers, all plain net/http
// (none of them is on the request path):
//
//   - admin (default 127.0.0.1:15000): the UI page at /ui/, the effective
//     configuration at /config_dump, Go profiling under /debug/pprof/, and a
//     small index at /.
//   - stats (default :15020): Prometheus metrics at /metrics.
//   - readiness (default :15021): /healthz/ready, 200 "ready" or
//     503 "not ready".
//
// Each address is "host:port", "unix:/path" for a unix domain socket (as
// agentgateway accepts), or "off" / "" to disable that server. Start binds
// every enabled listener before it returns, so a port conflict is reported
// to the caller rather than logged from a goroutine.
package admin
