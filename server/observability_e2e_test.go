package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
)

// scrapeGateway renders the gateway's metrics and parses them as a Prometheus
// text exposition; the test fails when they do not parse.
func scrapeGateway(t *testing.T, gw *Gateway) map[string]*dto.MetricFamily {
	t.Helper()
	settleRecords(t, gw)
	var buf bytes.Buffer
	gw.Metrics().WritePrometheus(&buf)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("metrics do not parse: %v\n%s", err, buf.Bytes())
	}
	return fams
}

// seriesOf returns the series of family whose labels include labels, or nil.
func seriesOf(fams map[string]*dto.MetricFamily, family string, labels map[string]string) *dto.Metric {
next:
	for _, m := range fams[family].GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// scrapeValue returns the value of a counter or gauge series, or the sample
// count of a histogram series; a missing series counts as 0.
func scrapeValue(t *testing.T, gw *Gateway, family string, labels map[string]string) float64 {
	t.Helper()
	m := seriesOf(scrapeGateway(t, gw), family, labels)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s%v has no value", family, labels)
	return 0
}

// lastAccessLine returns the fields of the newest access log line and fails
// unless exactly want lines were logged. It must run right after the request
// it looks at: the line's method and path fields alias the gateway's request
// buffers (see TestObservabilityAccessLogFieldsOutliveTheRequest).
func lastAccessLine(t *testing.T, logs *observer.ObservedLogs, want int) map[string]any {
	t.Helper()
	lines := logs.FilterMessage("request").All()
	if len(lines) != want {
		t.Fatalf("%d access log lines, want %d", len(lines), want)
	}
	return lines[len(lines)-1].ContextMap()
}

// TestObservabilityAccessLog: one access log line per request with method,
// path, status, duration, route, backend, bytes and the client address; a
// failed upstream adds the error.
func TestObservabilityAccessLog(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "0123456789")
	}))
	closed := closedAddr(t)
	tg := startGateway(t, `
backends:
- name: named-svc
  host: ${UP}
binds:
- port: 3000
  listeners:
  - routes:
    - name: api
      matches: [{path: {pathPrefix: /api}}]
      backends: [{host: '${UP}'}]
    - name: named
      namespace: team
      matches: [{path: {pathPrefix: /named}}]
      backends: [{backend: named-svc}]
    - name: direct
      matches: [{path: {pathPrefix: /direct}}]
      policies: {directResponse: {status: 202, body: abc}}
    - name: down
      matches: [{path: {pathPrefix: /down}}]
      backends: [{host: '${CLOSED}'}]
  - name: l2
    hostname: unnamed.test
    routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "CLOSED": closed})
	tests := []struct {
		desc, method, path, host, body string
		status                         int
		route, backend                 string
		bytesIn, bytesOut              int64
		upstreamError                  bool
	}{
		{desc: "GET", method: "GET", path: "/api/get", status: 200, route: "api", backend: up, bytesOut: 10},
		{desc: "POST with a body", method: "POST", path: "/api/post", body: "hello", status: 200, route: "api", backend: up, bytesIn: 5, bytesOut: 10},
		{desc: "named backend, namespaced route", method: "GET", path: "/named/x", status: 200, route: "team/named", backend: "named-svc", bytesOut: 10},
		{desc: "route without a name", method: "GET", path: "/unnamed", host: "unnamed.test", status: 200, route: "l2/route0", backend: up, bytesOut: 10},
		{desc: "direct response", method: "GET", path: "/direct", status: 202, route: "direct", bytesOut: 3},
		{desc: "no route", method: "DELETE", path: "/nowhere", status: 404, bytesOut: int64(len("route not found\n"))},
		{desc: "refused upstream", method: "GET", path: "/down", status: 503, route: "down", backend: closed, bytesOut: int64(len("upstream unavailable\n")), upstreamError: true},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, tg.url(3000)+tc.path+"?q=1", body)
			if tc.host != "" {
				req.Host = tc.host
			}
			start := time.Now()
			resp, _ := do(t, req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			// One line per request, written once the response is out.
			f := lastAccessLine(t, tg.accessLogs(), i+1)
			elapsed := time.Since(start)
			d, _ := f["duration"].(time.Duration)
			if d <= 0 || d > elapsed {
				t.Errorf("duration %v, want in (0, %v]", f["duration"], elapsed)
			}
			if src, _ := f["src"].(string); !strings.HasPrefix(src, "127.0.0.1:") {
				t.Errorf("src %v", f["src"])
			}
			if _, has := f["upstream_error"]; has != tc.upstreamError {
				t.Errorf("upstream_error present %v, want %v: %v", has, tc.upstreamError, f["upstream_error"])
			}
			want := map[string]any{
				"method": tc.method, "path": tc.path, "status": int64(tc.status),
				"route": tc.route, "backend": tc.backend,
				"bytes_in": tc.bytesIn, "bytes_out": tc.bytesOut,
			}
			for k, v := range want {
				if f[k] != v {
					t.Errorf("%s = %#v, want %#v", k, f[k], v)
				}
			}
		})
	}
}

// TestObservabilityAccessLogFieldsOutliveTheRequest: a logging core that keeps
// entries (as zaptest/observer does, or any batching core) must still see each
// request's own method and path after later requests reused the buffers.
func TestObservabilityAccessLogFieldsOutliveTheRequest(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	c, br := rawConn(t, tg.addr(3000))
	for _, r := range []string{"POST /first", "GET /second-request"} {
		io.WriteString(c, r+" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
		readResponse(t, br, strings.Fields(r)[0])
	}
	lines := tg.accessLogs().FilterMessage("request").All()
	if len(lines) != 2 {
		t.Fatalf("%d access log lines", len(lines))
	}
	if f := lines[0].ContextMap(); f["method"] != "POST" || f["path"] != "/first" {
		t.Fatalf("first line now says %v %v", f["method"], f["path"])
	}
}

// TestObservabilityMetrics: request counters by route, backend, method and
// status; the duration histogram; byte counters; connect errors; downstream
// connections.
func TestObservabilityMetrics(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/api/missing" {
			w.WriteHeader(404)
		}
		io.WriteString(w, "0123456789")
	}))
	closed := closedAddr(t)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - name: api
      matches: [{path: {pathPrefix: /api}}]
      backends: [{host: '${UP}'}]
    - name: down
      matches: [{path: {pathPrefix: /down}}]
      backends: [{host: '${CLOSED}'}]
`, map[string]string{"UP": up, "CLOSED": closed})
	send := func(method, path, body string, n int) {
		for range n {
			req, _ := http.NewRequest(method, tg.url(3000)+path, strings.NewReader(body))
			do(t, req)
		}
	}
	send("GET", "/api/a", "", 3)
	send("POST", "/api/b", "12345", 2)
	send("GET", "/api/missing", "", 1)
	send("GET", "/down", "", 2)
	send("GET", "/nowhere", "", 1)

	fams := scrapeGateway(t, tg.gw)
	value := func(family string, labels map[string]string) float64 {
		m := seriesOf(fams, family, labels)
		switch {
		case m == nil:
			return -1
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
		return -2
	}
	requests := func(route, backend, method, status string) map[string]string {
		return map[string]string{"route": route, "backend": backend, "method": method, "status": status}
	}
	tests := []struct {
		desc   string
		family string
		labels map[string]string
		want   float64
	}{
		{"GET 200", "agentgateway_requests_total", requests("api", up, "GET", "200"), 3},
		{"POST 200", "agentgateway_requests_total", requests("api", up, "POST", "200"), 2},
		{"upstream status", "agentgateway_requests_total", requests("api", up, "GET", "404"), 1},
		{"refused backend answered 503", "agentgateway_requests_total", requests("down", closed, "GET", "503"), 2},
		{"no route", "agentgateway_requests_total", requests("unknown", "unknown", "GET", "404"), 1},
		{"duration histogram count", "agentgateway_request_duration_seconds", map[string]string{"route": "api"}, 6},
		{"request bytes", "agentgateway_request_bytes_total", map[string]string{"route": "api"}, 10},
		{"response bytes", "agentgateway_response_bytes_total", map[string]string{"route": "api"}, 60},
		{"connect errors", "agentgateway_upstream_connect_errors_total", map[string]string{"backend": closed}, 2},
		{"no connect errors for a healthy backend", "agentgateway_upstream_connect_errors_total", map[string]string{"backend": up}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := value(tc.family, tc.labels); got != tc.want {
				t.Fatalf("%s%v = %v, want %v", tc.family, tc.labels, got, tc.want)
			}
		})
	}
	t.Run("histogram buckets are cumulative and end at the count", func(t *testing.T) {
		h := seriesOf(fams, "agentgateway_request_duration_seconds", map[string]string{"route": "api"}).GetHistogram()
		prev := uint64(0)
		for _, b := range h.GetBucket() {
			if b.GetCumulativeCount() < prev {
				t.Fatalf("bucket le=%v count %d below the previous %d", b.GetUpperBound(), b.GetCumulativeCount(), prev)
			}
			prev = b.GetCumulativeCount()
		}
		if prev != h.GetSampleCount() || h.GetSampleSum() <= 0 {
			t.Fatalf("last bucket %d, count %d, sum %v", prev, h.GetSampleCount(), h.GetSampleSum())
		}
	})

	t.Run("downstream connections", func(t *testing.T) {
		bind := map[string]string{"bind": "bind/3000"}
		// The shared test client keeps its connections open; count from here.
		total0 := scrapeValue(t, tg.gw, "agentgateway_downstream_connections_total", bind)
		open0 := scrapeValue(t, tg.gw, "agentgateway_downstream_connections_open", bind)
		const n = 3
		var conns []net.Conn
		for range n {
			c, br := rawConn(t, tg.addr(3000))
			io.WriteString(c, "GET /api/conn HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			conns = append(conns, c)
		}
		if got := scrapeValue(t, tg.gw, "agentgateway_downstream_connections_total", bind); got != total0+n {
			t.Fatalf("connections total %v, want %v", got, total0+n)
		}
		if got := scrapeValue(t, tg.gw, "agentgateway_downstream_connections_open", bind); got != open0+n {
			t.Fatalf("connections open %v, want %v", got, open0+n)
		}
		for _, c := range conns {
			c.Close()
		}
		eventually(t, 5*time.Second, "the open gauge to drop", func() bool {
			return scrapeValue(t, tg.gw, "agentgateway_downstream_connections_open", bind) == open0
		})
		if got := scrapeValue(t, tg.gw, "agentgateway_downstream_connections_total", bind); got != total0+n {
			t.Fatalf("connections total %v after closing, want %v", got, total0+n)
		}
	})
}

// TestObservabilityMetricsSurviveReload: a reload keeping a route's name keeps
// counting into the same series.
func TestObservabilityMetricsSurviveReload(t *testing.T) {
	p := newProbe(t, "up")
	cfg := `
binds:
- port: 3000
  listeners:
  - routes:
    - name: kept
      backends: [{host: '${UP}'}]
`
	tg := startGateway(t, cfg, map[string]string{"UP": p.addr})
	labels := map[string]string{"route": "kept", "backend": p.addr, "method": "GET", "status": "200"}
	get(t, tg.url(3000)+"/")
	tg.apply(cfg, map[string]string{"UP": p.addr})
	get(t, tg.url(3000)+"/")
	if got := scrapeValue(t, tg.gw, "agentgateway_requests_total", labels); got != 2 {
		t.Fatalf("requests_total %v across a reload, want 2", got)
	}
}

// TestObservabilityConfigDumpAndUI: the config dump is JSON holding the binds
// and parses back to the same config; the UI page lists routes and backends,
// with names escaped.
func TestObservabilityConfigDumpAndUI(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
backends:
- name: billing-svc
  host: ${UP}
binds:
- port: 3000
  listeners:
  - name: public
    hostname: '*.example.test'
    routes:
    - name: orders
      hostnames: [shop.example.test]
      matches: [{path: {pathPrefix: /orders}, method: POST, headers: [{name: x-a, value: {regex: 'a+'}}]}]
      policies: {timeout: {requestTimeout: 2s}, retry: {attempts: 2, codes: [503]}}
      backends: [{host: '${UP}', weight: 2}, {backend: billing-svc, weight: 1}]
    - name: '<script>alert(1)</script>'
      backends: [{dynamic: {}}]
- port: 3001
  listeners:
  - routes:
    - matches:
      - {path: {exact: /x}}
      - {path: {regex: '/v[0-9]+/.*'}, headers: [{name: authorization, value: {exact: 'Bearer s3cret'}}], query: [{name: page, value: {exact: '2'}}]}
      - {headers: [{name: x-api-key, value: {regex: 'k3y.*'}}], query: [{name: token, value: {exact: 't0ken'}}]}
      backends: [{backend: billing-svc}]
`, map[string]string{"UP": p.addr})

	t.Run("config dump", func(t *testing.T) {
		dump, err := tg.gw.ConfigDump()
		if err != nil {
			t.Fatal(err)
		}
		var parsed struct {
			Binds []struct {
				Port      int `json:"port"`
				Listeners []struct {
					Name   string `json:"name"`
					Routes []struct {
						Name string `json:"name"`
					} `json:"routes"`
				} `json:"listeners"`
			} `json:"binds"`
			Backends []map[string]any `json:"backends"`
		}
		if err := json.Unmarshal(dump, &parsed); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, dump)
		}
		ports := map[int]bool{}
		for _, b := range parsed.Binds {
			ports[b.Port] = true
		}
		if len(parsed.Binds) != 2 || !ports[3000] || !ports[3001] {
			t.Fatalf("binds %+v", parsed.Binds)
		}
		if l := parsed.Binds[0].Listeners; len(l) != 1 || l[0].Name != "public" || len(l[0].Routes) != 2 || l[0].Routes[0].Name != "orders" {
			t.Fatalf("listeners %+v", l)
		}
		if len(parsed.Backends) != 1 || parsed.Backends[0]["name"] != "billing-svc" || parsed.Backends[0]["host"] != p.addr {
			t.Fatalf("backends %v", parsed.Backends)
		}
		// The dump is the config in file form: it parses back to itself.
		again, err := config.Parse(dump, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("the dump does not parse as a config: %v\n%s", err, dump)
		}
		redump, err := json.MarshalIndent(again, "", "  ")
		if err != nil || !bytes.Equal(redump, dump) {
			t.Fatalf("dump of the parsed dump differs (%v):\n%s\n---\n%s", err, dump, redump)
		}
	})

	t.Run("UI page", func(t *testing.T) {
		page, err := tg.gw.UIPage()
		if err != nil {
			t.Fatal(err)
		}
		html := string(page)
		for _, want := range []string{"Bind port 3000", "Bind port 3001", "public", "*.example.test", "orders",
			"shop.example.test", "POST", "/orders", p.addr, "weight 2", "backend billing-svc", "dynamic",
			"Named backends", "billing-svc", "&lt;script&gt;"} {
			if !strings.Contains(html, want) {
				t.Errorf("UI page lacks %q", want)
			}
		}
		if strings.Contains(html, "<script>") {
			t.Errorf("UI page does not escape a route name:\n%s", html)
		}
		// Each match shows the kind of its path match and its header and
		// query matches, values of credential names redacted as in
		// /config_dump (html/template writes + as &#43;).
		for _, want := range []string{
			"<code>POST</code> <code>prefix /orders</code> <code>header x-a: regex a&#43;</code>",
			"<code>exact /x</code>",
			"<code>regex /v[0-9]&#43;/.*</code> <code>header authorization: exact &lt;redacted&gt;</code> <code>query page: exact 2</code>",
			"<code>prefix /</code> <code>header x-api-key: regex &lt;redacted&gt;</code> <code>query token: exact &lt;redacted&gt;</code>",
		} {
			if !strings.Contains(html, want) {
				t.Errorf("UI page lacks the match %q", want)
			}
		}
		for _, secret := range []string{"s3cret", "k3y", "t0ken"} {
			if strings.Contains(html, secret) {
				t.Errorf("UI page shows the header or query value %q", secret)
			}
		}
	})

	t.Run("empty gateway", func(t *testing.T) {
		gw := New(Options{})
		dump, err := gw.ConfigDump()
		if err != nil || !json.Valid(dump) {
			t.Fatalf("dump %q: %v", dump, err)
		}
		page, err := gw.UIPage()
		if err != nil || !strings.Contains(string(page), "No binds configured") {
			t.Fatalf("page: %v\n%s", err, page)
		}
	})
}

// TestAccessRecordAfterResponse: a request's record (access line, metrics)
// is written once its response is out (deferRecord), however the
// connection goes on: another request, pipelined requests, the client
// closing, or Connection: close. Each request gets exactly one line, in
// order, with its own method and path.
func TestAccessRecordAfterResponse(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	var want []string
	send := func(c net.Conn, br *bufio.Reader, reqs ...string) {
		t.Helper()
		var wire strings.Builder
		for _, r := range reqs {
			wire.WriteString(r + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
			want = append(want, r)
		}
		io.WriteString(c, wire.String())
		for _, r := range reqs {
			if resp, _ := readResponse(t, br, strings.Fields(r)[0]); resp.StatusCode != 200 {
				t.Fatalf("%s: %d", r, resp.StatusCode)
			}
		}
	}
	c, br := rawConn(t, tg.addr(3000))
	send(c, br, "GET /one")
	send(c, br, "GET /two")                 // the next request on the connection
	send(c, br, "GET /three", "POST /four") // pipelined
	c.Close()                               // the client goes: /four's record is still written
	c, br = rawConn(t, tg.addr(3000))
	send(c, br, "GET /five")
	io.WriteString(c, "GET /six HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	want = append(want, "GET /six")
	readResponse(t, br, "GET")
	var got []string
	eventually(t, 5*time.Second, "six access lines", func() bool {
		got = got[:0]
		for _, e := range tg.accessLogs().FilterMessage("request").All() {
			f := e.ContextMap()
			if d, _ := f["duration"].(time.Duration); d <= 0 {
				t.Fatalf("duration %v", f["duration"])
			}
			got = append(got, f["method"].(string)+" "+f["path"].(string))
		}
		return len(got) >= len(want)
	})
	// Each connection's lines come in its requests' order; the two
	// connections' lines may interleave (the first's last record is
	// written when its goroutine sees the close, which may come after the
	// second connection's requests).
	first := map[string]bool{"GET /one": true, "GET /two": true, "GET /three": true, "POST /four": true}
	var inFirst, inSecond []string
	for _, l := range got {
		if first[l] {
			inFirst = append(inFirst, l)
		} else {
			inSecond = append(inSecond, l)
		}
	}
	if strings.Join(append(inFirst, inSecond...), ",") != strings.Join(want, ",") {
		t.Fatalf("access lines %q, want %q (each connection's in order)", got, want)
	}
	gets := scrapeValue(t, tg.gw, "agentgateway_requests_total", map[string]string{"method": "GET"})
	posts := scrapeValue(t, tg.gw, "agentgateway_requests_total", map[string]string{"method": "POST"})
	if gets != 5 || posts != 1 {
		t.Errorf("requests_total GET %v, POST %v, want 5 and 1", gets, posts)
	}
}
