package policy

import (
	"strings"

	"github.com/relaygate/gateway/config"
	"github.com/valyala/fasthttp"
)

// Redirect answers with a redirect built from the request URL
// (`requestRedirect`), as the Gateway API's RequestRedirect filter:
//
//   - scheme: the configured one, else the scheme the client connected with;
//   - authority: kept from the Host header, or `full` (host:port), `host`
//     (replaces the host name, keeping the request's port unless a scheme is
//     configured) or `port` (replaces the port). When a scheme is configured
//     and neither full nor port is, the port is the scheme's well-known one,
//     per the Gateway API (agentgateway keeps the request's port there). A
//     port that is the scheme's default (http 80, https 443) is left out;
//   - path: kept, replaced (`full`), or its matched prefix replaced
//     (`prefix`, see the Gateway API trailing-slash rules on appendPath);
//   - the query string is kept.
//
// The answer has the configured status (default 302), a Location header and
// no body. A prefix redirect on a request that did not match by prefix is
// answered 500 as agentgateway does (a route with no prefix match at all is
// refused at load: the server's checkPrefixMatches); a request without a
// host, 400.
type Redirect struct {
	scheme    []byte // nil: keep
	authority hostRewrite
	path      pathRewrite
	status    int
}

var (
	hdrLocation       = []byte("Location")
	msgRedirectFailed = []byte("request redirect: cannot build the redirect URL for this request")
	msgRedirectNoHost = []byte("request redirect: the request has no Host to redirect to")
)

// NewRedirect compiles a redirect.
func NewRedirect(cfg *config.RequestRedirect) (*Redirect, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	p := &Redirect{status: fasthttp.StatusFound}
	if cfg.Scheme != "" {
		// Any URI scheme, as agentgateway takes (ws, wss, ...), lower-cased.
		if !validScheme(cfg.Scheme) {
			return nil, fieldErrorf("scheme", "invalid scheme %q", cfg.Scheme)
		}
		p.scheme = []byte(strings.ToLower(cfg.Scheme))
	}
	if cfg.Status != nil {
		s := *cfg.Status
		if s < 300 || s > 399 {
			return nil, fieldErrorf("status", "must be a redirect status (300..399), not %d", s)
		}
		p.status = s
	}
	var err error
	if p.authority, err = compileHostRewrite("authority", cfg.Authority); err != nil {
		return nil, err
	}
	if p.path, err = compilePathRewrite("path", cfg.Path); err != nil {
		return nil, err
	}
	return p, nil
}

// OnRequest writes the redirect into c.Fast.Response and returns Done.
func (p *Redirect) OnRequest(c *Ctx) Result {
	req := &c.Fast.Request
	scheme := p.scheme
	if scheme == nil {
		scheme = c.Scheme
		if len(scheme) == 0 {
			scheme = defaultScheme
		}
	}
	authority := req.Header.Host()
	if len(authority) == 0 {
		authority = req.URI().Host()
	}
	if len(authority) == 0 && p.authority.kind != hostFull {
		// An HTTP/1.0 request may come without Host: there is no
		// authority to keep, and the client's request is what lacks it.
		answerText(c, fasthttp.StatusBadRequest, msgRedirectNoHost)
		return Done
	}
	host, port, ok := splitAuthority(authority)
	if !ok {
		host, port = authority, nil
	}
	switch p.authority.kind {
	case hostFull:
		host, port = p.authority.host, p.authority.port
	case hostName:
		host = p.authority.host
	case hostPort:
		port = p.authority.port
	}
	if p.scheme != nil && (p.authority.kind == hostKeep || p.authority.kind == hostName) {
		port = nil
	}

	b := c.Scratch()
	b = append(b, scheme...)
	b = append(b, schemeSeparatorText...)
	b = appendAuthority(b, host, port, scheme)
	path := c.Path
	if path == nil {
		path = req.URI().PathOriginal()
	}
	b, ok = p.path.appendPath(b, path, c.MatchedPrefix)
	if !ok {
		c.KeepScratch(b)
		answerText(c, fasthttp.StatusInternalServerError, msgRedirectFailed)
		return Done
	}
	b = appendQuery(b, req.Header.RequestURI())

	answerEmpty(c, p.status)
	c.Fast.Response.Header.SetCanonical(hdrLocation, b)
	c.KeepScratch(b)
	return Done
}
