package policy

import (
	"github.com/relaygate/gateway/config"
	"github.com/valyala/fasthttp"
)

// URLRewrite rewrites the request's path and authority before it is forwarded
// (`urlRewrite`), with agentgateway's semantics:
//
//   - path: `full` replaces the whole path, `prefix` replaces the matched
//     prefix (Gateway API trailing-slash rules, see appendPath); the query
//     string is kept;
//   - authority: `full` sets the Host header to host:port as given, `host`
//     sets it to the name alone (dropping the request's port), `port` replaces
//     the port, leaving it out when it is the default of the scheme the client
//     connected with; "auto" and "none" leave the Host header alone here.
//
// The rewritten target is stored in origin form ("/path?query"), c.Path is
// updated to the new path, and the request's parsed URI is invalidated so it
// is derived again from the new target and Host. A prefix rewrite on a
// request that did not match by prefix is answered 500 (Done), as agentgateway
// does (a route with no prefix match at all is refused at load: the server's
// checkPrefixMatches); otherwise OnRequest returns Continue.
type URLRewrite struct {
	authority     hostRewrite
	path          pathRewrite
	setsAuthority bool
}

var msgRewriteFailed = []byte("url rewrite: the request path does not match the route's path prefix")

// NewURLRewrite compiles a URL rewrite.
func NewURLRewrite(cfg *config.URLRewrite) (*URLRewrite, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	p := &URLRewrite{}
	var err error
	if p.authority, err = compileHostRewrite("authority", cfg.Authority); err != nil {
		return nil, err
	}
	if p.path, err = compilePathRewrite("path", cfg.Path); err != nil {
		return nil, err
	}
	p.setsAuthority = cfg.Authority != nil && !cfg.Authority.Auto
	return p, nil
}

// SetsAuthority reports whether the rewrite decides the upstream Host itself
// (authority `full`, `host`, `port` or "none"); OnRequest then sets
// c.HostRewritten so the proxy does not replace Host with a hostname backend's
// name. "auto" and no authority leave that to the proxy, as agentgateway's
// AutoHostname does.
func (p *URLRewrite) SetsAuthority() bool { return p.setsAuthority }

// OnRequest rewrites the request in place.
func (p *URLRewrite) OnRequest(c *Ctx) Result {
	if p.setsAuthority {
		c.HostRewritten = true
	}
	if p.path.kind == pathKeep && p.authority.kind == hostKeep {
		return Continue
	}
	req := &c.Fast.Request
	path := c.Path
	if path == nil {
		path = req.URI().PathOriginal()
	}
	b, ok := p.path.appendPath(c.Scratch(), path, c.MatchedPrefix)
	if !ok {
		c.KeepScratch(b)
		answerText(c, fasthttp.StatusInternalServerError, msgRewriteFailed)
		return Done
	}
	pathLen := len(b)
	b = appendQuery(b, req.Header.RequestURI())
	targetLen := len(b)

	if p.authority.kind != hostKeep {
		var changed bool
		b, changed = p.appendHost(b, c)
		if changed {
			req.Header.SetHostBytes(b[targetLen:])
		}
	}
	req.SetRequestURIBytes(b[:targetLen])
	c.Path = req.Header.RequestURI()[:pathLen]
	c.KeepScratch(b)
	return Continue
}

// appendHost appends the new Host header value; changed is false when the
// Host header stays as it is.
func (p *URLRewrite) appendHost(b []byte, c *Ctx) ([]byte, bool) {
	switch p.authority.kind {
	case hostFull:
		b = append(b, p.authority.host...)
		if p.authority.port != nil {
			b = append(b, ':')
			b = append(b, p.authority.port...)
		}
		return b, true
	case hostName:
		return append(b, p.authority.host...), true
	}
	// hostPort
	req := &c.Fast.Request
	orig := req.Header.Host()
	if len(orig) == 0 {
		orig = req.URI().Host()
	}
	host, port, ok := splitAuthority(orig)
	if !ok {
		host, port = orig, nil
	}
	scheme := c.Scheme
	if len(scheme) == 0 {
		scheme = defaultScheme
	}
	want := p.authority.port
	if isDefaultPort(want, scheme) {
		if port == nil {
			return b, false
		}
		return append(b, host...), true
	}
	if cur, ok := parsePort(port); ok {
		if w, _ := parsePort(want); w == cur {
			return b, false
		}
	}
	b = append(b, host...)
	b = append(b, ':')
	return append(b, want...), true
}
