package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

func strp(s string) *string { return &s }
func intp(i int) *int       { return &i }

func TestNewRedirectRefuses(t *testing.T) {
	tests := []struct {
		desc  string
		cfg   *config.RequestRedirect
		field string
	}{
		{desc: "no config", cfg: nil, field: ""},
		{desc: "bad scheme", cfg: &config.RequestRedirect{Scheme: "1http"}, field: "scheme"},
		{desc: "bad status", cfg: &config.RequestRedirect{Status: intp(200)}, field: "status"},
		{desc: "host with port", cfg: &config.RequestRedirect{Authority: &config.HostRewrite{Host: "a.example:80"}}, field: "authority.host"},
		{desc: "full with path", cfg: &config.RequestRedirect{Authority: &config.HostRewrite{Full: "a.example/x"}}, field: "authority.full"},
		{desc: "full with bad port", cfg: &config.RequestRedirect{Authority: &config.HostRewrite{Full: "a.example:http"}}, field: "authority.full"},
		{desc: "port out of range", cfg: &config.RequestRedirect{Authority: &config.HostRewrite{Port: 70000}}, field: "authority.port"},
		{desc: "empty authority", cfg: &config.RequestRedirect{Authority: &config.HostRewrite{}}, field: "authority"},
		{desc: "relative path", cfg: &config.RequestRedirect{Path: &config.PathRewrite{Full: strp("x")}}, field: "path.full"},
		{desc: "path with query", cfg: &config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/x?y")}}, field: "path.prefix"},
		{desc: "path with space", cfg: &config.RequestRedirect{Path: &config.PathRewrite{Full: strp("/a b")}}, field: "path.full"},
		{desc: "empty path rewrite", cfg: &config.RequestRedirect{Path: &config.PathRewrite{}}, field: "path"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewRedirect(tt.cfg)
			if err == nil {
				t.Fatalf("NewRedirect = %v, want an error", p)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error = %v, want a *FieldError for field %q", err, tt.field)
			}
		})
	}
}

func TestRedirect(t *testing.T) {
	tests := []struct {
		desc    string
		cfg     config.RequestRedirect
		scheme  string // connection scheme, default http
		target  string
		host    string
		matched string // MatchedPrefix; "" means nil
		// want is the Location header, or "" when the answer is an error.
		want       string
		wantStatus int
	}{
		{desc: "nothing configured", target: "/hello/world", host: "test.com", want: "http://test.com/hello/world", wantStatus: 302},
		{desc: "scheme", cfg: config.RequestRedirect{Scheme: "https"}, target: "/hello/world", host: "test.com", want: "https://test.com/hello/world", wantStatus: 302},
		{desc: "any scheme, lower-cased", cfg: config.RequestRedirect{Scheme: "WSS"}, target: "/a", host: "test.com:8443", want: "wss://test.com/a", wantStatus: 302},
		{desc: "scheme uses its well-known port", cfg: config.RequestRedirect{Scheme: "https"}, target: "/a", host: "test.com:8080", want: "https://test.com/a", wantStatus: 302},
		{desc: "connection scheme kept", scheme: "https", target: "/a", host: "test.com", want: "https://test.com/a", wantStatus: 302},
		{desc: "request port kept", target: "/a", host: "test.com:8080", want: "http://test.com:8080/a", wantStatus: 302},
		{desc: "default port left out", target: "/a", host: "test.com:80", want: "http://test.com/a", wantStatus: 302},
		{desc: "host", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Host: "newhost.com"}}, target: "/hello/world", host: "test.com", want: "http://newhost.com/hello/world", wantStatus: 302},
		{desc: "host keeps request port", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Host: "newhost.com"}}, target: "/a", host: "test.com:8080", want: "http://newhost.com:8080/a", wantStatus: 302},
		{desc: "host with scheme drops request port", cfg: config.RequestRedirect{Scheme: "https", Authority: &config.HostRewrite{Host: "newhost.com"}}, target: "/a", host: "test.com:8080", want: "https://newhost.com/a", wantStatus: 302},
		{desc: "full authority", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Full: "newhost.com:8080"}}, target: "/hello/world", host: "test.com", want: "http://newhost.com:8080/hello/world", wantStatus: 302},
		{desc: "full authority default port left out", cfg: config.RequestRedirect{Scheme: "https", Authority: &config.HostRewrite{Full: "newhost.com:443"}}, target: "/a", host: "test.com", want: "https://newhost.com/a", wantStatus: 302},
		{desc: "port", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Port: 8080}}, target: "/hello/world", host: "test.com", want: "http://test.com:8080/hello/world", wantStatus: 302},
		{desc: "http port 80 left out", cfg: config.RequestRedirect{Scheme: "http", Authority: &config.HostRewrite{Port: 80}}, scheme: "https", target: "/hello/world", host: "test.com:443", want: "http://test.com/hello/world", wantStatus: 302},
		{desc: "https port 443 left out", cfg: config.RequestRedirect{Scheme: "https", Authority: &config.HostRewrite{Port: 443}}, target: "/hello/world", host: "test.com:80", want: "https://test.com/hello/world", wantStatus: 302},
		{desc: "http non-standard port", cfg: config.RequestRedirect{Scheme: "http", Authority: &config.HostRewrite{Port: 8080}}, scheme: "https", target: "/hello/world", host: "test.com:443", want: "http://test.com:8080/hello/world", wantStatus: 302},
		{desc: "https non-standard port", cfg: config.RequestRedirect{Scheme: "https", Authority: &config.HostRewrite{Port: 8443}}, target: "/hello/world", host: "test.com:80", want: "https://test.com:8443/hello/world", wantStatus: 302},
		{desc: "IPv6 host port replaced", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Port: 9090}}, target: "/a", host: "[::1]:8080", want: "http://[::1]:9090/a", wantStatus: 302},
		{desc: "auto keeps authority", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Auto: true}}, target: "/a", host: "test.com:8080", want: "http://test.com:8080/a", wantStatus: 302},
		{desc: "full path", cfg: config.RequestRedirect{Path: &config.PathRewrite{Full: strp("/new/path")}}, target: "/hello/world", host: "test.com", want: "http://test.com/new/path", wantStatus: 302},
		{desc: "prefix", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/api/users/123", host: "test.com", matched: "/api", want: "http://test.com/v1/users/123", wantStatus: 302},
		{desc: "status", cfg: config.RequestRedirect{Status: intp(301)}, target: "/hello/world", host: "test.com", want: "http://test.com/hello/world", wantStatus: 301},
		{desc: "combined", cfg: config.RequestRedirect{Scheme: "https", Authority: &config.HostRewrite{Host: "newhost.com"}, Path: &config.PathRewrite{Prefix: strp("/new")}, Status: intp(308)}, target: "/old/api/users", host: "test.com", matched: "/old", want: "https://newhost.com/new/api/users", wantStatus: 308},
		{desc: "query kept", target: "/hello/world?param1=value1&param2=value2", host: "test.com", want: "http://test.com/hello/world?param1=value1&param2=value2", wantStatus: 302},
		{desc: "encoded query kept", target: "/h?param1=value%201&param2=value%2B2", host: "test.com", want: "http://test.com/h?param1=value%201&param2=value%2B2", wantStatus: 302},
		{desc: "prefix with query", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/v2")}}, target: "/api/users?page=1&limit=10", host: "test.com", matched: "/api", want: "http://test.com/v2/users?page=1&limit=10", wantStatus: 302},
		{desc: "full path with query", cfg: config.RequestRedirect{Path: &config.PathRewrite{Full: strp("/new")}}, target: "/old?x=1", host: "test.com", want: "http://test.com/new?x=1", wantStatus: 302},
		{desc: "prefix exact match", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/api", host: "test.com", matched: "/api", want: "http://test.com/v1", wantStatus: 302},
		{desc: "prefix with trailing slashes", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/v1/")}}, target: "/api/users", host: "test.com", matched: "/api/", want: "http://test.com/v1/users", wantStatus: 302},
		{desc: "prefix to slash", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/")}}, target: "/api/users", host: "test.com", matched: "/api", want: "http://test.com/users", wantStatus: 302},
		{desc: "prefix to slash on the prefix itself", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/")}}, target: "/api", host: "test.com", matched: "/api", want: "http://test.com/", wantStatus: 302},
		{desc: "prefix under root match", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/users", host: "test.com", matched: "/", want: "http://test.com/v1/users", wantStatus: 302},
		{desc: "prefix without prefix match", cfg: config.RequestRedirect{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/exact", host: "test.com", want: "", wantStatus: 500},
		{desc: "full path without prefix match", cfg: config.RequestRedirect{Path: &config.PathRewrite{Full: strp("/new-exact")}}, target: "/exact", host: "test.com", want: "http://test.com/new-exact", wantStatus: 302},
		{desc: "absolute-form target", target: "http://test.com/a?b=c", host: "test.com", want: "http://test.com/a?b=c", wantStatus: 302},
		// An HTTP/1.0 request may have no Host: a redirect that keeps the
		// request's authority has none (the client's fault, 400); one that
		// names its own needs none.
		{desc: "no host", target: "/a", want: "", wantStatus: 400},
		{desc: "no host, port rewrite", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Port: 8080}}, target: "/a", want: "", wantStatus: 400},
		{desc: "no host, full authority", cfg: config.RequestRedirect{Authority: &config.HostRewrite{Full: "newhost.com:8080"}}, target: "/a", want: "http://newhost.com:8080/a", wantStatus: 302},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewRedirect(&tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var head []string
			if tt.host != "" {
				head = append(head, "Host: "+tt.host)
			}
			c := newCtx("GET", tt.target, head...)
			if tt.scheme != "" {
				c.Scheme = []byte(tt.scheme)
			}
			if tt.matched != "" {
				c.MatchedPrefix = []byte(tt.matched)
			}
			if got := p.OnRequest(c); got != Done {
				t.Fatalf("OnRequest = %s, want Done", resultName(got))
			}
			resp := &c.Fast.Response
			if resp.StatusCode() != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode(), tt.wantStatus)
			}
			if got := string(resp.Header.Peek("Location")); got != tt.want {
				t.Errorf("Location = %q, want %q", got, tt.want)
			}
			if tt.want != "" {
				wire := wireResponse(t, resp)
				if len(resp.Body()) != 0 || strings.Contains(wire, "Content-Type") {
					t.Errorf("redirect has a body or a Content-Type:\n%s", wire)
				}
			}
		})
	}
}

func TestRedirectZeroAllocs(t *testing.T) {
	p, err := NewRedirect(&config.RequestRedirect{
		Scheme:    "https",
		Authority: &config.HostRewrite{Port: 8443},
		Path:      &config.PathRewrite{Prefix: strp("/v2")},
		Status:    intp(301),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := newCtx("GET", "/api/users?page=2", "Host: gw.example")
	c.MatchedPrefix = []byte("/api")
	allocs := testing.AllocsPerRun(100, func() {
		c.Fast.Response.Reset()
		p.OnRequest(c)
	})
	if allocs != 0 {
		t.Errorf("allocations per request = %v, want 0", allocs)
	}
	if got := string(c.Fast.Response.Header.Peek("Location")); got != "https://gw.example:8443/v2/users?page=2" {
		t.Errorf("Location = %q", got)
	}
}
