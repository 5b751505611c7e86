package policy

import (
	"strings"

	"github.com/relaygate/gateway/config"
	"github.com/valyala/fasthttp"
)

// CSRF rejects cross-origin state-changing requests from browsers, following
// agentgateway's csrf policy:
//
//  1. GET, HEAD and OPTIONS pass.
//  2. With Sec-Fetch-Site: "same-origin" and "none" pass; any other value
//     passes only when Origin is one of additionalOrigins.
//  3. Without Sec-Fetch-Site: a request without Origin passes; one whose
//     Origin equals the request's own origin, "<scheme>://<Host header>"
//     with the scheme the client connected with, passes; one whose Origin
//     is in additionalOrigins passes.
//  4. Everything else, and an Origin that is not a valid header value, is
//     answered 403 "CSRF validation failed" (Done).
//
// The opaque origin "null" is a cross origin, as for Go's
// CrossOriginProtection: a browser sends it from a sandboxed frame, a
// data: or file: page, or after a cross-origin redirect, so an attacker's
// page can send it at will, and browsers without Sec-Fetch-Site (Safari
// before 16.4) send nothing else. agentgateway takes "null" for no Origin
// and lets such a request through; here it passes only when
// additionalOrigins names "null" (a desktop app's file: pages, say).
//
// Origins compare ignoring ASCII case; agentgateway compares them exactly,
// which differs only for upper-case origins, which browsers do not send.
type CSRF struct {
	additional [][]byte // lower-case "<scheme>://<host>[:<port>]"
}

var (
	hdrSecFetchSite     = []byte("Sec-Fetch-Site")
	csrfRejection       = []byte("CSRF validation failed")
	contentTypeText     = []byte("text/plain; charset=utf-8")
	hdrContentType      = []byte("Content-Type")
	valueSameOrigin     = []byte("same-origin")
	valueNone           = []byte("none")
	valueNullOrigin     = []byte("null")
	defaultScheme       = []byte("http")
	schemeSeparatorText = "://"
)

// NewCSRF compiles a CSRF policy. additionalOrigins entries must have the
// form of an Origin header, "<scheme>://<host>[:<port>]", with nothing after
// the host or port; a trailing "/" is refused because it would never match.
func NewCSRF(cfg *config.CSRF) (*CSRF, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	p := &CSRF{}
	for i, s := range cfg.AdditionalOrigins {
		if strings.EqualFold(s, string(valueNullOrigin)) {
			p.additional = append(p.additional, valueNullOrigin) // trusted on purpose
			continue
		}
		if msg := checkOriginForm(s); msg != "" {
			return nil, fieldErrorf(indexed("additionalOrigins", i), "invalid origin %q: %s", s, msg)
		}
		p.additional = append(p.additional, []byte(strings.ToLower(s)))
	}
	return p, nil
}

// checkOriginForm validates "<scheme>://<host>[:<port>]" for any scheme.
func checkOriginForm(s string) string {
	const form = "must be <scheme>://<host>[:<port>], for example https://app.example.com"
	scheme, rest, ok := strings.Cut(s, schemeSeparatorText)
	if !ok || !validScheme(scheme) {
		return form
	}
	if rest == "" {
		return form
	}
	if strings.ContainsAny(rest, "/?#") {
		return form + " (no path, query or trailing slash)"
	}
	if msg := checkHostPort(rest); msg != "" {
		return msg
	}
	return ""
}

// validScheme reports whether s is an RFC 3986 scheme.
func validScheme(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// OnRequest lets the request through (Continue) or rejects it (Done).
func (p *CSRF) OnRequest(c *Ctx) Result {
	h := &c.Fast.Request.Header
	if h.IsGet() || h.IsHead() || h.IsOptions() {
		return Continue
	}
	o := h.PeekBytes(hdrOrigin)
	if !validFieldValue(o) {
		return p.reject(c)
	}
	if site := h.PeekBytes(hdrSecFetchSite); len(site) > 0 {
		if string(site) == string(valueSameOrigin) || string(site) == string(valueNone) || p.trusted(o) {
			return Continue
		}
		return p.reject(c)
	}
	if len(o) == 0 || p.sameOrigin(c, o) || p.trusted(o) {
		return Continue
	}
	return p.reject(c)
}

// sameOrigin reports whether o is "<scheme>://<host header>".
func (p *CSRF) sameOrigin(c *Ctx, o []byte) bool {
	scheme := c.Scheme
	if len(scheme) == 0 {
		scheme = defaultScheme
	}
	n := len(scheme) + len(schemeSeparatorText)
	host := c.Fast.Request.Header.Host()
	return len(o) == n+len(host) && len(host) > 0 &&
		equalFoldASCII(o[:len(scheme)], scheme) &&
		string(o[len(scheme):n]) == schemeSeparatorText &&
		equalFoldASCII(o[n:], host)
}

// trusted reports whether o is one of the additional origins.
func (p *CSRF) trusted(o []byte) bool {
	if len(o) == 0 {
		return false
	}
	for _, a := range p.additional {
		if equalFoldASCII(a, o) {
			return true
		}
	}
	return false
}

func (p *CSRF) reject(c *Ctx) Result {
	answerText(c, fasthttp.StatusForbidden, csrfRejection)
	return Done
}

// answerText makes the response status with a short plain-text body.
func answerText(c *Ctx, status int, body []byte) {
	resp := &c.Fast.Response
	resp.SetStatusCode(status)
	resp.Header.SetCanonical(hdrContentType, contentTypeText)
	resp.SetBody(body)
}
