package policy

import (
	"errors"
	"testing"

	"github.com/relaygate/gateway/config"
)

func TestNewCSRFRefuses(t *testing.T) {
	tests := []struct {
		desc   string
		origin string
	}{
		{desc: "no scheme", origin: "app.example.com"},
		{desc: "empty host", origin: "https://"},
		{desc: "trailing slash", origin: "https://app.example.com/"},
		{desc: "path", origin: "https://app.example.com/login"},
		{desc: "query", origin: "https://app.example.com?x"},
		{desc: "bad port", origin: "https://app.example.com:99999"},
		{desc: "empty port", origin: "https://app.example.com:"},
		{desc: "unbracketed IPv6", origin: "http://::1:8080"},
		{desc: "space", origin: "https://app example.com"},
		{desc: "bad scheme", origin: "1http://app.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewCSRF(&config.CSRF{AdditionalOrigins: []string{"https://ok.example", tt.origin}})
			if err == nil {
				t.Fatalf("NewCSRF = %v, want an error", p)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "additionalOrigins[1]" {
				t.Errorf("error = %v, want a *FieldError for additionalOrigins[1]", err)
			}
		})
	}
	if _, err := NewCSRF(nil); err == nil {
		t.Error("NewCSRF(nil) succeeded, want an error")
	}
}

func TestCSRF(t *testing.T) {
	p, err := NewCSRF(&config.CSRF{AdditionalOrigins: []string{"https://Trusted.example", "http://[::1]:8080", "chrome-extension://abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		method  string
		scheme  string
		headers []string
		want    Result
	}{
		{desc: "GET passes", method: "GET", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site", "Origin: https://evil.example"}, want: Continue},
		{desc: "HEAD passes", method: "HEAD", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site"}, want: Continue},
		{desc: "OPTIONS passes", method: "OPTIONS", headers: []string{"Host: gw.example", "Origin: https://evil.example"}, want: Continue},
		{desc: "POST without browser headers passes", method: "POST", headers: []string{"Host: gw.example"}, want: Continue},
		{desc: "same-origin passes", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: same-origin", "Origin: https://evil.example"}, want: Continue},
		{desc: "none passes", method: "DELETE", headers: []string{"Host: gw.example", "Sec-Fetch-Site: none"}, want: Continue},
		{desc: "cross-site rejected", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site", "Origin: http://gw.example"}, want: Done},
		{desc: "same-site rejected", method: "PUT", headers: []string{"Host: gw.example", "Sec-Fetch-Site: same-site", "Origin: https://sub.gw.example"}, want: Done},
		{desc: "cross-site without origin rejected", method: "PATCH", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site"}, want: Done},
		{desc: "cross-site from a trusted origin passes", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site", "Origin: https://trusted.example"}, want: Continue},
		{desc: "cross-site from a trusted origin passes, any case", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site", "Origin: HTTPS://TRUSTED.EXAMPLE"}, want: Continue},
		{desc: "trusted IPv6 origin", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site", "Origin: http://[::1]:8080"}, want: Continue},
		{desc: "trusted extension origin", method: "POST", headers: []string{"Host: gw.example", "Origin: chrome-extension://abcdef"}, want: Continue},
		{desc: "cross-site with null origin rejected", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site", "Origin: null"}, want: Done},
		{desc: "unknown Sec-Fetch-Site rejected", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: Same-Origin"}, want: Done},
		{desc: "origin matching host passes", method: "POST", headers: []string{"Host: gw.example:8080", "Origin: http://gw.example:8080"}, want: Continue},
		{desc: "origin matching host passes, any case", method: "POST", headers: []string{"Host: GW.example", "Origin: http://gw.EXAMPLE"}, want: Continue},
		{desc: "origin with another port rejected", method: "POST", headers: []string{"Host: gw.example:8080", "Origin: http://gw.example"}, want: Done},
		{desc: "origin with another scheme rejected", method: "POST", headers: []string{"Host: gw.example", "Origin: https://gw.example"}, want: Done},
		{desc: "origin matches on https when connected with TLS", method: "POST", scheme: "https", headers: []string{"Host: gw.example", "Origin: https://gw.example"}, want: Continue},
		{desc: "other origin rejected", method: "POST", headers: []string{"Host: gw.example", "Origin: https://evil.example"}, want: Done},
		{desc: "null origin without Sec-Fetch-Site rejected", method: "POST", headers: []string{"Host: gw.example", "Origin: null"}, want: Done},
		{desc: "null origin rejected, any case", method: "POST", headers: []string{"Host: gw.example", "Origin: NULL"}, want: Done},
		{desc: "other origin from trusted list passes", method: "POST", headers: []string{"Host: gw.example", "Origin: https://trusted.example"}, want: Continue},
		{desc: "origin prefix of host rejected", method: "POST", headers: []string{"Host: gw.example", "Origin: http://gw.exampl"}, want: Done},
		{desc: "origin with control byte rejected", method: "POST", headers: []string{"Host: gw.example", "Origin: http://gw.example\x01"}, want: Done},
		{desc: "origin with non-ASCII byte rejected", method: "POST", headers: []string{"Host: gw.example", "Sec-Fetch-Site: same-origin", "Origin: http://gw.exämple"}, want: Done},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := newCtx(tt.method, "/api", tt.headers...)
			if tt.scheme != "" {
				c.Scheme = []byte(tt.scheme)
			}
			got := p.OnRequest(c)
			if got != tt.want {
				t.Fatalf("OnRequest = %s, want %s", resultName(got), resultName(tt.want))
			}
			resp := &c.Fast.Response
			if got == Done {
				if resp.StatusCode() != 403 || string(resp.Body()) != "CSRF validation failed" {
					t.Errorf("answer = %d %q, want 403 %q", resp.StatusCode(), resp.Body(), "CSRF validation failed")
				}
			} else if len(resp.Body()) != 0 {
				t.Errorf("passed request has a response body %q", resp.Body())
			}
		})
	}
}

// TestCSRFTrustedNullOrigin: "null" in additionalOrigins lets the opaque
// origin through (a desktop app's file: pages), which is otherwise refused.
func TestCSRFTrustedNullOrigin(t *testing.T) {
	p, err := NewCSRF(&config.CSRF{AdditionalOrigins: []string{"null"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, headers := range [][]string{
		{"Host: gw.example", "Origin: null"},
		{"Host: gw.example", "Origin: null", "Sec-Fetch-Site: cross-site"},
	} {
		if got := p.OnRequest(newCtx("POST", "/api", headers...)); got != Continue {
			t.Errorf("%v: %s, want Continue", headers, resultName(got))
		}
	}
	if got := p.OnRequest(newCtx("POST", "/api", "Host: gw.example", "Origin: https://evil.example")); got != Done {
		t.Errorf("another origin: %s, want Done", resultName(got))
	}
}

func TestCSRFZeroAllocs(t *testing.T) {
	p, err := NewCSRF(&config.CSRF{AdditionalOrigins: []string{"https://trusted.example"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		headers []string
	}{
		{desc: "same origin", headers: []string{"Host: gw.example", "Origin: http://gw.example"}},
		{desc: "sec-fetch-site", headers: []string{"Host: gw.example", "Sec-Fetch-Site: same-origin"}},
		{desc: "rejected", headers: []string{"Host: gw.example", "Origin: https://evil.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := newCtx("POST", "/api", tt.headers...)
			allocs := testing.AllocsPerRun(100, func() {
				c.Fast.Response.Reset()
				p.OnRequest(c)
			})
			if allocs != 0 {
				t.Errorf("allocations per request = %v, want 0", allocs)
			}
		})
	}
}

// FuzzCSRFAdditionalOrigin checks that any accepted additional origin is
// trusted when a browser sends exactly it.
func FuzzCSRFAdditionalOrigin(f *testing.F) {
	for _, s := range []string{"https://a.example", "http://[::1]:8080", "chrome-extension://id", "https://a.example/", "x://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, origin string) {
		p, err := NewCSRF(&config.CSRF{AdditionalOrigins: []string{origin}})
		if err != nil {
			return
		}
		if !p.trusted([]byte(origin)) {
			t.Fatalf("accepted additional origin %q is not trusted", origin)
		}
	})
}
