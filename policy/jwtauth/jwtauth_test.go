package jwtauth

import (
	"github.com/relaygate/gateway/policy/policytest"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

func singleJWT(iss *jwttest.Issuer, mode string, loc *config.AuthLocation) *config.JWTAuth {
	return &config.JWTAuth{Mode: mode, Location: loc, Single: true, Providers: []config.JWTProvider{{
		Issuer: iss.Iss, Audiences: []string{jwttest.DefaultAudience},
		JWKS: &config.JWKSource{Kind: config.JWKSInline, Inline: string(iss.JWKS())},
	}}}
}

// TestJWTAuthModes runs the policy on requests without, with an invalid and
// with a valid token in each mode.
func TestJWTAuthModes(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	valid := iss.Sign(iss.Claims("alice"))
	expired := iss.Claims("alice")
	expired["exp"] = 1000
	invalid := iss.Sign(expired)
	type want struct {
		result   policy.Result
		status   int    // when Done
		www      string // WWW-Authenticate when Done
		claims   bool
		stripped bool // Authorization removed
	}
	none := want{result: policy.Continue}
	missing := want{result: policy.Done, status: 401, www: `Bearer realm="gateway"`}
	refused := want{result: policy.Done, status: 401, www: `Bearer realm="gateway", error="invalid_token", error_description="token expired"`}
	ok := want{result: policy.Continue, claims: true, stripped: true}
	tests := []struct {
		mode                  string
		noToken, bad, goodTok want
	}{
		{"", missing, refused, ok},
		{"strict", missing, refused, ok},
		{"optional", none, refused, ok},
		{"permissive", none, none, ok},
	}
	for _, tc := range tests {
		p, err := New(singleJWT(iss, tc.mode, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			name  string
			token string
			want  want
		}{{"no token", "", tc.noToken}, {"invalid", invalid, tc.bad}, {"valid", valid, tc.goodTok}} {
			t.Run(tc.mode+"/"+r.name, func(t *testing.T) {
				var h []string
				if r.token != "" {
					h = []string{"Authorization", "Bearer " + r.token}
				}
				c := policytest.Ctx(policytest.NewRequest("GET", "/", h...))
				res := p.OnRequest(c)
				if res != r.want.result {
					t.Fatalf("result %v, want %v", res, r.want.result)
				}
				resp := &c.Fast.Response
				if res == policy.Done {
					if resp.StatusCode() != r.want.status {
						t.Fatalf("status %d, want %d", resp.StatusCode(), r.want.status)
					}
					if got := string(resp.Header.Peek("WWW-Authenticate")); got != r.want.www {
						t.Fatalf("WWW-Authenticate %q, want %q", got, r.want.www)
					}
					if !strings.HasPrefix(string(resp.Body()), "authentication failure: ") || len(resp.Body()) > 100 {
						t.Fatalf("body %q", resp.Body())
					}
					if strings.Contains(string(resp.Body()), r.token) && r.token != "" {
						t.Fatal("body echoes the token")
					}
				}
				if (c.Claims != nil) != r.want.claims {
					t.Fatalf("claims %v, want set=%v", c.Claims, r.want.claims)
				}
				if r.want.claims {
					if c.Claims["sub"] != "alice" || string(c.Token) != valid {
						t.Fatalf("claims %v token %q", c.Claims, c.Token)
					}
				} else if len(c.Token) != 0 {
					t.Fatal("token set without claims")
				}
				stripped := len(c.Fast.Request.Header.Peek("Authorization")) == 0
				if r.token != "" && stripped != r.want.stripped {
					t.Fatalf("Authorization stripped = %v, want %v", stripped, r.want.stripped)
				}
			})
		}
	}
}

// A second Authorization header, even beside a valid token, is refused as
// malformed: a backend might read the other one.
func TestJWTAuthRepeatedToken(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	valid := iss.Sign(iss.Claims("alice"))
	p, err := New(singleJWT(iss, "", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", "Bearer "+valid, "Authorization", "Bearer other"))
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 401 || c.Claims != nil {
		t.Fatalf("status %d claims %v, want a 401", c.Fast.Response.StatusCode(), c.Claims)
	}
	if got := string(c.Fast.Response.Header.Peek("WWW-Authenticate")); !strings.Contains(got, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate %q", got)
	}
}

// TestJWTAuthProxyAuthorization answers 407 for a token in
// Proxy-Authorization.
func TestJWTAuthProxyAuthorization(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	prefix := "Bearer "
	p, err := New(singleJWT(iss, "", &config.AuthLocation{Header: &config.HeaderLocation{Name: "Proxy-Authorization", Prefix: &prefix}}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 407 {
		t.Fatalf("status %d", c.Fast.Response.StatusCode())
	}
	if got := string(c.Fast.Response.Header.Peek("Proxy-Authenticate")); got != `Bearer realm="gateway"` {
		t.Fatalf("Proxy-Authenticate %q", got)
	}
	c = policytest.Ctx(policytest.NewRequest("GET", "/", "Proxy-Authorization", "Bearer "+iss.Sign(iss.Claims("a"))))
	if p.OnRequest(c) != policy.Continue || c.Claims == nil {
		t.Fatal("valid proxy token refused")
	}
}

// TestJWTAuthTokenReusesCapacity: Token keeps its buffer across requests.
func TestJWTAuthTokenReusesCapacity(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	p, err := New(singleJWT(iss, "", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := iss.Sign(iss.Claims("a"))
	c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", "Bearer "+tok))
	c.Token = make([]byte, 0, 4096)
	buf := c.Token[:1]
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("refused")
	}
	if &buf[0] != &c.Token[0] {
		t.Fatal("Token was reallocated")
	}
}
