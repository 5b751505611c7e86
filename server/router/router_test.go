package router

import (
	"bufio"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// request describes a test request; it is parsed from wire form so header
// names keep the case they were sent in.
type request struct {
	method  string   // "" is GET
	host    string   // as the caller hands it: lower case, no port
	path    string   // raw path handed to Match
	query   string   // raw query string, read back through QueryArgs
	headers []string // name, value, name, value...
}

func (r request) build(tb testing.TB) *fasthttp.Request {
	tb.Helper()
	method := r.method
	if method == "" {
		method = "GET"
	}
	var sb strings.Builder
	sb.WriteString(method + " /")
	if r.query != "" {
		sb.WriteString("?" + r.query)
	}
	sb.WriteString(" HTTP/1.1\r\nHost: test\r\n")
	for i := 0; i+1 < len(r.headers); i += 2 {
		sb.WriteString(r.headers[i] + ": " + r.headers[i+1] + "\r\n")
	}
	sb.WriteString("\r\n")
	req := &fasthttp.Request{}
	if err := req.Read(bufio.NewReader(strings.NewReader(sb.String()))); err != nil {
		tb.Fatalf("parse test request: %v", err)
	}
	return req
}

func prefix(p string) Match { return Match{PathKind: PathPrefix, Path: p} }
func exact(p string) Match  { return Match{PathKind: PathExact, Path: p} }
func regex(p string) Match {
	return Match{PathKind: PathRegex, PathRegex: regexp.MustCompile(p)}
}

func hdr(name, value string) HeaderMatch {
	return HeaderMatch{Name: name, Value: ValueMatch{Exact: value}}
}

func hdrRe(name, pattern string) HeaderMatch {
	return HeaderMatch{Name: name, Value: ValueMatch{Regex: regexp.MustCompile(pattern)}}
}

func qry(name, value string) QueryMatch {
	return QueryMatch{Name: name, Value: ValueMatch{Exact: value}}
}

func qryRe(name, pattern string) QueryMatch {
	return QueryMatch{Name: name, Value: ValueMatch{Regex: regexp.MustCompile(pattern)}}
}

// route builds a Route whose Value is its name.
func route(name string, hosts []string, matches ...Match) Route {
	return Route{Hostnames: hosts, Matches: matches, Value: name}
}

type matchCase struct {
	desc   string
	routes []Route
	req    request
	want   string // route name; "" for no match
}

// runMatchCases checks every case against the Table and, so the reference
// used by FuzzMatch is itself pinned down, against referenceMatch.
func runMatchCases(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tbl, err := New(tc.routes)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			req := tc.req.build(t)
			check := func(who string, v any, ok bool) {
				t.Helper()
				got := ""
				if ok {
					got = v.(string)
				}
				if got != tc.want {
					t.Errorf("%s: got route %q, want %q", who, got, tc.want)
				}
			}
			v, ok := tbl.Match(req, []byte(tc.req.host), []byte(tc.req.path))
			check("Table", v, ok)
			v, ok = referenceMatch(tc.routes, req, []byte(tc.req.host), []byte(tc.req.path))
			check("reference", v, ok)
		})
	}
}

func TestMatchPath(t *testing.T) {
	runMatchCases(t, []matchCase{
		{desc: "prefix matches itself", routes: []Route{route("A", nil, prefix("/foo"))},
			req: request{path: "/foo"}, want: "A"},
		{desc: "prefix matches with trailing slash", routes: []Route{route("A", nil, prefix("/foo"))},
			req: request{path: "/foo/"}, want: "A"},
		{desc: "prefix matches below", routes: []Route{route("A", nil, prefix("/foo"))},
			req: request{path: "/foo/bar/baz"}, want: "A"},
		{desc: "prefix respects segment boundary", routes: []Route{route("A", nil, prefix("/foo"))},
			req: request{path: "/foobar"}},
		{desc: "prefix shorter path", routes: []Route{route("A", nil, prefix("/foo/bar"))},
			req: request{path: "/foo"}},
		{desc: "prefix trailing slash ignored for boundary", routes: []Route{route("A", nil, prefix("/foo/"))},
			req: request{path: "/foo"}, want: "A"},
		{desc: "prefix trailing slash still matches below", routes: []Route{route("A", nil, prefix("/foo/"))},
			req: request{path: "/foo/x"}, want: "A"},
		{desc: "prefix trailing slash not a boundary bypass", routes: []Route{route("A", nil, prefix("/foo/"))},
			req: request{path: "/foox"}},
		{desc: "prefix with double slash in request", routes: []Route{route("A", nil, prefix("/foo"))},
			req: request{path: "/foo//bar"}, want: "A"},
		{desc: "prefix is case-sensitive", routes: []Route{route("A", nil, prefix("/foo"))},
			req: request{path: "/FOO"}},
		{desc: "slash matches everything", routes: []Route{route("A", nil, prefix("/"))},
			req: request{path: "/any/thing"}, want: "A"},
		{desc: "slash does not match a path without leading slash", routes: []Route{route("A", nil, prefix("/"))},
			req: request{path: "*"}},
		{desc: "no prefix matches a path without leading slash", routes: []Route{route("A", nil, prefix("/a"))},
			req: request{path: "a"}},
		{desc: "regex can match a path without leading slash", routes: []Route{route("P", nil, prefix("/")), route("A", nil, Match{PathKind: PathRegex, Path: `\*`})},
			req: request{path: "*"}, want: "A"},
		{desc: "slash matches an empty path", routes: []Route{route("A", nil, prefix("/"))},
			req: request{path: ""}, want: "A"},
		{desc: "empty prefix means slash", routes: []Route{route("A", nil, Match{})},
			req: request{path: "/x"}, want: "A"},
		{desc: "no matches means slash", routes: []Route{route("A", nil)},
			req: request{path: "/x/y"}, want: "A"},
		{desc: "exact matches equal path", routes: []Route{route("A", nil, exact("/foo"))},
			req: request{path: "/foo"}, want: "A"},
		{desc: "exact rejects trailing slash", routes: []Route{route("A", nil, exact("/foo"))},
			req: request{path: "/foo/"}},
		{desc: "exact rejects longer path", routes: []Route{route("A", nil, exact("/foo"))},
			req: request{path: "/foo/bar"}},
		{desc: "regex must match whole path", routes: []Route{route("A", nil, regex("/v[0-9]+"))},
			req: request{path: "/v12/x"}},
		{desc: "regex whole path", routes: []Route{route("A", nil, regex("/v[0-9]+/.*"))},
			req: request{path: "/v12/x"}, want: "A"},
		{desc: "regex not a substring search", routes: []Route{route("A", nil, regex("v1"))},
			req: request{path: "/v1"}},
		{desc: "regex alternation full match", routes: []Route{route("A", nil, regex("/a|/ab"))},
			req: request{path: "/ab"}, want: "A"},
		{desc: "regex from Path string", routes: []Route{{Value: "A", Matches: []Match{{PathKind: PathRegex, Path: "/x+"}}}},
			req: request{path: "/xxx"}, want: "A"},
		{desc: "percent-encoded exact untouched", routes: []Route{route("A", nil, exact("/a%2Fb"))},
			req: request{path: "/a%2Fb"}, want: "A"},
		{desc: "percent-encoded not decoded for exact", routes: []Route{route("A", nil, exact("/a/b"))},
			req: request{path: "/a%2Fb"}},
		{desc: "percent-encoded slash is no segment boundary", routes: []Route{route("A", nil, prefix("/a"))},
			req: request{path: "/a%2Fb"}},
		{desc: "percent-encoded prefix untouched", routes: []Route{route("A", nil, prefix("/a%20b"))},
			req: request{path: "/a%20b/c"}, want: "A"},
		{desc: "matches are ORed", routes: []Route{route("A", nil, exact("/x"), prefix("/y"))},
			req: request{path: "/y/1"}, want: "A"},
		{desc: "no route matches", routes: []Route{route("A", nil, prefix("/x"), exact("/y"))},
			req: request{path: "/z"}},
	})
}

func TestMatchConditions(t *testing.T) {
	get := Match{Path: "/", Method: "GET"}
	runMatchCases(t, []matchCase{
		{desc: "method matches", routes: []Route{route("A", nil, get)},
			req: request{method: "GET", path: "/"}, want: "A"},
		{desc: "method mismatch", routes: []Route{route("A", nil, get)},
			req: request{method: "POST", path: "/"}},
		{desc: "method is case-sensitive", routes: []Route{route("A", nil, get)},
			req: request{method: "get", path: "/"}},
		{desc: "header exact", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-Tenant", "a")}})},
			req: request{path: "/", headers: []string{"X-Tenant", "a"}}, want: "A"},
		{desc: "header name case-insensitive on the wire", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-Tenant", "a")}})},
			req: request{path: "/", headers: []string{"x-tENANT", "a"}}, want: "A"},
		{desc: "header name case-insensitive in config", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("x-TENANT", "a")}})},
			req: request{path: "/", headers: []string{"X-Tenant", "a"}}, want: "A"},
		{desc: "header value is case-sensitive", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-Tenant", "a")}})},
			req: request{path: "/", headers: []string{"X-Tenant", "A"}}},
		{desc: "header absent", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-Tenant", "a")}})},
			req: request{path: "/"}},
		{desc: "absent header does not match empty exact", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-E", "")}})},
			req: request{path: "/"}},
		{desc: "empty header matches empty exact", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-E", "")}})},
			req: request{path: "/", headers: []string{"X-E", ""}}, want: "A"},
		{desc: "absent header does not match permissive regex", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdrRe("X-E", ".*")}})},
			req: request{path: "/"}},
		{desc: "header regex full match", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdrRe("X-V", "[0-9]+")}})},
			req: request{path: "/", headers: []string{"X-V", "123"}}, want: "A"},
		{desc: "header regex partial is no match", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdrRe("X-V", "[0-9]+")}})},
			req: request{path: "/", headers: []string{"X-V", "123a"}}},
		{desc: "repeated header matches first value", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-V", "1")}})},
			req: request{path: "/", headers: []string{"X-V", "1", "x-v", "2"}}, want: "A"},
		{desc: "repeated header ignores later value", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-V", "2")}})},
			req: request{path: "/", headers: []string{"X-V", "1", "x-v", "2"}}},
		{desc: "special header Host", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("host", "test")}})},
			req: request{path: "/"}, want: "A"},
		{desc: "duplicate header condition: first counts", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr("X-V", "1"), hdr("x-v", "2")}})},
			req: request{path: "/", headers: []string{"X-V", "1"}}, want: "A"},
		{desc: "pseudo-header :method", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr(":method", "POST")}})},
			req: request{method: "POST", path: "/"}, want: "A"},
		{desc: "pseudo-header :method mismatch", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr(":method", "POST")}})},
			req: request{path: "/"}},
		{desc: "pseudo-header :authority is the Host header", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr(":Authority", "test")}})},
			req: request{path: "/"}, want: "A"},
		{desc: "pseudo-header :path holds the query", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdrRe(":path", `/\?v=[0-9]+`)}})},
			req: request{path: "/", query: "v=12"}, want: "A"},
		{desc: "pseudo-header :scheme", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr(":scheme", "http")}})},
			req: request{path: "/"}, want: "A"},
		{desc: "pseudo-header is not a header of that name", routes: []Route{route("A", nil, Match{Headers: []HeaderMatch{hdr(":method", "x")}})},
			req: request{path: "/", headers: []string{"method", "x"}}},
		{desc: "query exact", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qry("v", "1")}})},
			req: request{path: "/", query: "a=b&v=1"}, want: "A"},
		{desc: "query name case-sensitive", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qry("v", "1")}})},
			req: request{path: "/", query: "V=1"}},
		{desc: "query value decoded", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qry("v", "a b")}})},
			req: request{path: "/", query: "v=a%20b"}, want: "A"},
		{desc: "repeated query matches first value", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qry("v", "1")}})},
			req: request{path: "/", query: "v=1&v=2"}, want: "A"},
		{desc: "repeated query ignores later value", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qry("v", "2")}})},
			req: request{path: "/", query: "v=1&v=2"}},
		{desc: "query present without value matches empty", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qry("flag", "")}})},
			req: request{path: "/", query: "flag"}, want: "A"},
		{desc: "query absent does not match empty", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qry("flag", "")}})},
			req: request{path: "/", query: "other"}},
		{desc: "query regex full match", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qryRe("v", "[a-c]+")}})},
			req: request{path: "/", query: "v=abc"}, want: "A"},
		{desc: "query regex partial is no match", routes: []Route{route("A", nil, Match{Query: []QueryMatch{qryRe("v", "[a-c]+")}})},
			req: request{path: "/", query: "v=abcd"}},
		{desc: "fields are ANDed: all hold", routes: []Route{route("A", nil, Match{Path: "/api", Method: "POST",
			Headers: []HeaderMatch{hdr("X-A", "1")}, Query: []QueryMatch{qry("q", "2")}})},
			req: request{method: "POST", path: "/api/x", headers: []string{"X-A", "1"}, query: "q=2"}, want: "A"},
		{desc: "fields are ANDed: one fails", routes: []Route{route("A", nil, Match{Path: "/api", Method: "POST",
			Headers: []HeaderMatch{hdr("X-A", "1")}, Query: []QueryMatch{qry("q", "2")}})},
			req: request{method: "POST", path: "/api/x", headers: []string{"X-A", "1"}, query: "q=3"}},
	})
}

func TestMatchPrecedence(t *testing.T) {
	runMatchCases(t, []matchCase{
		{desc: "exact beats prefix", routes: []Route{route("P", nil, prefix("/foo")), route("E", nil, exact("/foo"))},
			req: request{path: "/foo"}, want: "E"},
		{desc: "exact beats longer prefix", routes: []Route{route("P", nil, prefix("/foo/bar")), route("E", nil, exact("/foo/bar"))},
			req: request{path: "/foo/bar"}, want: "E"},
		{desc: "exact beats prefix with method and headers", routes: []Route{
			route("P", nil, Match{Path: "/foo", Method: "GET", Headers: []HeaderMatch{hdr("X-A", "1")}}),
			route("E", nil, exact("/foo"))},
			req: request{path: "/foo", headers: []string{"X-A", "1"}}, want: "E"},
		{desc: "longest prefix wins", routes: []Route{route("S", nil, prefix("/a")), route("L", nil, prefix("/a/b")), route("R", nil, prefix("/"))},
			req: request{path: "/a/b/c"}, want: "L"},
		{desc: "longest prefix falls back to shorter", routes: []Route{route("S", nil, prefix("/a")), route("L", nil, prefix("/a/b"))},
			req: request{path: "/a/c"}, want: "S"},
		{desc: "longer prefix with unmet header falls back", routes: []Route{
			route("S", nil, prefix("/a")), route("L", nil, Match{Path: "/a/b", Headers: []HeaderMatch{hdr("X-A", "1")}})},
			req: request{path: "/a/b"}, want: "S"},
		{desc: "raw prefix length counts trailing slash", routes: []Route{route("short", nil, prefix("/foo")), route("slash", nil, prefix("/foo/"))},
			req: request{path: "/foo/x"}, want: "slash"},
		{desc: "shallower prefix with more slashes outranks deeper", routes: []Route{route("deep", nil, prefix("/a/b")), route("slashes", nil, prefix("/a///"))},
			req: request{path: "/a/b"}, want: "slashes"},
		{desc: "equal length: method breaks tie across depths", routes: []Route{
			route("deep", nil, prefix("/a/b")), route("slashes", nil, Match{Path: "/a//", Method: "GET"})},
			req: request{path: "/a/b"}, want: "slashes"},
		{desc: "prefix beats regex", routes: []Route{route("R", nil, regex("/foo.*")), route("P", nil, prefix("/"))},
			req: request{path: "/foo"}, want: "P"},
		{desc: "longer regex first", routes: []Route{route("short", nil, regex("/.*")), route("long", nil, regex("/foo/.*"))},
			req: request{path: "/foo/x"}, want: "long"},
		{desc: "method beats no method", routes: []Route{
			route("plain", nil, prefix("/a")), route("method", nil, Match{Path: "/a", Method: "GET"})},
			req: request{path: "/a"}, want: "method"},
		{desc: "method beats more headers", routes: []Route{
			route("headers", nil, Match{Path: "/a", Headers: []HeaderMatch{hdr("X-A", "1"), hdr("X-B", "2")}}),
			route("method", nil, Match{Path: "/a", Method: "GET"})},
			req: request{path: "/a", headers: []string{"X-A", "1", "X-B", "2"}}, want: "method"},
		{desc: "more headers win", routes: []Route{
			route("one", nil, Match{Path: "/a", Headers: []HeaderMatch{hdr("X-A", "1")}}),
			route("two", nil, Match{Path: "/a", Headers: []HeaderMatch{hdr("X-A", "1"), hdr("X-B", "2")}})},
			req: request{path: "/a", headers: []string{"X-A", "1", "X-B", "2"}}, want: "two"},
		{desc: "duplicate header conditions do not count twice", routes: []Route{
			route("dup", nil, Match{Path: "/a", Headers: []HeaderMatch{hdr("X-A", "1"), hdr("x-a", "1")}}),
			route("two", nil, Match{Path: "/a", Headers: []HeaderMatch{hdr("X-A", "1"), hdr("X-B", "2")}})},
			req: request{path: "/a", headers: []string{"X-A", "1", "X-B", "2"}}, want: "two"},
		{desc: "headers beat query", routes: []Route{
			route("query", nil, Match{Path: "/a", Query: []QueryMatch{qry("q", "1"), qry("r", "2")}}),
			route("header", nil, Match{Path: "/a", Headers: []HeaderMatch{hdr("X-A", "1")}})},
			req: request{path: "/a", query: "q=1&r=2", headers: []string{"X-A", "1"}}, want: "header"},
		{desc: "more query params win", routes: []Route{
			route("one", nil, Match{Path: "/a", Query: []QueryMatch{qry("q", "1")}}),
			route("two", nil, Match{Path: "/a", Query: []QueryMatch{qry("q", "1"), qry("r", "2")}})},
			req: request{path: "/a", query: "q=1&r=2"}, want: "two"},
		{desc: "same path in two routes: first in config order", routes: []Route{route("first", nil, exact("/a")), route("second", nil, exact("/a"))},
			req: request{path: "/a"}, want: "first"},
		{desc: "same prefix in two routes: first in config order", routes: []Route{route("first", nil, prefix("/a")), route("second", nil, prefix("/a"))},
			req: request{path: "/a/b"}, want: "first"},
		{desc: "same regex in two routes: first in config order", routes: []Route{route("first", nil, regex("/a.*")), route("second", nil, regex("/a.*"))},
			req: request{path: "/ab"}, want: "first"},
		{desc: "precedence beats config order", routes: []Route{route("first", nil, prefix("/")), route("second", nil, prefix("/a"))},
			req: request{path: "/a"}, want: "second"},
		{desc: "within a route the better match counts", routes: []Route{
			route("A", nil, prefix("/")), route("B", nil, prefix("/x"), exact("/x/y"))},
			req: request{path: "/x/y"}, want: "B"},
	})
}

func TestMatchHostnames(t *testing.T) {
	ex := []string{"api.example.com"}
	wild := []string{"*.example.com"}
	runMatchCases(t, []matchCase{
		{desc: "exact hostname", routes: []Route{route("A", ex)},
			req: request{host: "api.example.com", path: "/"}, want: "A"},
		{desc: "exact hostname other host", routes: []Route{route("A", ex)},
			req: request{host: "web.example.com", path: "/"}},
		{desc: "upper-case pattern, lower-case host", routes: []Route{route("A", []string{"API.Example.COM"})},
			req: request{host: "api.example.com", path: "/"}, want: "A"},
		{desc: "wildcard one label", routes: []Route{route("A", wild)},
			req: request{host: "a.example.com", path: "/"}, want: "A"},
		{desc: "wildcard several labels", routes: []Route{route("A", wild)},
			req: request{host: "a.b.example.com", path: "/"}, want: "A"},
		{desc: "wildcard does not match apex", routes: []Route{route("A", wild)},
			req: request{host: "example.com", path: "/"}},
		{desc: "wildcard needs a label", routes: []Route{route("A", wild)},
			req: request{host: ".example.com", path: "/"}},
		{desc: "wildcard is no substring match", routes: []Route{route("A", wild)},
			req: request{host: "aexample.com", path: "/"}},
		{desc: "star matches all", routes: []Route{route("A", []string{"*"})},
			req: request{host: "anything.at.all", path: "/"}, want: "A"},
		{desc: "star matches empty host", routes: []Route{route("A", []string{"*"})},
			req: request{host: "", path: "/"}, want: "A"},
		{desc: "no hostnames matches any host", routes: []Route{route("A", nil)},
			req: request{host: "x.y", path: "/"}, want: "A"},
		{desc: "exact beats wildcard", routes: []Route{route("W", wild), route("E", ex)},
			req: request{host: "api.example.com", path: "/"}, want: "E"},
		{desc: "exact hostname beats better path on wildcard", routes: []Route{route("W", wild, exact("/x")), route("E", ex, prefix("/"))},
			req: request{host: "api.example.com", path: "/x"}, want: "E"},
		{desc: "longer wildcard suffix wins", routes: []Route{route("short", []string{"*.com"}), route("long", wild)},
			req: request{host: "a.example.com", path: "/"}, want: "long"},
		{desc: "wildcard beats star", routes: []Route{route("star", []string{"*"}), route("W", wild)},
			req: request{host: "a.example.com", path: "/"}, want: "W"},
		{desc: "star beats no hostnames", routes: []Route{route("none", nil), route("star", []string{"*"})},
			req: request{host: "a.example.com", path: "/"}, want: "star"},
		{desc: "wildcard beats no hostnames", routes: []Route{route("none", nil, exact("/")), route("W", wild)},
			req: request{host: "a.example.com", path: "/"}, want: "W"},
		{desc: "falls through to wildcard when exact has no matching rule", routes: []Route{
			route("E", ex, prefix("/a")), route("W", wild, prefix("/b"))},
			req: request{host: "api.example.com", path: "/b"}, want: "W"},
		{desc: "falls through to no hostnames", routes: []Route{route("E", ex, prefix("/a")), route("none", nil, prefix("/b"))},
			req: request{host: "api.example.com", path: "/b/c"}, want: "none"},
		{desc: "falls through across wildcards", routes: []Route{
			route("long", []string{"*.a.example.com"}, exact("/x")), route("short", wild, exact("/y"))},
			req: request{host: "b.a.example.com", path: "/y"}, want: "short"},
		{desc: "route with several hostnames", routes: []Route{route("A", []string{"a.com", "*.b.com"})},
			req: request{host: "x.b.com", path: "/"}, want: "A"},
		{desc: "same hostname twice in one route", routes: []Route{route("A", []string{"a.com", "A.com"}, exact("/x"))},
			req: request{host: "a.com", path: "/x"}, want: "A"},
		{desc: "route listed under exact and wildcard uses exact bucket first", routes: []Route{
			route("both", []string{"*.example.com", "api.example.com"}, prefix("/a")),
			route("exact", ex, exact("/a/b"))},
			req: request{host: "api.example.com", path: "/a/b"}, want: "exact"},
	})
}

func TestMatchHostname(t *testing.T) {
	cases := []struct {
		desc    string
		pattern string
		host    string
		want    bool
	}{
		{desc: "exact", pattern: "example.com", host: "example.com", want: true},
		{desc: "exact case-insensitive", pattern: "Example.COM", host: "eXample.com", want: true},
		{desc: "exact mismatch", pattern: "example.com", host: "example.org"},
		{desc: "exact is not suffix", pattern: "example.com", host: "a.example.com"},
		{desc: "wildcard one label", pattern: "*.example.com", host: "a.example.com", want: true},
		{desc: "wildcard several labels", pattern: "*.example.com", host: "a.b.example.com", want: true},
		{desc: "wildcard case-insensitive", pattern: "*.EXAMPLE.com", host: "A.Example.COM", want: true},
		{desc: "wildcard not apex", pattern: "*.example.com", host: "example.com"},
		{desc: "wildcard needs a label", pattern: "*.example.com", host: ".example.com"},
		{desc: "wildcard needs a dot", pattern: "*.example.com", host: "aexample.com"},
		{desc: "wildcard other domain", pattern: "*.example.com", host: "a.example.org"},
		{desc: "star", pattern: "*", host: "whatever", want: true},
		{desc: "star empty host", pattern: "*", host: "", want: true},
		{desc: "empty host", pattern: "example.com", host: ""},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := MatchHostname(tc.pattern, []byte(tc.host)); got != tc.want {
				t.Errorf("MatchHostname(%q, %q) = %v, want %v", tc.pattern, tc.host, got, tc.want)
			}
			if got := refHostMatches(tc.pattern, tc.host); got != tc.want {
				t.Errorf("reference(%q, %q) = %v, want %v", tc.pattern, tc.host, got, tc.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		desc   string
		routes []Route
		want   string // substring of the error
	}{
		{desc: "empty hostname", routes: []Route{{Hostnames: []string{""}}}, want: `route 0 hostnames[0]: hostname "": empty hostname`},
		{desc: "wildcard not first", routes: []Route{{Hostnames: []string{"a.*.com"}}}, want: "'*'"},
		{desc: "wildcard without dot", routes: []Route{{Hostnames: []string{"*example.com"}}}, want: "'*'"},
		{desc: "bare wildcard prefix", routes: []Route{{Hostnames: []string{"*."}}}, want: "empty hostname"},
		{desc: "empty label", routes: []Route{{Hostnames: []string{"a..com"}}}, want: "empty label"},
		{desc: "two dots at the end", routes: []Route{{Hostnames: []string{"a.com.."}}}, want: "empty label"},
		{desc: "port in hostname", routes: []Route{{Hostnames: []string{"a.com:80"}}}, want: "invalid character"},
		{desc: "hyphen at label edge", routes: []Route{{Hostnames: []string{"-a.com"}}}, want: "'-'"},
		{desc: "label too long", routes: []Route{{Hostnames: []string{strings.Repeat("a", 64) + ".com"}}}, want: "63"},
		{desc: "name too long", routes: []Route{{Hostnames: []string{strings.Repeat("a.", 127) + "com"}}}, want: "253"},
		{desc: "second route reported", routes: []Route{{}, {Hostnames: []string{"a b"}}}, want: "route 1 hostname"},
		{desc: "prefix without slash", routes: []Route{{Matches: []Match{prefix("foo")}}}, want: `route 0 matches[0]: PathPrefix path "foo"`},
		{desc: "exact empty", routes: []Route{{Matches: []Match{exact("")}}}, want: "does not start with '/'"},
		{desc: "exact with regex", routes: []Route{{Matches: []Match{{PathKind: PathExact, Path: "/", PathRegex: regexp.MustCompile("x")}}}}, want: "PathRegex set"},
		{desc: "regex without pattern", routes: []Route{{Matches: []Match{{PathKind: PathRegex}}}}, want: "without a pattern"},
		{desc: "regex string invalid", routes: []Route{{Matches: []Match{{}, {PathKind: PathRegex, Path: "a)|(b"}}}}, want: "route 0 matches[1]: path regex"},
		{desc: "unknown path kind", routes: []Route{{Matches: []Match{{PathKind: 9, Path: "/"}}}}, want: "unknown path kind"},
		{desc: "bad method", routes: []Route{{Matches: []Match{{Method: "GE T"}}}}, want: "method"},
		{desc: "bad header name", routes: []Route{{Matches: []Match{{Headers: []HeaderMatch{hdr("X A", "1")}}}}}, want: "header name"},
		{desc: "empty header name", routes: []Route{{Matches: []Match{{Headers: []HeaderMatch{hdr("", "1")}}}}}, want: "header name"},
		{desc: "response pseudo header name", routes: []Route{{Matches: []Match{{Headers: []HeaderMatch{hdr(":status", "200")}}}}}, want: "header name"},
		{desc: "header exact and regex", routes: []Route{{Matches: []Match{{Headers: []HeaderMatch{
			{Name: "X-A", Value: ValueMatch{Exact: "1", Regex: regexp.MustCompile("1")}}}}}}}, want: "both Exact and Regex"},
		{desc: "empty query name", routes: []Route{{Matches: []Match{{Query: []QueryMatch{qry("", "1")}}}}}, want: "empty query parameter name"},
		{desc: "query exact and regex", routes: []Route{{Matches: []Match{{Query: []QueryMatch{
			{Name: "q", Value: ValueMatch{Exact: "1", Regex: regexp.MustCompile("1")}}}}}}}, want: "both Exact and Regex"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tbl, err := New(tc.routes)
			if err == nil {
				t.Fatalf("New succeeded (%d routes), want error containing %q", tbl.Len(), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "router: ") {
				t.Errorf("error %q, want it to start with \"router: \" and contain %q", err, tc.want)
			}
		})
	}
}

func TestEmptyTable(t *testing.T) {
	cases := []struct {
		desc string
		tbl  func() *Table
	}{
		{desc: "New(nil)", tbl: func() *Table {
			tbl, err := New(nil)
			if err != nil {
				t.Fatal(err)
			}
			return tbl
		}},
		{desc: "nil table", tbl: func() *Table { return nil }},
	}
	req := request{path: "/"}.build(t)
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tbl := tc.tbl()
			if n := tbl.Len(); n != 0 {
				t.Errorf("Len() = %d, want 0", n)
			}
			if v, ok := tbl.Match(req, []byte("a.com"), []byte("/")); ok {
				t.Errorf("Match() = %v, true; want no match", v)
			}
		})
	}
}

func TestLen(t *testing.T) {
	tbl, err := New([]Route{route("A", nil), route("B", []string{"a.com", "*.b.com"}, exact("/x"), prefix("/y"))})
	if err != nil {
		t.Fatal(err)
	}
	if n := tbl.Len(); n != 2 {
		t.Errorf("Len() = %d, want 2", n)
	}
}

func TestMatchNilRequest(t *testing.T) {
	tbl, err := New([]Route{
		route("method", nil, Match{Path: "/", Method: "GET"}),
		route("plain", nil, prefix("/")),
	})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := tbl.Match(nil, nil, []byte("/x"))
	if !ok || v != "plain" {
		t.Errorf("Match(nil request) = %v, %v; want plain, true", v, ok)
	}
}

// TestDispatch covers rule runs folded into value-keyed maps: the first
// matching rule in precedence order must still win, including rules that
// share a value, rules past the run, and values the run doesn't know.
func TestDispatch(t *testing.T) {
	var routes []Route
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		routes = append(routes, route("tenant-"+v, nil,
			Match{Path: "/", Headers: []HeaderMatch{hdr("X-Tenant", v), hdrRe("X-Env", "prod|dev")}}))
	}
	routes = append(routes,
		route("tenant-c-any-env", nil, Match{Path: "/", Headers: []HeaderMatch{hdr("X-Tenant", "c")}}),
		route("tenant-c-again", nil, Match{Path: "/", Headers: []HeaderMatch{hdr("X-Tenant", "c"), hdr("X-Env", "prod")}}),
		route("fallback", nil, prefix("/")),
	)
	for i := range 6 {
		routes = append(routes, route("method-"+string(rune('0'+i)), nil,
			Match{Path: "/m", Method: []string{"GET", "POST", "PUT", "PATCH", "DELETE", "GET"}[i]}))
	}
	for i := range 5 {
		routes = append(routes, route("query-"+string(rune('0'+i)), nil,
			Match{Path: "/q", Query: []QueryMatch{qry("v", string(rune('0'+i)))}}))
	}
	runMatchCases(t, []matchCase{
		{desc: "value in run", routes: routes, req: request{path: "/", headers: []string{"X-Tenant", "b", "X-Env", "dev"}}, want: "tenant-b"},
		{desc: "value in run, other condition fails", routes: routes, req: request{path: "/", headers: []string{"X-Tenant", "b", "X-Env", "qa"}}, want: "fallback"},
		{desc: "shared value keeps order", routes: routes, req: request{path: "/", headers: []string{"X-Tenant", "c", "X-Env", "prod"}}, want: "tenant-c"},
		{desc: "shared value later rule", routes: routes, req: request{path: "/", headers: []string{"X-Tenant", "c", "X-Env", "qa"}}, want: "tenant-c-any-env"},
		{desc: "unknown value", routes: routes, req: request{path: "/", headers: []string{"X-Tenant", "z", "X-Env", "prod"}}, want: "fallback"},
		{desc: "header absent", routes: routes, req: request{path: "/"}, want: "fallback"},
		{desc: "method run", routes: routes, req: request{method: "DELETE", path: "/m"}, want: "method-4"},
		{desc: "method run, first of equal", routes: routes, req: request{method: "GET", path: "/m"}, want: "method-0"},
		{desc: "method run miss", routes: routes, req: request{method: "HEAD", path: "/m"}, want: "fallback"},
		{desc: "query run", routes: routes, req: request{path: "/q", query: "v=3"}, want: "query-3"},
		{desc: "query run miss", routes: routes, req: request{path: "/q", query: "v=9"}, want: "fallback"},
	})
}

// TestDispatchBuilt pins down that runs of exact-value rules are folded
// into dispatches (so the cases above exercise them) and short runs aren't.
func TestDispatchBuilt(t *testing.T) {
	cases := []struct {
		desc  string
		count int
		key   condKind
		want  int // dispatch steps at the root
	}{
		{desc: "header run", count: minDispatchRun, key: condHeader, want: 1},
		{desc: "method run", count: minDispatchRun + 3, key: condMethod, want: 1},
		{desc: "query run", count: 50, key: condQuery, want: 1},
		{desc: "short run", count: minDispatchRun - 1, key: condHeader, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			var routes []Route
			for i := range tc.count {
				v := strings.Repeat("x", i+1)
				m := Match{Path: "/"}
				switch tc.key {
				case condHeader:
					m.Headers = []HeaderMatch{hdr("X-A", v)}
				case condMethod:
					m.Method = strings.ToUpper(v)
				default:
					m.Query = []QueryMatch{qry("q", v)}
				}
				routes = append(routes, route(v, nil, m))
			}
			tbl, err := New(routes)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, s := range tbl.noHost.prefix.steps {
				if s.dispatch != nil {
					got++
					if s.dispatch.key.kind != tc.key {
						t.Errorf("dispatch on %v, want %v", s.dispatch.key.kind, tc.key)
					}
				}
			}
			if got != tc.want {
				t.Errorf("%d dispatch steps, want %d", got, tc.want)
			}
		})
	}
}

// TestCanonicalHeader checks that compiled header names find what
// fasthttp's own case-insensitive Peek finds, for names sent in any case.
func TestCanonicalHeader(t *testing.T) {
	cases := []struct {
		desc string
		sent string // on the wire
		conf string // in the route
	}{
		{desc: "lower", sent: "x-tenant", conf: "X-Tenant"},
		{desc: "upper", sent: "X-TENANT", conf: "x-tenant"},
		{desc: "mixed", sent: "x-TeNaNt-iD", conf: "X-tenant-ID"},
		{desc: "double dash", sent: "x--y", conf: "X--Y"},
		{desc: "leading dash", sent: "-x", conf: "-X"},
		{desc: "digits and underscore", sent: "a1_b-2c", conf: "A1_B-2C"},
		{desc: "token punctuation", sent: "x!#$%&'*+.^_`|~y", conf: "X!#$%&'*+.^_`|~Y"},
		{desc: "special Content-Type", sent: "content-TYPE", conf: "CONTENT-type"},
		{desc: "special User-Agent", sent: "user-agent", conf: "USER-AGENT"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			req := request{path: "/", headers: []string{tc.sent, "v"}}.build(t)
			want := string(req.Header.Peek(tc.conf))
			if want != "v" {
				t.Fatalf("fasthttp Peek(%q) = %q, want v", tc.conf, want)
			}
			if got := string(req.Header.PeekCanonical([]byte(canonicalHeader(tc.conf)))); got != want {
				t.Errorf("PeekCanonical(canonicalHeader(%q)=%q) = %q, want %q", tc.conf, canonicalHeader(tc.conf), got, want)
			}
		})
	}
}
