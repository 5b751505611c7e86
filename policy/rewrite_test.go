package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

func TestNewURLRewriteRefuses(t *testing.T) {
	tests := []struct {
		desc  string
		cfg   *config.URLRewrite
		field string
	}{
		{desc: "no config", cfg: nil, field: ""},
		{desc: "host with path", cfg: &config.URLRewrite{Authority: &config.HostRewrite{Host: "a/b"}}, field: "authority.host"},
		{desc: "bad IPv6 host", cfg: &config.URLRewrite{Authority: &config.HostRewrite{Host: "[zz]"}}, field: "authority.host"},
		{desc: "full unbracketed IPv6", cfg: &config.URLRewrite{Authority: &config.HostRewrite{Full: "::1:80"}}, field: "authority.full"},
		{desc: "prefix not absolute", cfg: &config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("v1")}}, field: "path.prefix"},
		{desc: "full with fragment", cfg: &config.URLRewrite{Path: &config.PathRewrite{Full: strp("/a#b")}}, field: "path.full"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewURLRewrite(tt.cfg)
			if err == nil {
				t.Fatalf("NewURLRewrite = %v, want an error", p)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error = %v, want a *FieldError for field %q", err, tt.field)
			}
		})
	}
}

func TestURLRewrite(t *testing.T) {
	tests := []struct {
		desc    string
		cfg     config.URLRewrite
		scheme  string
		target  string
		host    string
		matched string // "" means nil
		// Expected request target, Host header and c.Path; wantStatus 500
		// means the rewrite failed and answered.
		wantTarget string
		wantHost   string
		wantPath   string
		wantStatus int
	}{
		{desc: "nothing configured", target: "/hello/world?a=1", host: "test.com", wantTarget: "/hello/world?a=1", wantHost: "test.com", wantPath: "/hello/world"},
		{desc: "host", cfg: config.URLRewrite{Authority: &config.HostRewrite{Host: "newhost.com"}}, target: "/hello/world", host: "test.com", wantTarget: "/hello/world", wantHost: "newhost.com", wantPath: "/hello/world"},
		{desc: "host drops the port", cfg: config.URLRewrite{Authority: &config.HostRewrite{Host: "newhost.com"}}, target: "/hello/world", host: "test.com:8080", wantTarget: "/hello/world", wantHost: "newhost.com", wantPath: "/hello/world"},
		{desc: "full authority", cfg: config.URLRewrite{Authority: &config.HostRewrite{Full: "api.internal:9000"}}, target: "/a", host: "test.com", wantTarget: "/a", wantHost: "api.internal:9000", wantPath: "/a"},
		{desc: "port", cfg: config.URLRewrite{Authority: &config.HostRewrite{Port: 8080}}, target: "/hello/world", host: "test.com", wantTarget: "/hello/world", wantHost: "test.com:8080", wantPath: "/hello/world"},
		{desc: "default port left out", cfg: config.URLRewrite{Authority: &config.HostRewrite{Port: 80}}, target: "/a", host: "test.com:8080", wantTarget: "/a", wantHost: "test.com", wantPath: "/a"},
		{desc: "default port on a host without port", cfg: config.URLRewrite{Authority: &config.HostRewrite{Port: 80}}, target: "/a", host: "test.com", wantTarget: "/a", wantHost: "test.com", wantPath: "/a"},
		{desc: "https default port is kept on http", cfg: config.URLRewrite{Authority: &config.HostRewrite{Port: 443}}, target: "/a", host: "test.com:80", wantTarget: "/a", wantHost: "test.com:443", wantPath: "/a"},
		{desc: "http port on https", cfg: config.URLRewrite{Authority: &config.HostRewrite{Port: 80}}, scheme: "https", target: "/a", host: "test.com:443", wantTarget: "/a", wantHost: "test.com:80", wantPath: "/a"},
		{desc: "auto leaves Host", cfg: config.URLRewrite{Authority: &config.HostRewrite{Auto: true}}, target: "/a", host: "test.com", wantTarget: "/a", wantHost: "test.com", wantPath: "/a"},
		{desc: "full path", cfg: config.URLRewrite{Path: &config.PathRewrite{Full: strp("/new/path")}}, target: "/hello/world", host: "test.com", wantTarget: "/new/path", wantHost: "test.com", wantPath: "/new/path"},
		{desc: "full path keeps the query", cfg: config.URLRewrite{Path: &config.PathRewrite{Full: strp("/new/path")}}, target: "/hello/world?param1=value1&param2=value2", host: "test.com", wantTarget: "/new/path?param1=value1&param2=value2", wantHost: "test.com", wantPath: "/new/path"},
		{desc: "prefix", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/api/users/123", host: "test.com", matched: "/api", wantTarget: "/v1/users/123", wantHost: "test.com", wantPath: "/v1/users/123"},
		{desc: "prefix and host", cfg: config.URLRewrite{Authority: &config.HostRewrite{Host: "newhost.com"}, Path: &config.PathRewrite{Prefix: strp("/new")}}, target: "/old/api/users", host: "test.com", matched: "/old", wantTarget: "/new/api/users", wantHost: "newhost.com", wantPath: "/new/api/users"},
		{desc: "prefix keeps the query", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v2")}}, target: "/api/users?page=1&limit=10", host: "test.com", matched: "/api", wantTarget: "/v2/users?page=1&limit=10", wantHost: "test.com", wantPath: "/v2/users"},
		{desc: "prefix on the prefix itself", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/api", host: "test.com", matched: "/api", wantTarget: "/v1", wantHost: "test.com", wantPath: "/v1"},
		{desc: "prefix with trailing slashes", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1/")}}, target: "/api/users", host: "test.com", matched: "/api/", wantTarget: "/v1/users", wantHost: "test.com", wantPath: "/v1/users"},
		{desc: "prefix with trailing slash on the prefix itself", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1/")}}, target: "/api", host: "test.com", matched: "/api/", wantTarget: "/v1/", wantHost: "test.com", wantPath: "/v1/"},
		{desc: "foo to slash on foo/bar", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/")}}, target: "/foo/bar", host: "test.com", matched: "/foo", wantTarget: "/bar", wantHost: "test.com", wantPath: "/bar"},
		{desc: "foo to slash on foo", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/")}}, target: "/foo", host: "test.com", matched: "/foo", wantTarget: "/", wantHost: "test.com", wantPath: "/"},
		{desc: "foo to slash on foo with query", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/")}}, target: "/foo?debug=true", host: "test.com", matched: "/foo", wantTarget: "/?debug=true", wantHost: "test.com", wantPath: "/"},
		{desc: "foo/ to slash on foo/bar", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/")}}, target: "/foo/bar", host: "test.com", matched: "/foo/", wantTarget: "/bar", wantHost: "test.com", wantPath: "/bar"},
		{desc: "root match", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/users", host: "test.com", matched: "/", wantTarget: "/v1/users", wantHost: "test.com", wantPath: "/v1/users"},
		{desc: "absolute-form target becomes origin-form", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "http://test.com/api/x?y=1", host: "test.com", matched: "/api", wantTarget: "/v1/x?y=1", wantHost: "test.com", wantPath: "/v1/x"},
		{desc: "partial segment refused", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/apiary", host: "test.com", matched: "/api", wantStatus: 500},
		{desc: "encoded slash boundary refused", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/api%2Fv1", host: "test.com", matched: "/api", wantStatus: 500},
		{desc: "no prefix match refused", cfg: config.URLRewrite{Path: &config.PathRewrite{Prefix: strp("/v1")}}, target: "/exact", host: "test.com", wantStatus: 500},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewURLRewrite(&tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := newCtx("GET", tt.target, "Host: "+tt.host)
			if tt.scheme != "" {
				c.Scheme = []byte(tt.scheme)
			}
			if tt.matched != "" {
				c.MatchedPrefix = []byte(tt.matched)
			}
			// The router may have parsed the URI already.
			_ = c.Fast.Request.URI()
			got := p.OnRequest(c)
			req := &c.Fast.Request
			if tt.wantStatus != 0 {
				if got != Done || c.Fast.Response.StatusCode() != tt.wantStatus {
					t.Fatalf("OnRequest = %s with status %d, want Done with %d", resultName(got), c.Fast.Response.StatusCode(), tt.wantStatus)
				}
				return
			}
			if got != Continue {
				t.Fatalf("OnRequest = %s, want Continue", resultName(got))
			}
			if s := string(req.Header.RequestURI()); s != tt.wantTarget {
				t.Errorf("request target = %q, want %q", s, tt.wantTarget)
			}
			if s := string(req.Header.Host()); s != tt.wantHost {
				t.Errorf("Host = %q, want %q", s, tt.wantHost)
			}
			if s := string(c.Path); s != tt.wantPath {
				t.Errorf("c.Path = %q, want %q", s, tt.wantPath)
			}
			wire := wireRequest(t, req)
			wantLine := "GET " + tt.wantTarget + " HTTP/1.1\r\n"
			if !strings.HasPrefix(wire, wantLine) || !strings.Contains(wire, "\r\nHost: "+tt.wantHost+"\r\n") {
				t.Errorf("request written upstream:\n%s\nwant request line %q and Host %q", wire, wantLine, tt.wantHost)
			}
		})
	}
}

// TestURLRewriteSetsAuthority checks which rewrites take the upstream Host
// away from the proxy's automatic hostname rewrite.
func TestURLRewriteSetsAuthority(t *testing.T) {
	tests := []struct {
		desc string
		auth *config.HostRewrite
		want bool
	}{
		{desc: "unset", auth: nil, want: false},
		{desc: "auto", auth: &config.HostRewrite{Auto: true}, want: false},
		{desc: "none", auth: &config.HostRewrite{None: true}, want: true},
		{desc: "host", auth: &config.HostRewrite{Host: "a.example"}, want: true},
		{desc: "port", auth: &config.HostRewrite{Port: 81}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewURLRewrite(&config.URLRewrite{Authority: tt.auth})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.SetsAuthority(); got != tt.want {
				t.Errorf("SetsAuthority = %v, want %v", got, tt.want)
			}
			c := newCtx("GET", "/a", "Host: test.com")
			if got := p.OnRequest(c); got != Continue {
				t.Fatalf("OnRequest = %s, want Continue", resultName(got))
			}
			if c.HostRewritten != tt.want {
				t.Errorf("c.HostRewritten = %v, want %v", c.HostRewritten, tt.want)
			}
		})
	}
}

func TestURLRewriteZeroAllocs(t *testing.T) {
	p, err := NewURLRewrite(&config.URLRewrite{
		Authority: &config.HostRewrite{Host: "backend.internal"},
		Path:      &config.PathRewrite{Prefix: strp("/v2")},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := newCtx("GET", "/api/users?page=2", "Host: gw.example")
	allocs := testing.AllocsPerRun(100, func() {
		c.Fast.Request.SetRequestURI("/api/users?page=2")
		c.Fast.Request.Header.SetHost("gw.example")
		c.Path = rawPathNoCopy(c.Fast.Request.Header.RequestURI())
		c.MatchedPrefix = c.Path[:4]
		p.OnRequest(c)
	})
	if allocs != 0 {
		t.Errorf("allocations per request = %v, want 0", allocs)
	}
	if got := string(c.Fast.Request.Header.RequestURI()); got != "/v2/users?page=2" {
		t.Errorf("request target = %q", got)
	}
}

// rawPathNoCopy is rawPath for origin-form targets.
func rawPathNoCopy(target []byte) []byte {
	for i, b := range target {
		if b == '?' {
			return target[:i]
		}
	}
	return target
}
