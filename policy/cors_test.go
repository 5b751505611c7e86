package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
)

var corsResponseHeaders = []string{
	"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
	"Access-Control-Allow-Credentials", "Access-Control-Expose-Headers", "Access-Control-Max-Age", "Vary",
}

func TestNewCORSRefuses(t *testing.T) {
	tests := []struct {
		desc  string
		cfg   *config.CORS
		field string
	}{
		{desc: "no config", cfg: nil, field: ""},
		{desc: "null origin", cfg: &config.CORS{AllowOrigins: []string{"null"}}, field: "allowOrigins[0]"},
		{desc: "trailing slash", cfg: &config.CORS{AllowOrigins: []string{"https://a.example", "https://b.example/"}}, field: "allowOrigins[1]"},
		{desc: "other scheme", cfg: &config.CORS{AllowOrigins: []string{"ftp://a.example"}}, field: "allowOrigins[0]"},
		{desc: "no host", cfg: &config.CORS{AllowOrigins: []string{"https://"}}, field: "allowOrigins[0]"},
		{desc: "port zero", cfg: &config.CORS{AllowOrigins: []string{"https://a.example:0"}}, field: "allowOrigins[0]"},
		{desc: "bare host", cfg: &config.CORS{AllowOrigins: []string{"a.example"}}, field: "allowOrigins[0]"},
		{desc: "bad method", cfg: &config.CORS{AllowMethods: []string{"GET", "PO ST"}}, field: "allowMethods[1]"},
		{desc: "bad header", cfg: &config.CORS{AllowHeaders: []string{"x:y"}}, field: "allowHeaders[0]"},
		{desc: "bad expose header", cfg: &config.CORS{ExposeHeaders: []string{""}}, field: "exposeHeaders[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewCORS(tt.cfg)
			if err == nil {
				t.Fatalf("NewCORS = %v, want an error", p)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error = %v, want a *FieldError for field %q", err, tt.field)
			}
		})
	}
}

func TestCORS(t *testing.T) {
	maxAge := &config.Duration{Duration: 90 * time.Second}
	full := config.CORS{
		AllowCredentials: true,
		AllowOrigins:     []string{"https://app.example.com", "https://*.tenant.example", "http://localhost:3000"},
		AllowMethods:     []string{"GET", "POST"},
		AllowHeaders:     []string{"Content-Type", "Mcp-Session-Id"},
		ExposeHeaders:    []string{"Mcp-Session-Id", "X-Trace"},
		MaxAge:           maxAge,
	}
	wildcard := config.CORS{
		AllowOrigins: []string{"*"},
		AllowMethods: []string{"*"},
		AllowHeaders: []string{"*"},
	}
	wildcardCreds := wildcard
	wildcardCreds.AllowCredentials = true

	tests := []struct {
		desc    string
		cfg     config.CORS
		method  string
		headers []string
		// vary are the Vary lines of the backend response.
		vary       []string
		want       Result
		wantMarked bool // c.CORSOrigin set: the response gets CORS headers
		wantStatus int  // for Done
		// wantHeaders are the CORS response headers after OnRequest and
		// OnResponse (which runs on the policy's own answers too).
		wantHeaders []string
	}{
		{
			desc:   "no origin",
			cfg:    full,
			method: "POST", headers: nil,
			want:        Continue,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "no origin, any origin allowed",
			cfg:    wildcard,
			method: "GET", headers: nil,
			want:        Continue,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "no origin, Vary merged",
			cfg:    full,
			method: "GET", headers: nil,
			vary:        []string{"Accept-Encoding", " , Accept-Language"},
			want:        Continue,
			wantHeaders: []string{"Vary: Accept-Encoding, Accept-Language, Origin"},
		},
		{
			desc:   "simple request from an allowed origin",
			cfg:    full,
			method: "POST", headers: []string{"Origin: https://app.example.com"},
			want: Continue, wantMarked: true,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Origin: https://app.example.com",
				"Access-Control-Expose-Headers: mcp-session-id,x-trace",
				"Vary: Origin",
			},
		},
		{
			desc:   "simple request from a disallowed origin",
			cfg:    full,
			method: "GET", headers: []string{"Origin: https://evil.example"},
			want:        Continue,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "explicit default port matches the pattern without port",
			cfg:    full,
			method: "GET", headers: []string{"Origin: https://app.example.com:443"},
			want: Continue, wantMarked: true,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Origin: https://app.example.com:443",
				"Access-Control-Expose-Headers: mcp-session-id,x-trace",
				"Vary: Origin",
			},
		},
		{
			desc:   "other port does not match",
			cfg:    full,
			method: "GET", headers: []string{"Origin: http://localhost:3001"},
			want:        Continue,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "other scheme does not match",
			cfg:    full,
			method: "GET", headers: []string{"Origin: http://app.example.com"},
			want:        Continue,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "wildcard host matches a subdomain, any case",
			cfg:    full,
			method: "GET", headers: []string{"Origin: https://A.b.Tenant.example"},
			want: Continue, wantMarked: true,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Origin: https://A.b.Tenant.example",
				"Access-Control-Expose-Headers: mcp-session-id,x-trace",
				"Vary: Origin",
			},
		},
		{
			desc:   "wildcard host needs the dot",
			cfg:    full,
			method: "GET", headers: []string{"Origin: https://tenant.example"},
			want:        Continue,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "existing Vary listing Origin is kept as is",
			cfg:    full,
			method: "GET", headers: []string{"Origin: https://app.example.com"},
			vary: []string{"Accept-Encoding, origin"},
			want: Continue, wantMarked: true,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Origin: https://app.example.com",
				"Access-Control-Expose-Headers: mcp-session-id,x-trace",
				"Vary: Accept-Encoding, origin",
			},
		},
		{
			desc:   "existing Vary is merged with Origin",
			cfg:    full,
			method: "GET", headers: []string{"Origin: https://app.example.com"},
			vary: []string{"Accept-Encoding"},
			want: Continue, wantMarked: true,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Origin: https://app.example.com",
				"Access-Control-Expose-Headers: mcp-session-id,x-trace",
				"Vary: Accept-Encoding, Origin",
			},
		},
		{
			desc:   "Vary * is kept as is",
			cfg:    full,
			method: "GET", headers: []string{"Origin: https://evil.example"},
			vary:        []string{"*"},
			want:        Continue,
			wantHeaders: []string{"Vary: *"},
		},
		{
			desc:   "preflight from an allowed origin",
			cfg:    full,
			method: "OPTIONS", headers: []string{"Origin: http://localhost:3000", "Access-Control-Request-Method: POST"},
			want: Done, wantStatus: 200,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Headers: content-type,mcp-session-id",
				"Access-Control-Allow-Methods: GET,POST",
				"Access-Control-Allow-Origin: http://localhost:3000",
				"Access-Control-Expose-Headers: mcp-session-id,x-trace",
				"Access-Control-Max-Age: 90",
				"Vary: Origin",
			},
		},
		{
			// Browsers upper-case these six whatever a script wrote; other
			// methods (patch) are sent as written and keep their case.
			desc: "methods browsers upper-case are upper-cased",
			cfg: config.CORS{
				AllowOrigins: []string{"http://localhost:3000"},
				AllowMethods: []string{"put", "Delete", "get", "patch", "PROPFIND"},
			},
			method: "OPTIONS", headers: []string{"Origin: http://localhost:3000", "Access-Control-Request-Method: PUT"},
			want: Done, wantStatus: 200,
			wantHeaders: []string{
				"Access-Control-Allow-Methods: PUT,DELETE,GET,patch,PROPFIND",
				"Access-Control-Allow-Origin: http://localhost:3000",
				"Vary: Origin",
			},
		},
		{
			desc:   "preflight from a disallowed origin is answered without CORS headers",
			cfg:    full,
			method: "OPTIONS", headers: []string{"Origin: https://evil.example", "Access-Control-Request-Method: POST"},
			want: Done, wantStatus: 200,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "OPTIONS without request method from a disallowed origin is forwarded",
			cfg:    full,
			method: "OPTIONS", headers: []string{"Origin: https://evil.example"},
			want:        Continue,
			wantHeaders: []string{"Vary: Origin"},
		},
		{
			desc:   "OPTIONS without request method from an allowed origin is answered",
			cfg:    full,
			method: "OPTIONS", headers: []string{"Origin: https://app.example.com"},
			want: Done, wantStatus: 200,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Headers: content-type,mcp-session-id",
				"Access-Control-Allow-Methods: GET,POST",
				"Access-Control-Allow-Origin: https://app.example.com",
				"Access-Control-Expose-Headers: mcp-session-id,x-trace",
				"Access-Control-Max-Age: 90",
				"Vary: Origin",
			},
		},
		{
			desc:   "wildcards echo the preflight's method and headers",
			cfg:    wildcard,
			method: "OPTIONS", headers: []string{"Origin: https://any.example", "Access-Control-Request-Method: PUT", "Access-Control-Request-Headers: x-header-1 , ,X-Header-2,"},
			want: Done, wantStatus: 200,
			wantHeaders: []string{
				"Access-Control-Allow-Headers: x-header-1, X-Header-2",
				"Access-Control-Allow-Methods: PUT",
				"Access-Control-Allow-Origin: https://any.example",
				"Vary: Origin",
			},
		},
		{
			desc:   "wildcard headers answer * when none are requested",
			cfg:    wildcard,
			method: "OPTIONS", headers: []string{"Origin: https://any.example", "Access-Control-Request-Method: PUT"},
			want: Done, wantStatus: 200,
			wantHeaders: []string{
				"Access-Control-Allow-Headers: *",
				"Access-Control-Allow-Methods: PUT",
				"Access-Control-Allow-Origin: https://any.example",
				"Vary: Origin",
			},
		},
		{
			desc:   "wildcard headers with credentials answer nothing when none are requested",
			cfg:    wildcardCreds,
			method: "OPTIONS", headers: []string{"Origin: https://any.example", "Access-Control-Request-Method: PUT"},
			want: Done, wantStatus: 200,
			wantHeaders: []string{
				"Access-Control-Allow-Credentials: true",
				"Access-Control-Allow-Methods: PUT",
				"Access-Control-Allow-Origin: https://any.example",
				"Vary: Origin",
			},
		},
		{
			desc:   "any origin allows even an unparsable one",
			cfg:    wildcard,
			method: "GET", headers: []string{"Origin: null"},
			want: Continue, wantMarked: true,
			wantHeaders: []string{"Access-Control-Allow-Origin: null", "Vary: Origin"},
		},
		{
			desc:   "no allowed origins allows none",
			cfg:    config.CORS{AllowMethods: []string{"GET"}},
			method: "OPTIONS", headers: []string{"Origin: https://app.example.com", "Access-Control-Request-Method: GET"},
			want: Done, wantStatus: 200,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewCORS(&tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := newCtx(tt.method, "/mcp", tt.headers...)
			got := p.OnRequest(c)
			if got != tt.want {
				t.Fatalf("OnRequest = %s, want %s", resultName(got), resultName(tt.want))
			}
			if marked := c.CORS == p && len(c.CORSOrigin) > 0; marked != tt.wantMarked {
				t.Errorf("c.CORSOrigin set = %v, want %v", marked, tt.wantMarked)
			}
			resp := &c.Fast.Response
			if got == Done {
				if resp.StatusCode() != tt.wantStatus {
					t.Errorf("status = %d, want %d", resp.StatusCode(), tt.wantStatus)
				}
				if len(resp.Body()) != 0 {
					t.Errorf("body = %q, want none", resp.Body())
				}
				if wire := wireResponse(t, resp); strings.Contains(wire, "Content-Type") {
					t.Errorf("preflight answer has a Content-Type:\n%s", wire)
				}
			} else {
				// The backend answers.
				resp.SetStatusCode(200)
				for _, v := range tt.vary {
					resp.Header.Add("Vary", v)
				}
			}
			p.OnResponse(c) // the response policies run on either

			gotHeaders := responseLines(t, &resp.Header, corsResponseHeaders...)
			if !equalLines(gotHeaders, tt.wantHeaders) {
				t.Errorf("response headers = %q\nwant %q", gotHeaders, tt.wantHeaders)
			}
		})
	}
}

func TestCORSOnResponseIgnoresOtherRequests(t *testing.T) {
	a, err := NewCORS(&config.CORS{AllowOrigins: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewCORS(&config.CORS{AllowOrigins: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		mark *CORS
	}{
		{desc: "not marked", mark: nil},
		{desc: "marked by another policy", mark: b},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := newCtx("GET", "/", "Origin: https://x.example")
			c.CORS = tt.mark
			a.OnResponse(c)
			if got := responseLines(t, &c.Fast.Response.Header, corsResponseHeaders...); len(got) != 0 {
				t.Errorf("OnResponse added %q, want nothing", got)
			}
		})
	}
}

func TestCORSZeroAllocs(t *testing.T) {
	p, err := NewCORS(&config.CORS{
		AllowCredentials: true,
		AllowOrigins:     []string{"https://app.example.com", "https://*.example.org"},
		AllowMethods:     []string{"GET", "POST"},
		AllowHeaders:     []string{"*"},
		ExposeHeaders:    []string{"Mcp-Session-Id"},
		MaxAge:           &config.Duration{Duration: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		method  string
		headers []string
		vary    string // the backend's Vary
	}{
		{desc: "preflight", method: "OPTIONS", headers: []string{"Origin: https://a.example.org", "Access-Control-Request-Method: POST", "Access-Control-Request-Headers: content-type, mcp-session-id"}},
		{desc: "refused preflight", method: "OPTIONS", headers: []string{"Origin: https://evil.example", "Access-Control-Request-Method: POST"}},
		{desc: "simple request", method: "POST", headers: []string{"Origin: https://app.example.com"}},
		{desc: "simple request, Vary merged", method: "POST", headers: []string{"Origin: https://app.example.com"}, vary: "Accept-Encoding"},
		{desc: "disallowed origin", method: "POST", headers: []string{"Origin: https://evil.example"}},
		{desc: "no origin, Vary merged", method: "GET", vary: "Accept-Encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := newCtx(tt.method, "/mcp", tt.headers...)
			allocs := testing.AllocsPerRun(100, func() {
				c.CORS = nil
				c.Fast.Response.Reset()
				if p.OnRequest(c) == Continue && tt.vary != "" {
					c.Fast.Response.Header.Set("Vary", tt.vary)
				}
				p.OnResponse(c)
			})
			if allocs != 0 {
				t.Errorf("allocations per request = %v, want 0", allocs)
			}
		})
	}
}

func TestAppendHeaderList(t *testing.T) {
	tests := []struct {
		desc, in, want string
	}{
		{desc: "empty", in: "", want: ""},
		{desc: "one", in: "x-a", want: "x-a"},
		{desc: "trimmed and joined", in: " x-a ,x-b,  x-c ", want: "x-a, x-b, x-c"},
		{desc: "empty entries dropped", in: ",, x-a, ,", want: "x-a"},
		{desc: "only commas", in: " , , ", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := string(appendHeaderList(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("appendHeaderList(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzAppendHeaderList(f *testing.F) {
	f.Add("x-a, x-b")
	f.Add(" , ,x ,")
	f.Fuzz(func(t *testing.T, in string) {
		out := string(appendHeaderList(nil, []byte(in)))
		if out == "" {
			return
		}
		for _, item := range strings.Split(out, ", ") {
			if item == "" || strings.TrimSpace(item) != item || strings.Contains(item, ",") {
				t.Fatalf("appendHeaderList(%q) = %q: bad entry %q", in, out, item)
			}
		}
	})
}
