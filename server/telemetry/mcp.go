package telemetry

import (
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// maxMCPSeries bounds the (route, method, target, tool) combinations kept:
// tool names come from clients, and unknown ones must not grow the registry
// without end. Later combinations are counted under tool="other", as is a
// name longer than a label may be (maxLLMLabelLen): a series keeps its
// labels, and 100 KB names made /metrics megabytes long.
const maxMCPSeries = 2000

// MCPMetrics records MCP calls by route, method, target and tool.
type MCPMetrics struct {
	set   *metrics.Set
	route string

	mu     sync.Mutex
	series map[mcpKey]*mcpSeries
}

type mcpKey struct{ method, target, tool string }

type mcpSeries struct {
	calls, errors *metrics.Counter
	seconds       *metrics.FloatCounter
}

// MCP returns the MCP call metrics of a route.
func (r *Registry) MCP(route string) *MCPMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mcp == nil {
		r.mcp = map[string]*MCPMetrics{}
	}
	if m := r.mcp[route]; m != nil {
		return m
	}
	m := &MCPMetrics{set: r.set, route: route, series: map[mcpKey]*mcpSeries{}}
	r.mcp[route] = m
	return m
}

// mcpMethods are the JSON-RPC methods of MCP a client calls. Any other
// name, which a client chooses freely, is counted as "other".
var mcpMethods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"logging/setLevel": true, "completion/complete": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true,
}

// mcpMethodLabel is the method label of a call: the method when MCP
// defines it, else "other".
func mcpMethodLabel(method string) string {
	if mcpMethods[method] {
		return method
	}
	return "other"
}

// ObserveMCP records one call.
func (m *MCPMetrics) ObserveMCP(method, target, tool string, failed bool, d time.Duration) {
	if m == nil {
		return
	}
	k := mcpKey{mcpMethodLabel(method), boundLabel(target), boundLabel(tool)}
	m.mu.Lock()
	s := m.series[k]
	if s == nil {
		if len(m.series) >= maxMCPSeries {
			k.tool = "other"
			s = m.series[k]
		}
		if s == nil {
			labels := []string{"route", m.route, "method", k.method, "target", k.target, "tool", k.tool}
			s = &mcpSeries{
				calls:   m.set.GetOrCreateCounter(seriesName(famMCPRequests, labels...)),
				errors:  m.set.GetOrCreateCounter(seriesName(famMCPErrors, labels...)),
				seconds: m.set.GetOrCreateFloatCounter(seriesName(famMCPSeconds, labels...)),
			}
			m.series[k] = s
		}
	}
	m.mu.Unlock()
	s.calls.Inc()
	if failed {
		s.errors.Inc()
	}
	s.seconds.Add(d.Seconds())
}
