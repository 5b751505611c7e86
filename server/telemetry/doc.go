// Package telemetry owns the gateway's Prometheus metrics: the request,
// connection and byte counters, the request-duration histogram, and their
// text exposition for the stats server's /metrics endpoint.
//
// Counters and gauges live in a github.com/VictoriaMetrics/metrics Set owned
// by a Registry (never the library's global set, so tests and embedders can
// create as many registries as they like). Histograms are this package's own
// fixed-bucket Prometheus histograms, because that library's histograms expose
// "vmrange" buckets while Grafana and histogram_quantile expect cumulative
// "le" buckets.
//
// Metric names follow agentgateway (prefix "agentgateway_") so existing
// dashboards and alerts keep working:
//
//	agentgateway_requests_total{route,backend,method,status}      counter
//	agentgateway_request_duration_seconds{route}                  histogram
//	agentgateway_request_bytes_total{route}                       counter (bytes received from clients)
//	agentgateway_response_bytes_total{route}                      counter (bytes sent to clients)
//	agentgateway_upstream_connect_errors_total{backend}           counter
//	agentgateway_downstream_connections_total{bind}               counter (accepted)
//	agentgateway_downstream_connections_open{bind}                gauge
//	agentgateway_downstream_connections_parked{bind}              gauge (idle, no goroutine)
//
// The hot path works through handles resolved once per config snapshot
// (Registry.Route, Registry.Backend, Registry.Bind). Their methods neither
// allocate nor build label strings: the request counter for a given
// (method, status) pair is created on first use and cached in a fixed table,
// method names are folded onto the standard methods plus "OTHER", and status
// codes outside 100..599 onto "other", so a client cannot grow the number of
// series. Handles for the same labels share the same series, so counts
// survive configuration reloads.
package telemetry
