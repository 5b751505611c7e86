package telemetry

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestRequestCounters(t *testing.T) {
	r := NewRegistry()
	api := r.Route("default/api", "svc-a")
	other := r.Route("default/web", "")
	api.Observe([]byte("GET"), 200, time.Millisecond, 10, 100)
	api.Observe([]byte("GET"), 200, time.Millisecond, 10, 100)
	api.Observe([]byte("POST"), 503, time.Millisecond, 1, 2)
	api.Observe([]byte("BREW"), 418, time.Millisecond, 0, 0)
	api.Observe([]byte("get"), 0, time.Millisecond, 0, 0)
	api.Observe([]byte("PUT"), 600, time.Millisecond, 0, 0)
	other.Observe([]byte("DELETE"), 204, time.Millisecond, 5, 0)

	fams := scrape(t, r)
	tests := []struct {
		desc   string
		labels map[string]string
		want   float64
	}{
		{"repeated method and status accumulate", map[string]string{"route": "default/api", "backend": "svc-a", "method": "GET", "status": "200"}, 2},
		{"other status code kept exact", map[string]string{"route": "default/api", "method": "POST", "status": "503"}, 1},
		{"unknown method folds to OTHER", map[string]string{"route": "default/api", "method": "OTHER", "status": "418"}, 1},
		{"lower-case method is OTHER, status 0 is other", map[string]string{"route": "default/api", "method": "OTHER", "status": "other"}, 1},
		{"status above 599 is other", map[string]string{"route": "default/api", "method": "PUT", "status": "other"}, 1},
		{"empty backend exposed as unknown", map[string]string{"route": "default/web", "backend": "unknown", "method": "DELETE", "status": "204"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := counterValue(t, fams, famRequests, tc.labels); got != tc.want {
				t.Errorf("%v = %v, want %v", tc.labels, got, tc.want)
			}
		})
	}
	if n := len(fams[famRequests].GetMetric()); n != 6 {
		t.Errorf("requests_total has %d series, want 6", n)
	}
}

func TestBytesCounters(t *testing.T) {
	r := NewRegistry()
	a := r.Route("r1", "b1")
	b := r.Route("r1", "b2") // same route, other backend: shares the route's byte counters
	c := r.Route("r2", "b1")
	a.Observe([]byte("GET"), 200, 0, 100, 1000)
	b.Observe([]byte("GET"), 200, 0, 20, 30)
	c.Observe([]byte("GET"), 200, 0, 7, 0)
	c.Observe([]byte("GET"), 200, 0, -5, -5) // negative sizes are ignored

	fams := scrape(t, r)
	tests := []struct {
		desc  string
		fam   string
		route string
		want  float64
	}{
		{"received summed over backends", famRequestBytes, "r1", 120},
		{"sent summed over backends", famResponseBytes, "r1", 1030},
		{"received on second route", famRequestBytes, "r2", 7},
		{"nothing sent on second route", famResponseBytes, "r2", 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := counterValue(t, fams, tc.fam, map[string]string{"route": tc.route}); got != tc.want {
				t.Errorf("%s{route=%q} = %v, want %v", tc.fam, tc.route, got, tc.want)
			}
		})
	}
}

func TestDurationHistogram(t *testing.T) {
	r := NewRegistry()
	m := r.Route("r", "b")
	obs := []time.Duration{
		200 * time.Microsecond, // <= 0.0005
		500 * time.Microsecond, // exactly on a bound: counted in le="0.0005"
		3 * time.Millisecond,   // <= 0.005
		time.Second,            // exactly 1
		20 * time.Second,       // +Inf only
		-time.Second,           // negative counts as zero
	}
	for _, d := range obs {
		m.Observe([]byte("GET"), 200, d, 0, 0)
	}
	fams := scrape(t, r)
	f := fams[famRequestDuration]
	if f == nil {
		t.Fatalf("family %s missing", famRequestDuration)
	}
	if f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("type = %v, want HISTOGRAM", f.GetType())
	}
	h := find(t, fams, famRequestDuration, map[string]string{"route": "r"}).GetHistogram()
	if h.GetSampleCount() != uint64(len(obs)) {
		t.Errorf("count = %d, want %d", h.GetSampleCount(), len(obs))
	}
	wantSum := (200*time.Microsecond + 500*time.Microsecond + 3*time.Millisecond + time.Second + 20*time.Second).Seconds()
	if math.Abs(h.GetSampleSum()-wantSum) > 1e-9 {
		t.Errorf("sum = %v, want %v", h.GetSampleSum(), wantSum)
	}
	// The parser keeps the +Inf bucket as the last one.
	if len(h.GetBucket()) != numBuckets {
		t.Fatalf("%d buckets, want %d", len(h.GetBucket()), numBuckets)
	}
	wantCum := map[float64]uint64{0.0005: 3, 0.001: 3, 0.0025: 3, 0.005: 4, 0.5: 4, 1: 5, 10: 5, math.Inf(1): 6}
	for i, bk := range h.GetBucket() {
		if i < len(durationBuckets) && bk.GetUpperBound() != durationBuckets[i] {
			t.Errorf("bucket %d: le=%v, want %v", i, bk.GetUpperBound(), durationBuckets[i])
		}
		if want, ok := wantCum[bk.GetUpperBound()]; ok && bk.GetCumulativeCount() != want {
			t.Errorf("le=%v: %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want)
		}
	}
	if last := h.GetBucket()[numBuckets-1]; !math.IsInf(last.GetUpperBound(), 1) || last.GetCumulativeCount() != h.GetSampleCount() {
		t.Errorf("+Inf bucket = %v/%d, want +Inf/%d", last.GetUpperBound(), last.GetCumulativeCount(), h.GetSampleCount())
	}
}

func TestBucketIndex(t *testing.T) {
	tests := []struct {
		desc string
		d    time.Duration
		want string // le label of the bucket the observation lands in
	}{
		{"zero", 0, "0.0005"},
		{"just under first bound", 499 * time.Microsecond, "0.0005"},
		{"on first bound", 500 * time.Microsecond, "0.0005"},
		{"just over first bound", 500*time.Microsecond + 1, "0.001"},
		{"100ms", 100 * time.Millisecond, "0.1"},
		{"on last bound", 10 * time.Second, "10"},
		{"over last bound", 10*time.Second + 1, "+Inf"},
		{"negative", -5, "0.0005"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var h durationHistogram
			h.observe(tc.d)
			got := ""
			for i := range h.buckets {
				if h.buckets[i].Load() == 1 {
					got = bucketLabels[i]
				}
			}
			if got != tc.want {
				t.Errorf("observe(%v) landed in le=%q, want %q", tc.d, got, tc.want)
			}
		})
	}
}

func TestBackendAndBind(t *testing.T) {
	r := NewRegistry()
	r.Backend("svc-a").ConnectError()
	r.Backend("svc-a").ConnectError() // a new handle for the same backend shares the series
	r.Backend("svc-b").ConnectError()
	b := r.Bind(8080)
	for range 3 {
		b.ConnOpened()
	}
	b.ConnClosed()
	r.Bind(9090).ConnOpened()
	r.TCP(5432, "db", "tls").Forwarded(100, 7)
	r.TCP(5432, "db", "tls").Forwarded(1, 1)

	fams := scrape(t, r)
	tests := []struct {
		desc   string
		fam    string
		labels map[string]string
		want   float64
		typ    dto.MetricType
	}{
		{"connect errors per backend", famConnectErrors, map[string]string{"backend": "svc-a"}, 2, dto.MetricType_COUNTER},
		{"connect errors other backend", famConnectErrors, map[string]string{"backend": "svc-b"}, 1, dto.MetricType_COUNTER},
		{"accepted connections", famConnectionsTotal, map[string]string{"bind": "bind/8080"}, 3, dto.MetricType_COUNTER},
		{"open connections", famConnectionsOpened, map[string]string{"bind": "bind/8080"}, 2, dto.MetricType_GAUGE},
		{"open on other port", famConnectionsOpened, map[string]string{"bind": "bind/9090"}, 1, dto.MetricType_GAUGE},
		{"forwarded bytes received", famDownstreamRx, map[string]string{"bind": "bind/5432", "listener": "db", "protocol": "tls"}, 101, dto.MetricType_COUNTER},
		{"forwarded bytes sent", famDownstreamTx, map[string]string{"bind": "bind/5432", "listener": "db", "protocol": "tls"}, 8, dto.MetricType_COUNTER},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := fams[tc.fam].GetType(); got != tc.typ {
				t.Fatalf("%s type = %v, want %v", tc.fam, got, tc.typ)
			}
			m := find(t, fams, tc.fam, tc.labels)
			got := m.GetCounter().GetValue()
			if tc.typ == dto.MetricType_GAUGE {
				got = m.GetGauge().GetValue()
			}
			if got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.fam, tc.labels, got, tc.want)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	r := NewRegistry()
	r.Route("r", "b").Observe([]byte("GET"), 200, time.Millisecond, 1, 1)
	r.Backend("b").ConnectError()
	r.Bind(1).ConnOpened()
	r.MCP("r").ObserveMCP("tools/call", "t", "echo", true, time.Millisecond)
	r.Reload().Record(time.Now(), nil)
	r.TCP(1, "l", "tcp").Forwarded(1, 1)
	fams := scrape(t, r)
	for name, f := range families {
		t.Run(name, func(t *testing.T) {
			mf := fams[name]
			if mf == nil {
				t.Fatalf("family missing")
			}
			if mf.GetHelp() != f.help {
				t.Errorf("help = %q, want %q", mf.GetHelp(), f.help)
			}
			if got := strings.ToLower(mf.GetType().String()); got != f.typ {
				t.Errorf("type = %q, want %q", got, f.typ)
			}
		})
	}
	if len(fams) != len(families) {
		t.Errorf("exposition has %d families, want %d", len(fams), len(families))
	}
}

func TestReloadKeepsSeries(t *testing.T) {
	r := NewRegistry()
	first := r.Route("r", "b")
	first.Observe([]byte("GET"), 200, time.Millisecond, 1, 1)
	second := r.Route("r", "b") // a config reload compiles a new snapshot
	if second != first {
		t.Errorf("Route returned a new handle for the same labels")
	}
	second.Observe([]byte("GET"), 200, time.Millisecond, 1, 1)
	fams := scrape(t, r)
	if got := counterValue(t, fams, famRequests, map[string]string{"route": "r", "method": "GET", "status": "200"}); got != 2 {
		t.Errorf("requests after reload = %v, want 2", got)
	}
	h := find(t, fams, famRequestDuration, map[string]string{"route": "r"}).GetHistogram()
	if h.GetSampleCount() != 2 {
		t.Errorf("histogram count after reload = %d, want 2", h.GetSampleCount())
	}
}

func TestLabelEscaping(t *testing.T) {
	tests := []struct {
		desc  string
		route string
		want  string
	}{
		{"quote and backslash", `a"b\c`, `a"b\c`},
		{"newline", "line1\nline2", "line1\nline2"},
		{"braces and comma", `x{y="z"},w`, `x{y="z"},w`},
		{"unicode", "路由/ü", "路由/ü"},
		{"invalid utf-8 replaced", "bad\xffbyte", "bad\uFFFDbyte"},
		{"empty becomes unknown", "", "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := NewRegistry()
			r.Route(tc.route, tc.route).Observe([]byte("GET"), 200, time.Millisecond, 1, 1)
			fams := scrape(t, r)
			for _, fam := range []string{famRequests, famRequestDuration, famRequestBytes} {
				find(t, fams, fam, map[string]string{"route": tc.want})
			}
			find(t, fams, famRequests, map[string]string{"backend": tc.want})
		})
	}
}

func TestNilHandlesIgnoreEvents(t *testing.T) {
	var m *RouteMetrics
	var b *BackendMetrics
	var bm *BindMetrics
	m.Observe([]byte("GET"), 200, time.Second, 1, 1)
	b.ConnectError()
	bm.ConnOpened()
	bm.ConnClosed()
	r := NewRegistry()
	if fams := scrape(t, r); len(fams) != 0 {
		t.Errorf("empty registry exposes %d families", len(fams))
	}
}

func TestMCPSeriesAreBounded(t *testing.T) {
	r := NewRegistry()
	m := r.MCP("r")
	for i := range maxMCPSeries + 10 {
		m.ObserveMCP("tools/call", "t", "tool-"+strconv.Itoa(i), i%2 == 0, time.Millisecond)
	}
	fams := scrape(t, r)
	calls := fams[famMCPRequests]
	if n := len(calls.GetMetric()); n != maxMCPSeries+1 {
		t.Fatalf("%d series, want %d (the cap plus tool=\"other\")", n, maxMCPSeries+1)
	}
	other := find(t, fams, famMCPRequests, map[string]string{"route": "r", "method": "tools/call", "target": "t", "tool": "other"})
	if got := other.GetCounter().GetValue(); got != 10 {
		t.Fatalf("other = %v, want 10", got)
	}
	if same := r.MCP("r"); same != m {
		t.Fatal("MCP(route) returned a new handle for the same route")
	}
}

// TestMCPMethodsAreBounded: method names a client makes up share one
// series, "other", so they cannot grow the exposition.
func TestMCPMethodsAreBounded(t *testing.T) {
	r := NewRegistry()
	m := r.MCP("r")
	long := strings.Repeat("x", 1024)
	for i := range 5000 {
		m.ObserveMCP(long+strconv.Itoa(i), "t", "x", false, time.Millisecond)
	}
	m.ObserveMCP("tools/list", "t", "x", false, time.Millisecond)
	fams := scrape(t, r)
	if n := len(fams[famMCPRequests].GetMetric()); n != 2 {
		t.Fatalf("%d series, want 2 (tools/list and other)", n)
	}
	other := find(t, fams, famMCPRequests, map[string]string{"route": "r", "method": "other", "target": "t", "tool": "x"})
	if got := other.GetCounter().GetValue(); got != 5000 {
		t.Fatalf("other = %v, want 5000", got)
	}
}

// TestMCPToolLabelsAreShort: a tool name longer than a label may be is
// counted as tool="other" (a series keeps its labels: 200 calls with
// 100 KB names made /metrics 60 MB); one at the bound keeps its name.
func TestMCPToolLabelsAreShort(t *testing.T) {
	r := NewRegistry()
	m := r.MCP("r")
	for i := range 200 {
		m.ObserveMCP("tools/call", "t", strings.Repeat("x", 100_000)+strconv.Itoa(i), false, time.Millisecond)
	}
	atBound := strings.Repeat("y", maxLLMLabelLen)
	m.ObserveMCP("tools/call", "t", atBound, false, time.Millisecond)
	var text strings.Builder
	r.WritePrometheus(&text)
	if text.Len() > 16<<10 {
		t.Errorf("exposition of %d bytes", text.Len())
	}
	fams := scrape(t, r)
	other := find(t, fams, famMCPRequests, map[string]string{"route": "r", "method": "tools/call", "target": "t", "tool": "other"})
	if got := other.GetCounter().GetValue(); got != 200 {
		t.Errorf("other = %v, want 200", got)
	}
	find(t, fams, famMCPRequests, map[string]string{"route": "r", "method": "tools/call", "target": "t", "tool": atBound})
}
