package telemetry

import (
	"io"
	"sort"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// Registry holds one gateway's metrics. The zero value is not usable; create
// one with NewRegistry. All methods are safe for concurrent use.
type Registry struct {
	set *metrics.Set

	mu     sync.Mutex
	routes map[routeKey]*RouteMetrics
	hists  map[string]*routeHistogram // by route name
	mcp    map[string]*MCPMetrics     // by route name
	llm    *LLMMetrics                // created by the first call to LLM
}

type routeKey struct{ route, backend string }

// routeHistogram is a route's duration histogram with its rendered labels.
type routeHistogram struct {
	labels string // `route="..."`
	h      durationHistogram
}

// NewRegistry returns an empty registry with its own metrics set.
func NewRegistry() *Registry {
	return &Registry{
		set:    metrics.NewSet(),
		routes: make(map[routeKey]*RouteMetrics),
		hists:  make(map[string]*routeHistogram),
	}
}

// Route returns the handle for requests matched to route and forwarded to
// backend. Call it when a configuration snapshot is compiled, not per
// request. The same (route, backend) always yields the same handle, so
// counts carry over across reloads. Empty names are exposed as "unknown".
func (r *Registry) Route(route, backend string) *RouteMetrics {
	k := routeKey{route, backend}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.routes[k]; m != nil {
		return m
	}
	rh := r.hists[route]
	if rh == nil {
		rh = &routeHistogram{labels: string(appendLabel(nil, "route", route))}
		r.hists[route] = rh
	}
	m := &RouteMetrics{
		set:      r.set,
		route:    route,
		backend:  backend,
		hist:     &rh.h,
		bytesIn:  r.set.GetOrCreateCounter(seriesName(famRequestBytes, "route", route)),
		bytesOut: r.set.GetOrCreateCounter(seriesName(famResponseBytes, "route", route)),
	}
	r.routes[k] = m
	return m
}

// Backend returns the handle for connection-level events of a backend.
func (r *Registry) Backend(name string) *BackendMetrics {
	return &BackendMetrics{
		connectErrors: r.set.GetOrCreateCounter(seriesName(famConnectErrors, "backend", name)),
	}
}

// WritePrometheus writes every metric of r to w as one Prometheus text
// exposition (version 0.0.4), each family preceded by # HELP and # TYPE.
func (r *Registry) WritePrometheus(w io.Writer) {
	var raw bytesWriter
	r.set.WritePrometheus(&raw)
	out := make([]byte, 0, len(raw)+4096)
	out = appendAnnotated(out, raw)
	out = r.appendHistograms(out)
	out = r.appendLLM(out)
	_, _ = w.Write(out)
}

// appendHistograms appends the duration histograms, ordered by route.
func (r *Registry) appendHistograms(b []byte) []byte {
	r.mu.Lock()
	hs := make([]*routeHistogram, 0, len(r.hists))
	for _, h := range r.hists {
		hs = append(hs, h)
	}
	r.mu.Unlock()
	if len(hs) == 0 {
		return b
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].labels < hs[j].labels })
	b = appendMeta(b, families[famRequestDuration])
	for _, h := range hs {
		b = h.h.appendTo(b, famRequestDuration, h.labels)
	}
	return b
}

// bytesWriter collects what the metrics set writes.
type bytesWriter []byte

func (w *bytesWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}
