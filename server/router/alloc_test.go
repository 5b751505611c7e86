package router

import (
	"slices"
	"testing"
)

// TestMatchDoesNotAllocate asserts the zero-allocation claim for every kind
// of lookup, including regex paths and values (regexp's Match on []byte
// reuses pooled machines).
func TestMatchDoesNotAllocate(t *testing.T) {
	cases := []struct {
		desc string
		bc   benchCase
	}{
		{desc: "method", bc: benchCase{want: "post", req: request{method: "POST", host: benchHost, path: "/x"},
			routes: func() []Route {
				return []Route{route("get", nil, Match{Method: "GET"}), route("post", nil, Match{Method: "POST"})}
			}}},
		{desc: "query", bc: benchCase{want: "q", req: request{host: benchHost, path: "/x", query: "a=1&v=2"},
			routes: func() []Route {
				return []Route{route("q", nil, Match{Query: []QueryMatch{qry("v", "2")}})}
			}}},
		{desc: "query dispatch", bc: benchCase{want: "v3", req: request{host: benchHost, path: "/x", query: "v=3"},
			routes: func() []Route {
				var rs []Route
				for _, v := range []string{"1", "2", "3", "4", "5"} {
					rs = append(rs, route("v"+v, nil, Match{Query: []QueryMatch{qry("v", v)}}))
				}
				return rs
			}}},
		{desc: "header regex", bc: benchCase{want: "h", req: request{host: benchHost, path: "/x", headers: []string{"x-v", "123"}},
			routes: func() []Route {
				return []Route{route("h", nil, Match{Headers: []HeaderMatch{hdrRe("X-V", "[0-9]+")}})}
			}}},
		{desc: "query regex", bc: benchCase{want: "q", req: request{host: benchHost, path: "/x", query: "v=abc"},
			routes: func() []Route {
				return []Route{route("q", nil, Match{Query: []QueryMatch{qryRe("v", "[a-c]+")}})}
			}}},
	}
	names := make([]string, 0, len(benchCases))
	for name := range benchCases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		cases = append(cases, struct {
			desc string
			bc   benchCase
		}{desc: name, bc: benchCases[name]})
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tbl, err := New(tc.bc.routes())
			if err != nil {
				t.Fatal(err)
			}
			req := tc.bc.req.build(t)
			host, path := []byte(tc.bc.req.host), []byte(tc.bc.req.path)
			v, ok := tbl.Match(req, host, path)
			if got, _ := v.(string); ok != (tc.bc.want != "") || got != tc.bc.want {
				t.Fatalf("Match = %v, %v; want %q", v, ok, tc.bc.want)
			}
			if n := testing.AllocsPerRun(1000, func() { tbl.Match(req, host, path) }); n != 0 {
				t.Errorf("Match allocates %v times per call, want 0", n)
			}
		})
	}
}
