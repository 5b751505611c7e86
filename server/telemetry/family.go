package telemetry

// Metric family names. The prefix and the names that exist in agentgateway
// (requests_total, request_duration_seconds, response_bytes_total,
// downstream_connections_total) match it; the others follow its style.
const (
	famRequests          = "agentgateway_requests_total"
	famRequestDuration   = "agentgateway_request_duration_seconds"
	famRequestBytes      = "agentgateway_request_bytes_total"
	famResponseBytes     = "agentgateway_response_bytes_total"
	famConnectErrors     = "agentgateway_upstream_connect_errors_total"
	famConnectionsTotal  = "agentgateway_downstream_connections_total"
	famConnectionsOpened = "agentgateway_downstream_connections_open"
	famConnectionsParked = "agentgateway_downstream_connections_parked"
	famAcceptErrors      = "agentgateway_downstream_accept_errors_total"
	famDownstreamRx      = "agentgateway_downstream_received_bytes_total"
	famDownstreamTx      = "agentgateway_downstream_sent_bytes_total"
	famMCPRequests       = "agentgateway_mcp_requests_total"
	famMCPErrors         = "agentgateway_mcp_request_errors_total"
	famMCPSeconds        = "agentgateway_mcp_request_duration_seconds_total"

	famConfigReloads        = "agentgateway_config_reloads_total"
	famConfigLastReloadOK   = "agentgateway_config_last_reload_successful"
	famConfigLastReloadTime = "agentgateway_config_last_reload_timestamp_seconds"
)

// family is the metadata written as # HELP / # TYPE lines.
type family struct {
	name string
	help string
	typ  string
}

// families lists every family this package exposes, keyed by name.
var families = map[string]family{
	famRequests:             {famRequests, "The total number of HTTP requests handled, by route, backend, method and status.", "counter"},
	famRequestDuration:      {famRequestDuration, "Duration of HTTP requests (seconds), by route.", "histogram"},
	famRequestBytes:         {famRequestBytes, "Total HTTP request bytes received from clients, by route.", "counter"},
	famResponseBytes:        {famResponseBytes, "Total HTTP response bytes sent to clients, by route.", "counter"},
	famConnectErrors:        {famConnectErrors, "The total number of failed attempts to connect to a backend.", "counter"},
	famConnectionsTotal:     {famConnectionsTotal, "The total number of downstream connections accepted, by bind.", "counter"},
	famConnectionsOpened:    {famConnectionsOpened, "The number of downstream connections currently open, by bind.", "gauge"},
	famAcceptErrors:         {famAcceptErrors, "The total number of failed accepts of downstream connections (too many open files, out of memory), by bind.", "counter"},
	famConnectionsParked:    {famConnectionsParked, "The number of open downstream connections idle and parked (held without a goroutine), by bind.", "gauge"},
	famDownstreamRx:         {famDownstreamRx, "Total bytes received from clients on forwarded TCP and TLS connections, by bind, listener and protocol (tcp, tls).", "counter"},
	famDownstreamTx:         {famDownstreamTx, "Total bytes sent to clients on forwarded TCP and TLS connections, by bind, listener and protocol (tcp, tls).", "counter"},
	famMCPRequests:          {famMCPRequests, "The total number of MCP calls, by route, method, target and tool.", "counter"},
	famMCPErrors:            {famMCPErrors, "The total number of MCP calls answered with an error, by route, method, target and tool.", "counter"},
	famConfigReloads:        {famConfigReloads, "The total number of configuration reloads, by result (success, failure).", "counter"},
	famConfigLastReloadOK:   {famConfigLastReloadOK, "Whether the last configuration reload succeeded (1) or failed and the previous configuration still runs (0).", "gauge"},
	famConfigLastReloadTime: {famConfigLastReloadTime, "When the last configuration reload was attempted (Unix seconds).", "gauge"},
	famMCPSeconds:           {famMCPSeconds, "Total time spent in MCP calls (seconds), by route, method, target and tool; divide by agentgateway_mcp_requests_total for the mean.", "counter"},
}
