package router

import (
	"fmt"
	"testing"
)

const benchHost = "api.example.com"

// Tables of 100 routes, each serving benchHost plus a few neighbours so the
// host lookup is realistic.
func benchHosts() []string { return []string{benchHost, "*.example.com"} }

func exactRoutes100() []Route {
	routes := make([]Route, 100)
	for i := range routes {
		routes[i] = route(fmt.Sprint(i), benchHosts(), exact(fmt.Sprintf("/api/v1/resource%d/list", i)))
	}
	return routes
}

// prefixRoutes100: 25 services with 4 versions each, under /svcN/vM.
func prefixRoutes100() []Route {
	routes := make([]Route, 100)
	for i := range routes {
		routes[i] = route(fmt.Sprint(i), benchHosts(), prefix(fmt.Sprintf("/svc%d/v%d", i/4, i%4)))
	}
	return routes
}

// headerRoutes100: one prefix, told apart by a tenant header.
func headerRoutes100() []Route {
	routes := make([]Route, 100)
	for i := range routes {
		routes[i] = route(fmt.Sprint(i), benchHosts(),
			Match{Path: "/api", Headers: []HeaderMatch{hdr("X-Tenant", fmt.Sprintf("tenant-%d", i))}})
	}
	return routes
}

// mixedRoutes100: 40 exact, 40 prefix, 20 header-matched prefix routes.
func mixedRoutes100() []Route {
	var routes []Route
	for i := range 40 {
		routes = append(routes, route(fmt.Sprint("e", i), benchHosts(), exact(fmt.Sprintf("/static/file%d.js", i))))
	}
	for i := range 40 {
		routes = append(routes, route(fmt.Sprint("p", i), benchHosts(), prefix(fmt.Sprintf("/app/module%d", i))))
	}
	for i := range 20 {
		routes = append(routes, route(fmt.Sprint("h", i), benchHosts(),
			Match{Path: "/app", Headers: []HeaderMatch{hdr("X-Tenant", fmt.Sprint(i))}}))
	}
	return routes
}

type benchCase struct {
	routes func() []Route
	req    request
	want   string // "" for a miss
}

var benchCases = map[string]benchCase{
	"exact": {routes: exactRoutes100, want: "57",
		req: request{host: benchHost, path: "/api/v1/resource57/list"}},
	"prefix": {routes: prefixRoutes100, want: "70",
		req: request{host: benchHost, path: "/svc17/v2/users/42/orders"}},
	"headers": {routes: headerRoutes100, want: "73",
		req: request{host: benchHost, path: "/api/orders", headers: []string{"X-Request-Id", "abc", "X-Tenant", "tenant-73", "Accept", "*/*"}}},
	"miss": {routes: mixedRoutes100,
		req: request{host: benchHost, path: "/nothing/here/at/all", headers: []string{"X-Tenant", "7"}}},
	"wildcard": {routes: prefixRoutes100, want: "70",
		req: request{host: "web.example.com", path: "/svc17/v2/users/42"}},
	"regex": {routes: func() []Route {
		return []Route{route("re", nil, regex(`/users/[0-9]+/orders`)), route("other", nil, regex(`/x/.*`))}
	}, want: "re", req: request{host: benchHost, path: "/users/42/orders"}},
}

func benchMatch(b *testing.B, name string) {
	bc := benchCases[name]
	tbl, err := New(bc.routes())
	if err != nil {
		b.Fatal(err)
	}
	req := bc.req.build(b)
	host, path := []byte(bc.req.host), []byte(bc.req.path)
	v, ok := tbl.Match(req, host, path)
	if got, _ := v.(string); ok != (bc.want != "") || got != bc.want {
		b.Fatalf("Match = %v, %v; want %q", v, ok, bc.want)
	}
	b.ReportAllocs()
	for b.Loop() {
		tbl.Match(req, host, path)
	}
}

func BenchmarkMatchExact100(b *testing.B)    { benchMatch(b, "exact") }
func BenchmarkMatchPrefix100(b *testing.B)   { benchMatch(b, "prefix") }
func BenchmarkMatchHeaders100(b *testing.B)  { benchMatch(b, "headers") }
func BenchmarkMatchMiss100(b *testing.B)     { benchMatch(b, "miss") }
func BenchmarkMatchWildcard100(b *testing.B) { benchMatch(b, "wildcard") }
func BenchmarkMatchRegex(b *testing.B)       { benchMatch(b, "regex") }

func BenchmarkNew100(b *testing.B) {
	routes := mixedRoutes100()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(routes); err != nil {
			b.Fatal(err)
		}
	}
}
