package policy

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config"
	"github.com/valyala/fasthttp"
)

// CORS answers preflight requests and decorates responses with CORS headers.
// It follows agentgateway, which follows Envoy with forwardNotMatchingPreflights
// false:
//
//   - a request without Origin is left alone;
//   - a preflight (OPTIONS with Origin and a non-empty
//     Access-Control-Request-Method) from an origin that is not allowed is
//     answered 200 without CORS headers and never forwarded;
//   - any OPTIONS request from an allowed origin is answered 200 with
//     Access-Control-Allow-Origin (the request's origin), -Allow-Methods,
//     -Allow-Headers, -Max-Age, -Allow-Credentials and -Expose-Headers;
//   - any other request from an allowed origin is forwarded, and its response
//     gets Access-Control-Allow-Origin, -Allow-Credentials and -Expose-Headers;
//   - a non-preflight request from an origin that is not allowed is forwarded
//     untouched.
//
// allowOrigins entries are "*" (any origin) or "<scheme>://<host>[:<port>]"
// with scheme http or https, where the host may contain '*' wildcards
// ("https://*.example.com"); a missing port means the scheme's default, and an
// explicit port must match exactly. "*" in allowMethods or allowHeaders echoes
// what the preflight asks for (or answers "*" when it asks nothing and
// credentials are not allowed). The allowed origin is always echoed, never
// "*". So whenever some origin is allowed, every answer depends on the
// request's Origin, and every response of the policy's requests gets
// "Vary: Origin" (an addition to agentgateway, for caches): those with
// CORS headers, and those without (no Origin, an origin not allowed, a
// preflight refused), lest a shared cache hand one of those to an allowed
// origin.
type CORS struct {
	anyOrigin   bool
	origins     []origin
	credentials bool
	// varies: some origin is allowed, so answers depend on Origin.
	varies bool

	methods list
	headers list
	expose  []byte // nil: none
	maxAge  []byte // nil: none
}

// list is a compiled allowMethods/allowHeaders value.
type list struct {
	wildcard bool
	joined   []byte // nil: none
}

// Header names and values the policy writes, in canonical form.
var (
	hdrOrigin            = []byte("Origin")
	hdrACRequestMethod   = []byte("Access-Control-Request-Method")
	hdrACRequestHeaders  = []byte("Access-Control-Request-Headers")
	hdrACAllowOrigin     = []byte("Access-Control-Allow-Origin")
	hdrACAllowMethods    = []byte("Access-Control-Allow-Methods")
	hdrACAllowHeaders    = []byte("Access-Control-Allow-Headers")
	hdrACAllowCreds      = []byte("Access-Control-Allow-Credentials")
	hdrACExposeHeaders   = []byte("Access-Control-Expose-Headers")
	hdrACMaxAge          = []byte("Access-Control-Max-Age")
	hdrVary              = []byte("Vary")
	valueTrue            = []byte("true")
	valueStar            = []byte("*")
	valueOrigin          = []byte("Origin")
	headerListSeparators = []byte(", ")
)

// NewCORS compiles a CORS policy. It refuses origins that cannot match any
// browser origin (other schemes, paths, "null") and invalid method or header
// names, naming the offending entry.
func NewCORS(cfg *config.CORS) (*CORS, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	p := &CORS{credentials: cfg.AllowCredentials}
	for i, s := range cfg.AllowOrigins {
		if s == "*" {
			p.anyOrigin = true
			continue
		}
		o, ok := parseOrigin([]byte(strings.ToLower(s)), true)
		if !ok {
			return nil, fieldErrorf(indexed("allowOrigins", i),
				"invalid origin %q: must be \"*\" or <scheme>://<host>[:<port>] with scheme http or https and nothing after the host or port (for example https://app.example.com or https://*.example.com)", s)
		}
		p.origins = append(p.origins, o)
	}
	if p.anyOrigin {
		p.origins = nil
	}
	p.varies = p.anyOrigin || len(p.origins) > 0
	var err error
	// Methods are case-sensitive and keep their case, except the six that
	// browsers always send upper-cased (the Fetch standard normalizes
	// DELETE, GET, HEAD, OPTIONS, POST and PUT written in any case): a
	// browser's PUT would never match "put", which the author meant.
	// Header names are lower-cased as agentgateway does.
	if p.methods, err = compileList("allowMethods", cfg.AllowMethods, fetchNormalizedMethod); err != nil {
		return nil, err
	}
	if p.headers, err = compileList("allowHeaders", cfg.AllowHeaders, strings.ToLower); err != nil {
		return nil, err
	}
	expose, err := compileList("exposeHeaders", cfg.ExposeHeaders, strings.ToLower)
	if err != nil {
		return nil, err
	}
	p.expose = expose.joined
	if expose.wildcard {
		p.expose = valueStar
	}
	if cfg.MaxAge != nil {
		p.maxAge = strconv.AppendInt(nil, int64(cfg.MaxAge.Seconds()), 10)
	}
	return p, nil
}

// fetchNormalizedMethod upper-cases the methods browsers send upper-cased
// whatever case a script wrote them in (Fetch, "normalize a method");
// others keep their case.
func fetchNormalizedMethod(m string) string {
	switch u := strings.ToUpper(m); u {
	case "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT":
		return u
	}
	return m
}

// compileList compiles an allow or expose list, each name put in its
// canonical form by canon.
func compileList(field string, in []string, canon func(string) string) (list, error) {
	var l list
	var joined []byte
	for i, s := range in {
		if s == "*" {
			l.wildcard = true
			continue
		}
		if !validToken(s) {
			return l, fieldErrorf(indexed(field, i), "invalid name %q", s)
		}
		if len(joined) > 0 {
			joined = append(joined, ',')
		}
		s = canon(s)
		joined = append(joined, s...)
	}
	if !l.wildcard {
		l.joined = joined
	}
	return l, nil
}

// allowed reports whether the Origin header value is allowed.
func (p *CORS) allowed(o []byte) bool {
	if p.anyOrigin {
		return true
	}
	ro, ok := parseOrigin(o, false)
	if !ok {
		return false
	}
	for i := range p.origins {
		if p.origins[i].matches(&ro) {
			return true
		}
	}
	return false
}

// OnRequest answers preflights (Done) and marks the request for response
// decoration by setting c.CORS, with c.CORSOrigin the origin when it is
// allowed (Continue). Every answer is marked, when answers depend on
// Origin, so that the response gets "Vary: Origin" even without CORS
// headers.
func (p *CORS) OnRequest(c *Ctx) Result {
	if p.varies {
		c.CORS = p
	}
	c.CORSOrigin = c.CORSOrigin[:0]
	h := &c.Fast.Request.Header
	o := h.PeekBytes(hdrOrigin)
	if len(o) == 0 {
		return Continue
	}
	options := h.IsOptions()
	if !p.allowed(o) {
		if options && len(h.PeekBytes(hdrACRequestMethod)) > 0 {
			answerEmpty(c, fasthttp.StatusOK)
			if p.varies {
				addVaryOrigin(c, &c.Fast.Response.Header)
			}
			return Done
		}
		return Continue
	}
	if options {
		p.preflight(c, o)
		return Done
	}
	c.CORSOrigin = append(c.CORSOrigin, o...)
	return Continue
}

// preflight answers an OPTIONS request from the allowed origin o.
func (p *CORS) preflight(c *Ctx, o []byte) {
	req := &c.Fast.Request.Header
	resp := &c.Fast.Response
	answerEmpty(c, fasthttp.StatusOK)
	h := &resp.Header
	h.SetCanonical(hdrACAllowOrigin, o)
	switch {
	case p.methods.wildcard:
		if m := bytes.TrimSpace(req.PeekBytes(hdrACRequestMethod)); len(m) > 0 && validFieldValue(m) {
			h.SetCanonical(hdrACAllowMethods, m)
		} else if !p.credentials {
			h.SetCanonical(hdrACAllowMethods, valueStar)
		}
	case p.methods.joined != nil:
		h.SetCanonical(hdrACAllowMethods, p.methods.joined)
	}
	switch {
	case p.headers.wildcard:
		buf := appendHeaderList(c.Scratch(), req.PeekBytes(hdrACRequestHeaders))
		if len(buf) > 0 && validFieldValue(buf) {
			h.SetCanonical(hdrACAllowHeaders, buf)
		} else if !p.credentials {
			h.SetCanonical(hdrACAllowHeaders, valueStar)
		}
		c.KeepScratch(buf)
	case p.headers.joined != nil:
		h.SetCanonical(hdrACAllowHeaders, p.headers.joined)
	}
	if p.maxAge != nil {
		h.SetCanonical(hdrACMaxAge, p.maxAge)
	}
	p.decorate(c, h)
}

// decorate adds the headers every allowed response carries besides the
// origin, replacing every value an upstream gave them (agentgateway's
// insert): a browser refuses a response with two allow-origin values, and
// an upstream's second one must not stand beside the policy's.
func (p *CORS) decorate(c *Ctx, h *fasthttp.ResponseHeader) {
	if p.credentials {
		SetResponseHeaderCanonical(h, hdrACAllowCreds, valueTrue)
	}
	if p.expose != nil {
		SetResponseHeaderCanonical(h, hdrACExposeHeaders, p.expose)
	}
	addVaryOrigin(c, h)
}

// OnResponse decorates the response of a request this policy marked (c.CORS
// is p): every one gets "Vary: Origin", and one from an allowed origin its
// CORS headers. It does nothing otherwise, so it may be called
// unconditionally. It uses the origin copied at request time, so a request
// header modifier that removes Origin before forwarding does not disable
// the decoration.
func (p *CORS) OnResponse(c *Ctx) {
	if c.CORS != p {
		return
	}
	h := &c.Fast.Response.Header
	if len(c.CORSOrigin) == 0 {
		addVaryOrigin(c, h)
		return
	}
	SetResponseHeaderCanonical(h, hdrACAllowOrigin, c.CORSOrigin)
	p.decorate(c, h)
}

// appendHeaderList appends the comma-separated list v normalised: entries
// trimmed, empty entries dropped, joined with ", ".
func appendHeaderList(dst, v []byte) []byte {
	start := len(dst)
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		item = bytes.TrimSpace(item)
		if len(item) == 0 {
			continue
		}
		if len(dst) > start {
			dst = append(dst, headerListSeparators...)
		}
		dst = append(dst, item...)
	}
	return dst
}

// addVaryOrigin adds Origin to the response's Vary, unless it already lists
// Origin or "*": a Vary of its own when there is none, else merged into the
// one there (its lines joined into one, which means the same).
func addVaryOrigin(c *Ctx, h *fasthttp.ResponseHeader) {
	lines := h.PeekAll("Vary")
	for _, v := range lines {
		for len(v) > 0 {
			var item []byte
			if i := bytes.IndexByte(v, ','); i >= 0 {
				item, v = v[:i], v[i+1:]
			} else {
				item, v = v, nil
			}
			item = bytes.TrimSpace(item)
			if equalFoldASCII(item, "origin") || equalFoldASCII(item, "*") {
				return
			}
		}
	}
	if len(lines) == 0 {
		h.AddBytesKV(hdrVary, valueOrigin)
		return
	}
	buf := c.Scratch()
	for _, v := range lines {
		n := len(buf)
		if buf = appendHeaderList(buf, v); len(buf) > n {
			buf = append(buf, headerListSeparators...)
		}
	}
	buf = append(buf, valueOrigin...)
	SetResponseHeaderCanonical(h, hdrVary, buf)
	c.KeepScratch(buf)
}

// answerEmpty makes the response status with no body and no Content-Type.
func answerEmpty(c *Ctx, status int) {
	resp := &c.Fast.Response
	resp.SetStatusCode(status)
	resp.ResetBody()
	resp.Header.SetNoDefaultContentType(true)
}
