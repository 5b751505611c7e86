package credential

import (
	"bufio"
	"bytes"
	"github.com/relaygate/gateway/policy/policytest"
	"net/url"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

func TestQueryValue(t *testing.T) {
	tests := []struct {
		query, name string
		want        string
		ok          bool
	}{
		{"token=abc", "token", "abc", true},
		{"a=1&token=abc&b=2", "token", "abc", true},
		{"token=first&token=second", "token", "first", true},
		{"tok%65n=a%2Eb", "token", "a.b", true},
		{"my+key=x+y", "my key", "x y", true},
		{"token", "token", "", true},
		{"token=", "token", "", true},
		{"tokens=abc", "token", "", false},
		{"", "token", "", false},
		{"&&token=%zz%4", "token", "%zz%4", true},
		{"x=1", "x=1", "", false},
	}
	for _, tc := range tests {
		got, ok := QueryValue(nil, []byte(tc.query), []byte(tc.name))
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("QueryValue(%q, %q) = %q, %v; want %q, %v", tc.query, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRemoveQueryParam(t *testing.T) {
	tests := []struct{ query, name, want string }{
		{"token=abc", "token", ""},
		{"a=1&token=abc&b=%20x", "token", "a=1&b=%20x"},
		{"token=1&a=1&token=2", "token", "a=1"},
		{"tok%65n=1&a", "token", "a"},
		{"a=1&&b=2", "token", "a=1&b=2"},
		{"tokens=1", "token", "tokens=1"},
	}
	for _, tc := range tests {
		if got := RemoveQueryParam(nil, []byte(tc.query), []byte(tc.name)); string(got) != tc.want {
			t.Errorf("RemoveQueryParam(%q, %q) = %q, want %q", tc.query, tc.name, got, tc.want)
		}
	}
}

// FuzzQuery checks the query helpers against net/url: a value found is the
// one url.ParseQuery finds first, and after removal no such parameter is
// left while every other one keeps its value.
func FuzzQuery(f *testing.F) {
	f.Add("a=1&token=abc&b=2", "token")
	f.Add("tok%65n=a%2Eb&x", "token")
	f.Add("%zz=1&+=2", " ")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, query, name string) {
		if strings.ContainsAny(query, ";") {
			return // net/url refuses ';', this parser treats it as data
		}
		v, ok := QueryValue(nil, []byte(query), []byte(name))
		rest := RemoveQueryParam(nil, []byte(query), []byte(name))
		if bytes.Contains(rest, []byte("&&")) || bytes.HasPrefix(rest, []byte("&")) || bytes.HasSuffix(rest, []byte("&")) {
			t.Fatalf("RemoveQueryParam(%q) = %q: empty pairs", query, rest)
		}
		if _, again := QueryValue(nil, rest, []byte(name)); again {
			t.Fatalf("RemoveQueryParam(%q, %q) = %q still holds it", query, name, rest)
		}
		want, err := url.ParseQuery(query)
		if err != nil {
			return // malformed escapes: net/url gives up, this parser keeps them
		}
		if ok != want.Has(name) {
			t.Fatalf("QueryValue(%q, %q) found = %v, net/url %v", query, name, ok, want.Has(name))
		}
		if ok && string(v) != want.Get(name) {
			t.Fatalf("QueryValue(%q, %q) = %q, net/url %q", query, name, v, want.Get(name))
		}
		got, err := url.ParseQuery(string(rest))
		if err != nil {
			t.Fatalf("RemoveQueryParam(%q) = %q: %v", query, rest, err)
		}
		want.Del(name)
		for k, vs := range want {
			if strings.Join(got[k], "\x00") != strings.Join(vs, "\x00") {
				t.Fatalf("RemoveQueryParam(%q, %q) = %q: %q changed", query, name, rest, k)
			}
		}
	})
}

// FuzzHeaderLocation extracts a prefixed credential from any header value:
// it never panics, and what it returns is the value minus the prefix.
func FuzzHeaderLocation(f *testing.F) {
	f.Add("Bearer abc.def.ghi", "Bearer ")
	f.Add("bearer x", "Bearer ")
	f.Add("Basic x", "Bearer ")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, value, prefix string) {
		if !validHeaderValueForTest(value) || !validHeaderValueForTest(prefix) {
			return
		}
		p := prefix
		loc, err := NewLocation(&config.AuthLocation{Header: &config.HeaderLocation{Name: "X-Token", Prefix: &p}})
		if err != nil {
			t.Fatal(err)
		}
		c := policytest.Ctx(policytest.NewRequest("GET", "/", "X-Token", value))
		stored := string(c.Fast.Request.Header.Peek("X-Token"))
		got := loc.Extract(c)
		if got == nil {
			if len(stored) >= len(prefix) && strings.EqualFold(stored[:len(prefix)], prefix) && len(stored) > len(prefix) {
				t.Fatalf("Extract(%q, prefix %q) = nil", stored, prefix)
			}
			return
		}
		if !strings.EqualFold(stored[:len(prefix)], prefix) || stored[len(prefix):] != string(got) {
			t.Fatalf("Extract(%q, prefix %q) = %q", stored, prefix, got)
		}
	})
}

func validHeaderValueForTest(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// TestLocations extracts, removes and inserts at each kind of location.
func TestLocations(t *testing.T) {
	empty := ""
	tests := []struct {
		name    string
		cfg     *config.AuthLocation
		uri     string
		headers []string
		want    string // extracted
		// after removal:
		wantURI    string
		wantHeader [2]string // name, value ("" absent)
		// after Insert("NEW"):
		insertURI    string
		insertHeader [2]string
	}{
		{
			name: "default bearer", uri: "/p?a=1", headers: []string{"Authorization", "Bearer tok", "X-Other", "1"},
			want: "tok", wantURI: "/p?a=1", wantHeader: [2]string{"Authorization", ""},
			insertURI: "/p?a=1", insertHeader: [2]string{"Authorization", "Bearer NEW"},
		},
		{
			name: "bearer any case", uri: "/", headers: []string{"Authorization", "bEaReR tok"},
			want: "tok", wantURI: "/", wantHeader: [2]string{"Authorization", ""},
			insertURI: "/", insertHeader: [2]string{"Authorization", "Bearer NEW"},
		},
		{
			name: "other scheme is no token", uri: "/", headers: []string{"Authorization", "Basic dXNlcg=="},
			want: "", wantURI: "/", wantHeader: [2]string{"Authorization", "Basic dXNlcg=="},
			insertURI: "/", insertHeader: [2]string{"Authorization", "Bearer NEW"},
		},
		{
			name: "custom header without prefix", cfg: &config.AuthLocation{Header: &config.HeaderLocation{Name: "X-Api-Token", Prefix: &empty}},
			uri: "/", headers: []string{"X-Api-Token", "tok"},
			want: "tok", wantURI: "/", wantHeader: [2]string{"X-Api-Token", ""},
			insertURI: "/", insertHeader: [2]string{"X-Api-Token", "NEW"},
		},
		{
			name: "query parameter", cfg: &config.AuthLocation{QueryParameter: &config.NamedLocation{Name: "access_token"}},
			uri:  "/p/q?a=1&access_token=t%2Eok&b=2",
			want: "t.ok", wantURI: "/p/q?a=1&b=2",
			insertURI: "/p/q?a=1&b=2&access_token=NEW",
		},
		{
			name: "query parameter alone", cfg: &config.AuthLocation{QueryParameter: &config.NamedLocation{Name: "access_token"}},
			uri:  "/p?access_token=tok",
			want: "tok", wantURI: "/p",
			insertURI: "/p?access_token=NEW",
		},
		{
			name: "cookie", cfg: &config.AuthLocation{Cookie: &config.NamedLocation{Name: "session"}},
			uri: "/", headers: []string{"Cookie", "a=1; session=tok; b=2"},
			want: "tok", wantURI: "/", wantHeader: [2]string{"Cookie", "a=1; b=2"},
			insertURI: "/", insertHeader: [2]string{"Cookie", "a=1; b=2; session=NEW"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loc, err := NewLocation(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := policytest.Ctx(policytest.NewRequest("GET", tc.uri, tc.headers...))
			if got := loc.Extract(c); string(got) != tc.want {
				t.Fatalf("extract = %q, want %q", got, tc.want)
			}
			if tc.want != "" {
				loc.Remove(c)
			}
			req := &c.Fast.Request
			if got := string(req.Header.RequestURI()); got != tc.wantURI {
				t.Fatalf("after remove: target %q, want %q", got, tc.wantURI)
			}
			if string(c.Path) != strings.SplitN(tc.uri, "?", 2)[0] {
				t.Fatalf("path %q changed", c.Path)
			}
			if n := tc.wantHeader[0]; n != "" {
				if got := string(req.Header.Peek(n)); got != tc.wantHeader[1] {
					t.Fatalf("after remove: %s = %q, want %q", n, got, tc.wantHeader[1])
				}
			}
			loc.Insert(req, []byte("NEW"), nil)
			if got := string(req.Header.RequestURI()); got != tc.insertURI {
				t.Fatalf("after insert: target %q, want %q", got, tc.insertURI)
			}
			if n := tc.insertHeader[0]; n != "" {
				if got := string(req.Header.Peek(n)); got != tc.insertHeader[1] {
					t.Fatalf("after insert: %s = %q, want %q", n, got, tc.insertHeader[1])
				}
			}
			if !strings.Contains(string(req.Header.String()), "NEW") {
				t.Fatalf("inserted token not in the request:\n%s", req.Header.String())
			}
		})
	}
}

func TestLocationString(t *testing.T) {
	for _, tc := range []struct {
		cfg  *config.AuthLocation
		want string
	}{
		{nil, "header Authorization (prefix Bearer)"},
		{&config.AuthLocation{QueryParameter: &config.NamedLocation{Name: "t"}}, "query parameter t"},
		{&config.AuthLocation{Cookie: &config.NamedLocation{Name: "c"}}, "cookie c"},
		{&config.AuthLocation{Header: &config.HeaderLocation{Name: "X"}}, "header X"},
	} {
		l, err := NewLocation(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.String(); got != tc.want {
			t.Errorf("String = %q, want %q", got, tc.want)
		}
	}
}

func TestRepeated(t *testing.T) {
	header := DefaultLocation()
	query, _ := NewLocation(&config.AuthLocation{QueryParameter: &config.NamedLocation{Name: "k"}})
	cookie, _ := NewLocation(&config.AuthLocation{Cookie: &config.NamedLocation{Name: "s"}})
	tests := []struct {
		desc    string
		loc     Location
		uri     string
		headers []string
		want    bool
	}{
		{"one header", header, "/", []string{"Authorization", "Bearer a"}, false},
		{"two headers", header, "/", []string{"Authorization", "Bearer a", "authorization", "Bearer b"}, true},
		{"none", header, "/", nil, false},
		{"one parameter", query, "/?k=a&j=b", nil, false},
		{"two parameters, one escaped", query, "/?k=a&%6b=b", nil, true},
		{"one cookie", cookie, "/", []string{"Cookie", "s=a; t=b"}, false},
		{"two cookies", cookie, "/", []string{"Cookie", "s=a; s=b"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := policytest.Ctx(policytest.NewRequest("GET", tc.uri, tc.headers...))
			if got := tc.loc.Repeated(c); got != tc.want {
				t.Errorf("Repeated = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestInsertReplacesEveryValue: Insert leaves only the gateway's value at
// its location, however many the client sent there.
func TestInsertReplacesEveryValue(t *testing.T) {
	for _, tc := range []struct {
		desc string
		loc  *config.AuthLocation
		raw  string // the client's request
		want func(req string) bool
	}{
		{"header", &config.AuthLocation{Header: &config.HeaderLocation{Name: "X-Key"}},
			"GET / HTTP/1.1\r\nHost: h\r\nX-Key: a\r\nX-Key: b\r\n\r\n",
			func(r string) bool { return strings.Count(r, "X-Key") == 1 && strings.Contains(r, "X-Key: NEW\r\n") }},
		{"cookie", &config.AuthLocation{Cookie: &config.NamedLocation{Name: "s"}},
			"GET / HTTP/1.1\r\nHost: h\r\nCookie: s=a; t=1\r\nCookie: s=b\r\n\r\n",
			func(r string) bool {
				return strings.Count(r, "s=") == 1 && strings.Contains(r, "s=NEW") && strings.Contains(r, "t=1")
			}},
		{"query", &config.AuthLocation{QueryParameter: &config.NamedLocation{Name: "k"}},
			"GET /p?k=a&x=1&k=b HTTP/1.1\r\nHost: h\r\n\r\n",
			func(r string) bool { return strings.HasPrefix(r, "GET /p?x=1&k=NEW HTTP/1.1") }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			loc, err := NewLocation(tc.loc)
			if err != nil {
				t.Fatal(err)
			}
			var req fasthttp.Request
			if err := req.Read(bufio.NewReader(strings.NewReader(tc.raw))); err != nil {
				t.Fatal(err)
			}
			loc.Insert(&req, []byte("NEW"), nil)
			if got := req.String(); !tc.want(got) {
				t.Errorf("after Insert:\n%s", got)
			}
		})
	}
}
