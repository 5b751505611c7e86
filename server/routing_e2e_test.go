package server

import (
	"io"
	"net/http"
	"sync"
	"testing"
)

// probe is an upstream that answers with its label and records every request
// it receives, so a test can ask which upstream served a request and what it
// saw.
type probe struct {
	label string
	addr  string

	mu   sync.Mutex
	reqs []probeRequest
}

// probeRequest is one request as a probe received it.
type probeRequest struct {
	method, uri, host, body string
	header                  http.Header
}

// newProbe starts a probe upstream. Its answer carries X-Upstream: label, and
// the body "label host uri".
func newProbe(t *testing.T, label string) *probe {
	t.Helper()
	p := &probe{label: label}
	p.addr = upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, probeRequest{method: r.Method, uri: r.RequestURI, host: r.Host, body: string(b), header: r.Header.Clone()})
		p.mu.Unlock()
		w.Header().Set("X-Upstream", label)
		io.WriteString(w, label+" "+r.Host+" "+r.RequestURI)
	}))
	return p
}

func (p *probe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

// last returns the most recent request; the test fails when there is none.
func (p *probe) last(t *testing.T) probeRequest {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reqs) == 0 {
		t.Fatalf("upstream %s received no request", p.label)
	}
	return p.reqs[len(p.reqs)-1]
}

// probeVars starts one probe per label and returns them with the config
// variables naming their addresses (${label}).
func probeVars(t *testing.T, labels ...string) (map[string]*probe, map[string]string) {
	t.Helper()
	probes, vars := map[string]*probe{}, map[string]string{}
	for _, l := range labels {
		p := newProbe(t, l)
		probes[l], vars[l] = p, p.addr
	}
	return probes, vars
}

// routeCase is one request of a routing table and the upstream label that
// must answer it ("" for a gateway 404).
type routeCase struct {
	desc    string
	method  string
	target  string
	host    string
	headers []string
	want    string
}

func (rc routeCase) run(t *testing.T, base string) {
	t.Helper()
	method := rc.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, base+rc.target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rc.host != "" {
		req.Host = rc.host
	}
	for i := 0; i+1 < len(rc.headers); i += 2 {
		req.Header.Add(rc.headers[i], rc.headers[i+1])
	}
	resp, body := do(t, req)
	got := resp.Header.Get("X-Upstream")
	if rc.want == "" {
		if resp.StatusCode != http.StatusNotFound || got != "" {
			t.Fatalf("%s %s (Host %q): got %d from %q (%q), want the gateway's 404", method, rc.target, rc.host, resp.StatusCode, got, body)
		}
		return
	}
	if resp.StatusCode != http.StatusOK || got != rc.want {
		t.Fatalf("%s %s (Host %q): got %d from %q (%q), want upstream %q", method, rc.target, rc.host, resp.StatusCode, got, body, rc.want)
	}
}

// TestRoutingPathMethodHeaderQueryPrecedence checks Gateway API precedence:
// exact path over prefix, longer prefix first, then method, header count,
// query count and finally config order. Routes are listed in the config in
// the opposite order wherever that makes config order give the wrong answer.
func TestRoutingPathMethodHeaderQueryPrecedence(t *testing.T) {
	_, vars := probeVars(t, "prefixShort", "prefixLong", "exact", "anyMethod", "post",
		"plain", "hdrExact", "hdrRegex", "hdrTwo", "query", "queryRegex", "hdrVsQueryH", "hdrVsQueryQ",
		"first", "second", "regexPath", "pseudoMethod", "pseudoPath")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /p}}]
      backends: [{host: '${prefixShort}'}]
    - matches: [{path: {pathPrefix: /p/q}}]
      backends: [{host: '${prefixLong}'}]
    - matches: [{path: {exact: /p/q/r}}]
      backends: [{host: '${exact}'}]
    - matches: [{path: {pathPrefix: /m}}]
      backends: [{host: '${anyMethod}'}]
    - matches: [{path: {pathPrefix: /m}, method: POST}]
      backends: [{host: '${post}'}]
    - matches: [{path: {pathPrefix: /h}}]
      backends: [{host: '${plain}'}]
    - matches: [{path: {pathPrefix: /h}, headers: [{name: X-Env, value: {exact: prod}}]}]
      backends: [{host: '${hdrExact}'}]
    - matches: [{path: {pathPrefix: /h}, headers: [{name: x-env, value: {regex: 'stag(e|ing)'}}]}]
      backends: [{host: '${hdrRegex}'}]
    - matches: [{path: {pathPrefix: /h}, headers: [{name: x-env, value: {regex: '.*'}}, {name: x-team, value: {exact: core}}]}]
      backends: [{host: '${hdrTwo}'}]
    - matches: [{path: {pathPrefix: /q}}]
      backends: [{host: '${plain}'}]
    - matches: [{path: {pathPrefix: /q}, query: [{name: v, value: {exact: '2'}}]}]
      backends: [{host: '${query}'}]
    - matches: [{path: {pathPrefix: /q}, query: [{name: v, value: {regex: '[a-z]+'}}]}]
      backends: [{host: '${queryRegex}'}]
    - matches: [{path: {pathPrefix: /hq}, query: [{name: k, value: {exact: x}}]}]
      backends: [{host: '${hdrVsQueryQ}'}]
    - matches: [{path: {pathPrefix: /hq}, headers: [{name: k, value: {exact: x}}]}]
      backends: [{host: '${hdrVsQueryH}'}]
    - matches: [{path: {pathPrefix: /dup}}]
      backends: [{host: '${first}'}]
    - matches: [{path: {pathPrefix: /dup}}]
      backends: [{host: '${second}'}]
    - matches: [{path: {regex: '/re/[0-9]+'}}]
      backends: [{host: '${regexPath}'}]
    - matches: [{path: {pathPrefix: /ps}, headers: [{name: ':method', value: {exact: DELETE}}]}]
      backends: [{host: '${pseudoMethod}'}]
    - matches: [{path: {pathPrefix: /ps}, headers: [{name: ':path', value: {regex: '/ps\?id=[0-9]+'}}]}]
      backends: [{host: '${pseudoPath}'}]
`, vars)
	tests := []routeCase{
		{desc: "exact path beats every prefix", target: "/p/q/r", want: "exact"},
		{desc: "exact path ignores the query", target: "/p/q/r?x=1", want: "exact"},
		{desc: "below an exact path falls to the longest prefix", target: "/p/q/r/s", want: "prefixLong"},
		{desc: "longer prefix", target: "/p/q/z", want: "prefixLong"},
		{desc: "prefix itself", target: "/p/q", want: "prefixLong"},
		{desc: "prefix with trailing slash", target: "/p/q/", want: "prefixLong"},
		{desc: "prefix matches on segment boundaries only", target: "/p/qq", want: "prefixShort"},
		{desc: "shorter prefix", target: "/p", want: "prefixShort"},
		{desc: "method match beats config order", method: http.MethodPost, target: "/m/x", want: "post"},
		{desc: "other methods fall back", method: http.MethodPut, target: "/m/x", want: "anyMethod"},
		{desc: "methods compare case-sensitively", method: "post", target: "/m/x", want: "anyMethod"},
		{desc: "header exact match", target: "/h", headers: []string{"X-Env", "prod"}, want: "hdrExact"},
		{desc: "header names are case-insensitive", target: "/h", headers: []string{"x-ENV", "prod"}, want: "hdrExact"},
		{desc: "header exact values are case-sensitive", target: "/h", headers: []string{"X-Env", "Prod"}, want: "plain"},
		{desc: "header regex match", target: "/h", headers: []string{"X-Env", "staging"}, want: "hdrRegex"},
		{desc: "header regex must match the whole value", target: "/h", headers: []string{"X-Env", "stagingx"}, want: "plain"},
		{desc: "more header matches win", target: "/h", headers: []string{"X-Env", "prod", "X-Team", "core"}, want: "hdrTwo"},
		{desc: "every header of a match must hold", target: "/h", headers: []string{"X-Team", "core"}, want: "plain"},
		{desc: "no header falls back", target: "/h", want: "plain"},
		{desc: "query exact match", target: "/q?v=2", want: "query"},
		{desc: "query regex match", target: "/q?v=abc", want: "queryRegex"},
		{desc: "query regex must match the whole value", target: "/q?v=abc1", want: "plain"},
		{desc: "query names are case-sensitive", target: "/q?V=2", want: "plain"},
		{desc: "query values are decoded", target: "/q?v=%32", want: "query"},
		{desc: "header match beats query match", target: "/hq?k=x", headers: []string{"K", "x"}, want: "hdrVsQueryH"},
		{desc: "query match alone", target: "/hq?k=x", want: "hdrVsQueryQ"},
		{desc: "config order breaks ties", target: "/dup", want: "first"},
		{desc: "regex path", target: "/re/42", want: "regexPath"},
		{desc: "regex path must match the whole path", target: "/re/42/x", want: ""},
		{desc: "pseudo-header :method", method: http.MethodDelete, target: "/ps", want: "pseudoMethod"},
		{desc: "pseudo-header :path sees the query", target: "/ps?id=7", want: "pseudoPath"},
		{desc: "pseudo-header :path must match whole", target: "/ps?id=7x", want: ""},
		{desc: "nothing matches: 404", target: "/nowhere", want: ""},
		{desc: "root matches nothing", target: "/", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) { tc.run(t, tg.url(3000)) })
	}
}

// TestRoutingHostnames checks route hostnames (exact, "*." wildcards, the
// most specific first) and a listener's hostname choosing between two
// listeners of one bind.
func TestRoutingHostnames(t *testing.T) {
	_, vars := probeVars(t, "api", "wild", "deepWild", "noHost", "listenerA", "listenerWild", "listenerAny", "onlyA")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - hostnames: ['*.example.test']
      backends: [{host: '${wild}'}]
    - hostnames: ['*.deep.example.test']
      matches: [{path: {pathPrefix: /deep}}]
      backends: [{host: '${deepWild}'}]
    - hostnames: [api.example.test]
      matches: [{path: {pathPrefix: /api}}]
      backends: [{host: '${api}'}]
    - hostnames: [other.test]
      matches: [{path: {pathPrefix: /other}}]
      backends: [{host: '${api}'}]
    - matches: [{path: {pathPrefix: /any-host}}]
      backends: [{host: '${noHost}'}]
- port: 3001
  listeners:
  - name: catch-all
    routes:
    - backends: [{host: '${listenerAny}'}]
  - name: wild
    hostname: '*.b.test'
    routes:
    - backends: [{host: '${listenerWild}'}]
  - name: a
    hostname: a.test
    routes:
    - backends: [{host: '${listenerA}'}]
- port: 3002
  listeners:
  - hostname: a.test
    routes:
    - backends: [{host: '${onlyA}'}]
`, vars)
	tests := []struct {
		port int
		routeCase
	}{
		{3000, routeCase{desc: "exact hostname beats a wildcard", host: "api.example.test", target: "/api", want: "api"}},
		{3000, routeCase{desc: "Host port is ignored", host: "api.example.test:8443", target: "/api", want: "api"}},
		{3000, routeCase{desc: "Host case is ignored", host: "API.Example.TEST", target: "/api", want: "api"}},
		{3000, routeCase{desc: "exact hostname without a matching rule falls through to the wildcard", host: "api.example.test", target: "/", want: "wild"}},
		{3000, routeCase{desc: "wildcard", host: "www.example.test", target: "/", want: "wild"}},
		{3000, routeCase{desc: "wildcard spans labels", host: "a.b.example.test", target: "/", want: "wild"}},
		{3000, routeCase{desc: "longer wildcard first", host: "x.deep.example.test", target: "/deep/1", want: "deepWild"}},
		{3000, routeCase{desc: "longer wildcard without a matching rule falls through", host: "x.deep.example.test", target: "/", want: "wild"}},
		{3000, routeCase{desc: "hostname routes do not serve other hosts", host: "www.example.test", target: "/deep/1", want: "wild"}},
		{3000, routeCase{desc: "wildcard needs a label before the suffix", host: "example.test", target: "/", want: ""}},
		{3000, routeCase{desc: "route without hostnames serves any host", host: "example.test", target: "/any-host", want: "noHost"}},
		{3000, routeCase{desc: "hostname routes fall through to routes without hostnames", host: "other.test", target: "/any-host", want: "noHost"}},
		{3000, routeCase{desc: "unknown host: 404", host: "unknown.test", target: "/other", want: ""}},
		{3001, routeCase{desc: "listener exact hostname", host: "a.test", target: "/", want: "listenerA"}},
		{3001, routeCase{desc: "listener hostname ignores the port", host: "a.test:3001", target: "/", want: "listenerA"}},
		{3001, routeCase{desc: "listener wildcard hostname", host: "x.b.test", target: "/", want: "listenerWild"}},
		{3001, routeCase{desc: "listener without hostname takes the rest", host: "b.test", target: "/", want: "listenerAny"}},
		{3001, routeCase{desc: "listener without hostname, IP host", target: "/", want: "listenerAny"}},
		{3002, routeCase{desc: "no listener for the host: 404", host: "b.test", target: "/", want: ""}},
		{3002, routeCase{desc: "the only listener's host", host: "a.test", target: "/", want: "onlyA"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) { tc.run(t, tg.url(tc.port)) })
	}
}

// TestRoutingWeightedBackends: weight 0 never receives traffic, and each
// positive weight gets a share roughly in proportion.
func TestRoutingWeightedBackends(t *testing.T) {
	probes, vars := probeVars(t, "light", "heavy", "zero", "onlyZero")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /split}}]
      backends:
      - {host: '${light}', weight: 1}
      - {host: '${zero}', weight: 0}
      - {host: '${heavy}', weight: 3}
    - matches: [{path: {pathPrefix: /all-zero}}]
      backends:
      - {host: '${onlyZero}', weight: 0}
`, vars)
	const n = 200
	counts := map[string]int{}
	for range n {
		resp, _ := get(t, tg.url(3000)+"/split")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		counts[resp.Header.Get("X-Upstream")]++
	}
	// With weights 1:3 the chance that light gets nothing, or more than
	// heavy, in 200 draws is below 1e-12.
	if counts["zero"] != 0 || probes["zero"].count() != 0 {
		t.Errorf("weight 0 got traffic: %v", counts)
	}
	if counts["light"] == 0 || counts["heavy"] == 0 || counts["light"]+counts["heavy"] != n {
		t.Errorf("both positive weights must get traffic: %v", counts)
	}
	if counts["heavy"] <= counts["light"] {
		t.Errorf("weight 3 got no more than weight 1: %v", counts)
	}
	resp, _ := get(t, tg.url(3000)+"/all-zero")
	if resp.StatusCode < 500 || probes["onlyZero"].count() != 0 {
		t.Errorf("route whose only backend has weight 0: %d, upstream saw %d requests", resp.StatusCode, probes["onlyZero"].count())
	}
}

// TestRoutingNamedBackends: `backend: name` reaches the top-level backend,
// whose policies apply under the route backend's own (a policy the route
// backend sets replaces the named backend's policy of the same kind).
func TestRoutingNamedBackends(t *testing.T) {
	probes, vars := probeVars(t, "named")
	tg := startGateway(t, `
backends:
- name: svc
  host: ${named}
  policies:
    requestHeaderModifier: {set: {x-from-named: n}}
    responseHeaderModifier: {set: {x-named-resp: n}}
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /plain}}]
      backends: [{backend: svc}]
    - matches: [{path: {pathPrefix: /override}}]
      backends:
      - backend: svc
        policies:
          requestHeaderModifier: {set: {x-from-route: r}}
`, vars)
	tests := []struct {
		desc               string
		target             string
		wantReq, absentReq string
		wantRespFromNamed  bool
	}{
		{desc: "named backend policies apply", target: "/plain", wantReq: "X-From-Named", absentReq: "X-From-Route", wantRespFromNamed: true},
		{desc: "route backend policy replaces the same kind, keeps the others", target: "/override", wantReq: "X-From-Route", absentReq: "X-From-Named", wantRespFromNamed: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, _ := get(t, tg.url(3000)+tc.target)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Upstream") != "named" {
				t.Fatalf("got %d from %q", resp.StatusCode, resp.Header.Get("X-Upstream"))
			}
			got := probes["named"].last(t)
			if got.header.Get(tc.wantReq) == "" || got.header.Get(tc.absentReq) != "" {
				t.Errorf("upstream headers %v: want %s, not %s", got.header, tc.wantReq, tc.absentReq)
			}
			if (resp.Header.Get("X-Named-Resp") == "n") != tc.wantRespFromNamed {
				t.Errorf("response header X-Named-Resp = %q", resp.Header.Get("X-Named-Resp"))
			}
		})
	}
}

// TestRoutingDynamicBackend: `dynamic: {}` sends the request to the
// destination named by the Host header.
func TestRoutingDynamicBackend(t *testing.T) {
	probes, vars := probeVars(t, "one", "two")
	vars["closed"] = closedAddr(t)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{dynamic: {}}]
`, vars)
	tests := []struct {
		desc, host string
		status     int
		want       string
	}{
		{desc: "first destination", host: vars["one"], status: 200, want: "one"},
		{desc: "second destination", host: vars["two"], status: 200, want: "two"},
		{desc: "first again", host: vars["one"], status: 200, want: "one"},
		{desc: "refused destination", host: vars["closed"], status: http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := get(t, tg.url(3000)+"/dyn?x=1", "Host", tc.host)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Upstream") != tc.want {
				t.Fatalf("got %d from %q (%q)", resp.StatusCode, resp.Header.Get("X-Upstream"), body)
			}
			if tc.want == "" {
				return
			}
			if got := probes[tc.want].last(t); got.host != tc.host || got.uri != "/dyn?x=1" {
				t.Fatalf("upstream saw Host %q URI %q", got.host, got.uri)
			}
		})
	}
	if probes["one"].count() != 2 || probes["two"].count() != 1 {
		t.Fatalf("requests per destination: one %d, two %d", probes["one"].count(), probes["two"].count())
	}
}
