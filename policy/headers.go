package policy

import (
	"sort"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config"
	"github.com/valyala/fasthttp"
)

// HeaderModifier adds, sets and removes headers, with Gateway API semantics:
// add appends a header line even when the name is present, set replaces every
// line of the name, remove deletes every line of the name. As in agentgateway,
// adds run first, then sets, then removes, so a name both added and set ends
// with the set value only. Within add and set, names apply in sorted order.
//
// fasthttp keeps some request headers single-valued (Host, Content-Type,
// User-Agent, Content-Length, Connection): adding one of those replaces it.
type HeaderModifier struct {
	add    []headerField
	set    []headerField
	remove [][]byte
	// setsHost is true when add or set writes the Host header.
	setsHost bool
}

type headerField struct {
	name, value []byte
}

// NewHeaderModifier compiles a header modifier. It refuses invalid header
// names, values that cannot be sent (control bytes, line breaks) and names
// given twice in one of add or set (names are case-insensitive).
func NewHeaderModifier(cfg *config.HeaderModifier) (*HeaderModifier, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	m := &HeaderModifier{}
	var err error
	if m.add, err = compileHeaderFields("add", cfg.Add); err != nil {
		return nil, err
	}
	if m.set, err = compileHeaderFields("set", cfg.Set); err != nil {
		return nil, err
	}
	for i, name := range cfg.Remove {
		if !validToken(name) {
			return nil, fieldErrorf(indexed("remove", i), "invalid header name %q", name)
		}
		m.remove = append(m.remove, []byte(name))
	}
	for _, f := range append(append([]headerField(nil), m.add...), m.set...) {
		if equalFoldASCII(f.name, "host") {
			m.setsHost = true
		}
	}
	return m, nil
}

func compileHeaderFields(field string, in map[string]string) ([]headerField, error) {
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := make(map[string]string, len(names))
	out := make([]headerField, 0, len(names))
	for _, name := range names {
		path := field + "." + name
		if !validToken(name) {
			return nil, fieldErrorf(path, "invalid header name %q", name)
		}
		if prev, ok := seen[strings.ToLower(name)]; ok {
			return nil, fieldErrorf(path, "header %q is also given as %q (header names are case-insensitive)", name, prev)
		}
		seen[strings.ToLower(name)] = name
		v := in[name]
		if !validFieldValue(v) {
			return nil, fieldErrorf(path, "value %s contains a control character or non-ASCII byte", strconv.Quote(v))
		}
		out = append(out, headerField{name: []byte(name), value: []byte(v)})
	}
	return out, nil
}

// SetRequestHeader sets the request header name to value, replacing every
// line of the name, as agentgateway's HeaderMap::insert and Envoy's
// OVERWRITE_IF_EXISTS_OR_ADD do. fasthttp's Set replaces only the first
// line: a second one the client sent would travel on beside the gateway's
// value, and a backend that trusts a header a policy sets (x-user from a
// JWT claim) could be handed a forged one.
//
// A name on one line is replaced where it stands. Only a name on several
// lines is deleted first: fasthttp's Del fills each hole with the last
// line, which moves the lines of other fields (a list set just before
// would change order). Cookie is always deleted first: fasthttp's Set
// merges the cookies it is given into those already there.
func SetRequestHeader(h *fasthttp.RequestHeader, name, value string) { setEvery(h, name, value) }

// SetResponseHeader is SetRequestHeader for a response: an upstream's
// second line does not reach the client beside the gateway's value.
// Set-Cookie is always deleted first (fasthttp's Set replaces only the
// cookie of the same name).
func SetResponseHeader(h *fasthttp.ResponseHeader, name, value string) { setEvery(h, name, value) }

// setEvery is SetRequestHeader and SetResponseHeader: a name on several
// lines, and Cookie and Set-Cookie always, are deleted before the set.
func setEvery(h Headers, name, value string) {
	if equalFoldASCII(name, "cookie") || equalFoldASCII(name, "set-cookie") || len(h.PeekAll(name)) > 1 {
		delKeepingOrder(h, name)
	}
	h.Set(name, value)
}

// SetResponseHeaderCanonical is SetResponseHeader for a name in
// fasthttp's canonical form (X-Ratelimit-Limit) and a value as bytes
// (copied), for the paths that set headers on every response they see
// (CORS, rate limits): the name is not normalized, and its lines are
// counted with a pass over the fields. (That pass allocates on a response
// that announces trailers, whose Trailer value fasthttp builds.)
func SetResponseHeaderCanonical(h *fasthttp.ResponseHeader, name, value []byte) {
	lines := 0
	for k := range h.All() {
		if string(k) == string(name) {
			lines++
		}
	}
	if lines > 1 || string(name) == fasthttp.HeaderSetCookie {
		DelResponseHeader(h, name)
	}
	h.SetCanonical(name, value)
}

// ApplyRequest modifies request headers in place.
func (m *HeaderModifier) ApplyRequest(h *fasthttp.RequestHeader) {
	for _, f := range m.add {
		h.AddBytesKV(f.name, f.value)
	}
	for _, f := range m.set {
		// fasthttp's Set replaces only the first line of a name.
		DelRequestHeader(h, f.name)
		h.SetBytesKV(f.name, f.value)
	}
	for _, name := range m.remove {
		DelRequestHeader(h, name)
	}
}

// ApplyResponse modifies response headers in place.
func (m *HeaderModifier) ApplyResponse(h *fasthttp.ResponseHeader) {
	for _, f := range m.add {
		h.AddBytesKV(f.name, f.value)
	}
	for _, f := range m.set {
		// fasthttp's Set replaces only the first line of a name.
		DelResponseHeader(h, f.name)
		h.SetBytesKV(f.name, f.value)
	}
	for _, name := range m.remove {
		DelResponseHeader(h, name)
	}
}

// SetsHost reports whether the modifier writes the Host header (through add
// or set). Like agentgateway, RequestHeaders does not set c.HostRewritten: a
// hostname backend's automatic Host still wins over it; only a URL rewrite
// with an explicit authority turns that off.
func (m *HeaderModifier) SetsHost() bool { return m.setsHost }

// RequestHeaders is the request policy that applies a HeaderModifier to the
// request (`requestHeaderModifier`).
type RequestHeaders struct{ *HeaderModifier }

// OnRequest modifies the request headers and returns Continue. When the
// modifier writes Host, the request's parsed URI is given the same host, so
// fasthttp does not put the old one back when it writes the request.
func (r RequestHeaders) OnRequest(c *Ctx) Result {
	req := &c.Fast.Request
	r.ApplyRequest(&req.Header)
	if r.setsHost {
		req.URI().SetHostBytes(req.Header.Host())
	}
	return Continue
}

// ResponseHeaders is the response policy that applies a HeaderModifier to the
// response (`responseHeaderModifier`).
type ResponseHeaders struct{ *HeaderModifier }

// OnResponse modifies the response headers.
func (r ResponseHeaders) OnResponse(c *Ctx) {
	r.ApplyResponse(&c.Fast.Response.Header)
}

// HeaderAction is how a HeaderEdit meets the values a header already has:
// Envoy's HeaderValueOption.HeaderAppendAction.
type HeaderAction uint8

const (
	// HeaderSet replaces every value of the header, or adds it
	// (OVERWRITE_IF_EXISTS_OR_ADD).
	HeaderSet HeaderAction = iota
	// HeaderAppend adds a value beside those there (APPEND_IF_EXISTS_OR_ADD).
	HeaderAppend
	// HeaderAddIfAbsent adds the header only when it is absent
	// (ADD_IF_ABSENT).
	HeaderAddIfAbsent
	// HeaderSetIfPresent replaces every value only when the header is
	// present (OVERWRITE_IF_EXISTS).
	HeaderSetIfPresent
)

// HeaderEdit is a change to one header that an external service asked for
// (ext_authz, the rate limit service). Name and Value are valid, and Name
// is not a framing header: the caller checked.
type HeaderEdit struct {
	Name, Value string
	Action      HeaderAction
}

// Headers are a request's or a response's headers, as HeaderEdit changes
// them (*fasthttp.RequestHeader, *fasthttp.ResponseHeader).
// delKeepingOrder deletes every line of name from h, and moves no other
// name's lines (DelRequestHeader) when h is a fasthttp header; other
// Headers delete as they do.
func delKeepingOrder(h Headers, name string) {
	switch h := h.(type) {
	case *fasthttp.RequestHeader:
		DelRequestHeader(h, []byte(name))
	case *fasthttp.ResponseHeader:
		DelResponseHeader(h, []byte(name))
	default:
		h.Del(name)
	}
}

type Headers interface {
	Add(key, value string)
	Set(key, value string)
	Del(key string)
	Peek(key string) []byte
	PeekAll(key string) [][]byte
}

// Apply makes the edit on h. A set replaces every line of the name
// (setEvery): fasthttp's Set replaces only the first, and a client's
// second copy would stay beside the value set.
func (e HeaderEdit) Apply(h Headers) {
	present := h.Peek(e.Name) != nil
	switch e.Action {
	case HeaderAppend:
		h.Add(e.Name, e.Value)
		return
	case HeaderAddIfAbsent:
		if present {
			return
		}
	case HeaderSetIfPresent:
		if !present {
			return
		}
	}
	setEvery(h, e.Name, e.Value)
}
