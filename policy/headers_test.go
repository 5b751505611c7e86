package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
	"github.com/valyala/fasthttp"
)

func TestNewHeaderModifierRefuses(t *testing.T) {
	tests := []struct {
		desc  string
		cfg   *config.HeaderModifier
		field string
		msg   string
	}{
		{desc: "no config", cfg: nil, field: "", msg: "no configuration"},
		{desc: "bad add name", cfg: &config.HeaderModifier{Add: map[string]string{"X Bad": "v"}}, field: "add.X Bad", msg: "invalid header name"},
		{desc: "bad set name", cfg: &config.HeaderModifier{Set: map[string]string{"": "v"}}, field: "set.", msg: "invalid header name"},
		{desc: "bad remove name", cfg: &config.HeaderModifier{Remove: []string{"ok", "x:y"}}, field: "remove[1]", msg: "invalid header name"},
		{desc: "value with newline", cfg: &config.HeaderModifier{Set: map[string]string{"X-A": "a\r\nX-Injected: 1"}}, field: "set.X-A", msg: "control character"},
		{desc: "value with NUL", cfg: &config.HeaderModifier{Add: map[string]string{"X-A": "a\x00"}}, field: "add.X-A", msg: "control character"},
		{desc: "duplicate by case", cfg: &config.HeaderModifier{Set: map[string]string{"X-A": "1", "x-a": "2"}}, field: "set.x-a", msg: "case-insensitive"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			m, err := NewHeaderModifier(tt.cfg)
			if err == nil {
				t.Fatalf("NewHeaderModifier = %v, want an error", m)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("error = %q (field %q), want field %q and a message containing %q", err, fe.Field, tt.field, tt.msg)
			}
		})
	}
}

func TestHeaderModifierRequest(t *testing.T) {
	tests := []struct {
		desc    string
		headers []string
		cfg     config.HeaderModifier
		names   []string
		want    []string
	}{
		{
			desc:    "set replaces every line",
			headers: []string{"X-A: 1", "X-A: 2", "X-B: keep"},
			cfg:     config.HeaderModifier{Set: map[string]string{"x-a": "new"}},
			names:   []string{"X-A", "X-B"},
			want:    []string{"X-A: new", "X-B: keep"},
		},
		{
			desc:    "set adds a missing header",
			headers: nil,
			cfg:     config.HeaderModifier{Set: map[string]string{"X-New": "v"}},
			names:   []string{"X-New"},
			want:    []string{"X-New: v"},
		},
		{
			desc:    "add appends a second line",
			headers: []string{"X-A: 1"},
			cfg:     config.HeaderModifier{Add: map[string]string{"X-A": "2"}},
			names:   []string{"X-A"},
			want:    []string{"X-A: 1", "X-A: 2"},
		},
		{
			desc:    "remove deletes every line, any case",
			headers: []string{"X-A: 1", "X-A: 2", "X-B: keep"},
			cfg:     config.HeaderModifier{Remove: []string{"x-a"}},
			names:   []string{"X-A", "X-B"},
			want:    []string{"X-B: keep"},
		},
		{
			desc:    "set runs after add",
			headers: []string{"X-A: old"},
			cfg:     config.HeaderModifier{Add: map[string]string{"X-A": "added"}, Set: map[string]string{"X-A": "set"}},
			names:   []string{"X-A"},
			want:    []string{"X-A: set"},
		},
		{
			desc:    "remove runs after add and set",
			headers: nil,
			cfg:     config.HeaderModifier{Add: map[string]string{"X-A": "1"}, Set: map[string]string{"X-B": "2"}, Remove: []string{"X-A", "X-B"}},
			names:   []string{"X-A", "X-B"},
			want:    nil,
		},
		{
			desc:    "set Host changes the Host header",
			headers: nil,
			cfg:     config.HeaderModifier{Set: map[string]string{"Host": "backend.internal:8080"}},
			names:   []string{"Host"},
			want:    []string{"Host: backend.internal:8080"},
		},
		{
			desc:    "empty modifier changes nothing",
			headers: []string{"X-A: 1"},
			cfg:     config.HeaderModifier{},
			names:   []string{"X-A"},
			want:    []string{"X-A: 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			m, err := NewHeaderModifier(&tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := newCtx("GET", "http://client.example/p", tt.headers...)
			if got := (RequestHeaders{m}).OnRequest(c); got != Continue {
				t.Fatalf("OnRequest = %s, want Continue", resultName(got))
			}
			got := requestLines(t, &c.Fast.Request.Header, tt.names...)
			if !equalLines(got, tt.want) {
				t.Errorf("headers = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRequestHeadersHostReachesUpstream checks that a Host set by the
// modifier is the one written upstream even when the URI was parsed before
// (fasthttp otherwise writes the parsed URI's host).
func TestRequestHeadersHostReachesUpstream(t *testing.T) {
	tests := []struct {
		desc     string
		parseURI bool
		wantLine string
	}{
		{desc: "URI parsed before", parseURI: true, wantLine: "Host: new.example\r\n"},
		{desc: "URI not parsed", parseURI: false, wantLine: "Host: new.example\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			m, err := NewHeaderModifier(&config.HeaderModifier{Set: map[string]string{"host": "new.example"}})
			if err != nil {
				t.Fatal(err)
			}
			c := newCtx("GET", "/p?q=1", "Host: old.example")
			if tt.parseURI {
				_ = c.Fast.Request.URI()
			}
			(RequestHeaders{m}).OnRequest(c)
			wire := wireRequest(t, &c.Fast.Request)
			if !strings.Contains(wire, tt.wantLine) || strings.Contains(wire, "old.example") {
				t.Errorf("request written upstream:\n%s\nwant it to contain %q and not the old host", wire, tt.wantLine)
			}
		})
	}
}

func TestHeaderModifierResponse(t *testing.T) {
	tests := []struct {
		desc    string
		headers map[string][]string
		cfg     config.HeaderModifier
		names   []string
		want    []string
	}{
		{
			desc:    "set, add and remove",
			headers: map[string][]string{"X-A": {"1", "2"}, "X-Gone": {"x"}, "X-Add": {"first"}},
			cfg: config.HeaderModifier{
				Set:    map[string]string{"X-A": "set"},
				Add:    map[string]string{"X-Add": "second"},
				Remove: []string{"x-gone"},
			},
			names: []string{"X-A", "X-Add", "X-Gone"},
			want:  []string{"X-A: set", "X-Add: first", "X-Add: second"},
		},
		{
			desc:    "several names apply in sorted order",
			headers: nil,
			cfg:     config.HeaderModifier{Set: map[string]string{"X-C": "c", "X-A": "a", "X-B": "b"}},
			names:   []string{"X-A", "X-B", "X-C"},
			want:    []string{"X-A: a", "X-B: b", "X-C: c"},
		},
		{
			desc:    "set Content-Type",
			headers: map[string][]string{"Content-Type": {"text/html"}},
			cfg:     config.HeaderModifier{Set: map[string]string{"Content-Type": "application/json"}},
			names:   []string{"Content-Type"},
			want:    []string{"Content-Type: application/json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			m, err := NewHeaderModifier(&tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := newCtx("GET", "/")
			for name, values := range tt.headers {
				for _, v := range values {
					c.Fast.Response.Header.Add(name, v)
				}
			}
			(ResponseHeaders{m}).OnResponse(c)
			got := responseLines(t, &c.Fast.Response.Header, tt.names...)
			if !equalLines(got, tt.want) {
				t.Errorf("headers = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHeaderModifierZeroAllocs(t *testing.T) {
	m, err := NewHeaderModifier(&config.HeaderModifier{
		Add:    map[string]string{"X-Trace": "on"},
		Set:    map[string]string{"X-Env": "prod", "Host": "backend.internal"},
		Remove: []string{"Cookie", "X-Debug"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := newCtx("GET", "/p", "Host: a.example", "X-Debug: 1", "Cookie: a=b")
	var template fasthttp.RequestHeader
	c.Fast.Request.Header.CopyTo(&template)
	rh := RequestHeaders{m}
	allocs := testing.AllocsPerRun(100, func() {
		template.CopyTo(&c.Fast.Request.Header)
		rh.OnRequest(c)
		c.Fast.Response.Header.Reset()
		m.ApplyResponse(&c.Fast.Response.Header)
	})
	if allocs != 0 {
		t.Errorf("allocations per request = %v, want 0", allocs)
	}
}

// TestHeaderEdit: each action against a header sent twice, absent, or
// present once; a set leaves the value alone, whatever was there.
func TestHeaderEdit(t *testing.T) {
	for _, tc := range []struct {
		action HeaderAction
		name   string
		want   []string
	}{
		{HeaderSet, "X-Twice", []string{"new"}},
		{HeaderSet, "X-None", []string{"new"}},
		{HeaderAppend, "X-Twice", []string{"a", "b", "new"}},
		{HeaderAddIfAbsent, "X-Twice", []string{"a", "b"}},
		{HeaderAddIfAbsent, "X-None", []string{"new"}},
		{HeaderSetIfPresent, "X-Twice", []string{"new"}},
		{HeaderSetIfPresent, "X-None", nil},
	} {
		var req fasthttp.RequestHeader
		var resp fasthttp.ResponseHeader
		for _, h := range []Headers{&req, &resp} {
			h.Add("X-Twice", "a")
			h.Add("X-Twice", "b")
			HeaderEdit{Name: tc.name, Value: "new", Action: tc.action}.Apply(h)
		}
		for i, got := range [][][]byte{req.PeekAll(tc.name), resp.PeekAll(tc.name)} {
			if len(got) != len(tc.want) {
				t.Errorf("action %d on %s (%d): %q, want %q", tc.action, tc.name, i, got, tc.want)
				continue
			}
			for j := range got {
				if string(got[j]) != tc.want[j] {
					t.Errorf("action %d on %s (%d): %q, want %q", tc.action, tc.name, i, got, tc.want)
				}
			}
		}
	}
}

// TestResponseEdits: the edits a policy kept are its own, applied once,
// and dropped with the request.
func TestResponseEdits(t *testing.T) {
	var fctx fasthttp.RequestCtx
	c := &Ctx{Fast: &fctx}
	a, b := new(int), new(int)
	c.KeepResponseEdit(a, HeaderEdit{Name: "X-A", Value: "1", Action: HeaderAppend})
	c.KeepResponseEdit(b, HeaderEdit{Name: "X-B", Value: "2"})
	c.ApplyResponseEdits(a)
	c.ApplyResponseEdits(a)
	if got := fctx.Response.Header.PeekAll("X-A"); len(got) != 1 || fctx.Response.Header.Peek("X-B") != nil {
		t.Fatalf("x-a %q, x-b %q: want a's edit alone, once", got, fctx.Response.Header.Peek("X-B"))
	}
	c.Reset()
	c.Fast = &fctx
	c.ApplyResponseEdits(b)
	if fctx.Response.Header.Peek("X-B") != nil {
		t.Fatal("an edit outlived its request")
	}
}

// TestSetHeaderReplacesEveryLine: SetRequestHeader and SetResponseHeader
// leave exactly one line of the name, whatever came before; a name on one
// line is replaced where it stands (the other fields keep their order),
// and cookies are replaced, not merged.
func TestSetHeaderReplacesEveryLine(t *testing.T) {
	tests := []struct {
		desc   string
		before []string // name: value lines, in order
		name   string
		want   []string // every line after the set, in order
	}{
		{desc: "absent", before: []string{"Via: a", "Via: b"}, name: "X-User",
			want: []string{"Via: a", "Via: b", "X-User: gw"}},
		{desc: "one line, in place", before: []string{"X-User: forged", "Via: a", "Via: b"}, name: "x-user",
			want: []string{"X-User: gw", "Via: a", "Via: b"}},
		{desc: "two lines", before: []string{"X-User: forged", "X-User: admin"}, name: "X-User",
			want: []string{"X-User: gw"}},
		{desc: "three lines, other case", before: []string{"x-user: a", "X-USER: b", "X-User: c"}, name: "x-user",
			want: []string{"X-User: gw"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var req fasthttp.RequestHeader
			var resp fasthttp.ResponseHeader
			for _, l := range tt.before {
				n, v, _ := strings.Cut(l, ": ")
				req.Add(n, v)
				resp.Add(n, v)
			}
			SetRequestHeader(&req, tt.name, "gw")
			if got := linesInOrder(req.Header()); !equalLines(got, tt.want) {
				t.Errorf("request: %q, want %q", got, tt.want)
			}
			SetResponseHeader(&resp, tt.name, "gw")
			if got := linesInOrder(resp.Header()); !equalLines(got, tt.want) {
				t.Errorf("response: %q, want %q", got, tt.want)
			}
			resp.Reset()
			for _, l := range tt.before {
				n, v, _ := strings.Cut(l, ": ")
				resp.Add(n, v)
			}
			SetResponseHeaderCanonical(&resp, []byte("X-User"), []byte("gw"))
			if got := linesInOrder(resp.Header()); !equalLines(got, tt.want) {
				t.Errorf("response (canonical): %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("cookies", func(t *testing.T) {
		var req fasthttp.RequestHeader
		req.Add("Cookie", "session=forged; theme=dark")
		SetRequestHeader(&req, "cookie", "session=gw")
		if got := linesInOrder(req.Header()); !equalLines(got, []string{"Cookie: session=gw"}) {
			t.Errorf("request: %q", got)
		}
		var resp fasthttp.ResponseHeader
		resp.Add("Set-Cookie", "a=1")
		resp.Add("Set-Cookie", "b=2")
		SetResponseHeader(&resp, "set-cookie", "c=3")
		if got := linesInOrder(resp.Header()); !equalLines(got, []string{"Set-Cookie: c=3"}) {
			t.Errorf("response: %q", got)
		}
		resp.Add("Set-Cookie", "d=4")
		SetResponseHeaderCanonical(&resp, []byte("Set-Cookie"), []byte("e=5"))
		if got := linesInOrder(resp.Header()); !equalLines(got, []string{"Set-Cookie: e=5"}) {
			t.Errorf("response (canonical): %q", got)
		}
	})
}

// linesInOrder is a header's field lines as written, in order (without the
// request or status line; the Date, Server and Content-Type a response
// is given by default left out).
func linesInOrder(raw []byte) []string {
	var out []string
	for i, line := range strings.Split(string(raw), "\r\n") {
		name, _, _ := strings.Cut(line, ":")
		switch {
		case i == 0, line == "", name == "Date", name == "Server", name == "Content-Type":
		default:
			out = append(out, line)
		}
	}
	return out
}

func TestSetHeaderZeroAllocs(t *testing.T) {
	var req fasthttp.RequestHeader
	var resp fasthttp.ResponseHeader
	value := []byte("gw")
	allocs := testing.AllocsPerRun(100, func() {
		req.Reset()
		req.Add("X-User", "a")
		req.Add("X-User", "b")
		SetRequestHeader(&req, "X-User", "gw")
		resp.Reset()
		resp.Add("X-Cache", "a")
		resp.Add("X-Cache", "b")
		SetResponseHeader(&resp, "X-Cache", "gw")
		SetResponseHeaderCanonical(&resp, []byte("X-Cache"), value)
	})
	if allocs != 0 {
		t.Errorf("allocations = %v, want 0", allocs)
	}
}
