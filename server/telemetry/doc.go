// Package telemetry owns the gateway's Prometheus metrics: the request,
// connection and byte counters, the request-duration histogram, the LLM
// (GenAI) metrics, and their text exposition for the stats server's
// /metrics endpoint.
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
//	agentgateway_downstream_accept_errors_total{bind}             counter (failed accepts: EMFILE, ENOMEM)
//
// LLM exchanges (Registry.LLM) are recorded in the OpenTelemetry GenAI
// semantic conventions' metrics, named by the OTel-to-Prometheus rules with
// the same prefix, and labelled gen_ai_operation_name, gen_ai_provider_name,
// gen_ai_request_model, gen_ai_response_model, route and backend:
//
//	agentgateway_gen_ai_client_token_usage{...,gen_ai_token_type}          histogram (tokens)
//	agentgateway_gen_ai_server_request_duration_seconds{...[,error_type]}  histogram
//	agentgateway_gen_ai_server_time_to_first_token_seconds{...}            histogram (successful streams)
//	agentgateway_gen_ai_server_time_per_output_token_seconds{...}          histogram (successful streams)
//	agentgateway_gen_ai_client_cost_total{...}                             counter (catalog currency units)
//	agentgateway_gen_ai_provider_healthy{backend,provider}                 gauge (1 live, 0 evicted)
//	agentgateway_gen_ai_provider_evictions_total{backend,provider}         counter
//
// The gateway is the server its clients call, so the duration, first-token
// and per-output-token metrics are the conventions' gen_ai.server.* ones
// (agentgateway's choice too); error_type is set on failed exchanges only,
// as the conventions put it on the duration alone. The conventions name
// two token types, input and output; cached input is exposed as the
// custom type input_cache_read (agentgateway's value), a part of input,
// not an addition to it. The cost counter is not in the conventions.
// agentgateway writes the duration histograms without the "_seconds"
// suffix and the cost as ..._cost_usd_total; these names follow the OTel
// rules and leave the currency to the catalog. Model names come from
// clients, so at most 1000 label sets keep their models (1000 more for
// failed exchanges' durations); later ones count under model "other", and
// label values longer than 256 bytes are exposed as "other".
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
