package celrules

import (
	"bytes"
	"net"
	"reflect"
	"strconv"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/credential"
)

// LiveInput is the request as rules see it, read from the request itself
// as an expression asks for each part: no map of every header is built,
// and a rule reading request.path reads the path alone. Its head is
// policy.Ctx.RequestHead: without the gateway's backend credentials. It is valid only
// while the request is served (its buffers are the request's); use
// InputFromCtx for rules evaluated later.
func LiveInput(c *policy.Ctx) Input {
	return Input{Claims: c.Claims, BasicAuthUser: c.BasicAuthUser, APIKey: c.APIKey, ExtAuthz: c.ExtAuthz,
		Metadata: c.Metadata, ExtProc: c.ExtProcMetadata, Backend: c.Backend, live: c}
}

// liveKind says which part of the request a liveMap is.
type liveKind uint8

const (
	liveRequest liveKind = iota
	liveHeaders
	liveQuery
	liveSource
	liveResponse
	liveResponseHeaders
	liveKinds
)

// liveState is one evaluation's view of the live request, made by the
// activation on the first read: the maps it hands out (by pointer, so
// that reading request.headers boxes nothing) and the values their
// lookups gave. A value read again is the one converted the first time:
// an expression reading a header inside a loop
// (`request.headers["x"].split(",").exists(v, v == request.headers["y"])`)
// copies it once, not once per element, which would take time and memory
// quadratic in the header's size. This is safe because the request does
// not change while an expression is evaluated (CEL functions do not write
// to it) and a state lives for one evaluation (one Allowed, one EvalLLM):
// the next one reads the request as it is then, after a transformation
// changed it. The values are copies, as before, so a result may outlive
// the request's buffers.
type liveState struct {
	c *policy.Ctx
	// The values looked up (absent ones too): the first few inline, the
	// rest in a map, so that an expression looking up many names (a loop
	// over a list of them) is not quadratic either.
	memo [3]liveEntry
	n    int
	more map[liveKey]ref.Val
	// wholes holds the maps built whole (liveMap.whole), once one was.
	wholes *[liveKinds]ref.Val
}

type liveKey struct {
	kind liveKind
	name string
}

type liveEntry struct {
	key liveKey
	val ref.Val // nil: absent
}

// lookup is the value of name in the map of kind, read once.
func (s *liveState) lookup(kind liveKind, name string) (ref.Val, bool) {
	for i := range s.n {
		if e := &s.memo[i]; e.key.kind == kind && e.key.name == name {
			return e.val, e.val != nil
		}
	}
	key := liveKey{kind, name}
	if v, ok := s.more[key]; ok {
		return v, v != nil
	}
	v := s.read(kind, name)
	if s.n < len(s.memo) {
		s.memo[s.n] = liveEntry{key, v}
		s.n++
	} else {
		if s.more == nil {
			s.more = map[liveKey]ref.Val{}
		}
		s.more[key] = v
	}
	return v, v != nil
}

// read is the value of name in the map of kind, from the request; nil
// when absent.
func (s *liveState) read(kind liveKind, name string) ref.Val {
	c := s.c
	switch kind {
	case liveRequest:
		switch name {
		case "method":
			return types.String(c.Fast.Method())
		case "path":
			return types.String(c.Path)
		case "host":
			return types.String(c.Host)
		case "scheme":
			return types.String(c.Scheme)
		case "uri":
			return types.String(c.RequestHead().RequestURI())
		case "body":
			if v, ok := requestBody(c); ok {
				return v
			}
		}
	case liveHeaders:
		// Header names are matched without regard to case; a repeated
		// header shows its first value, as in agentgateway.
		v := c.RequestHead().Peek(name)
		if len(v) == 0 {
			// Absent, empty, or a name fasthttp does not normalise the way
			// it stored it: look at each. (fasthttp keeps User-Agent and
			// Content-Type apart, and Peek gives a reused header's absent
			// one as an empty value, not nil.)
			var ok bool
			if v, ok = requestHeader(c, name); !ok {
				return nil
			}
		}
		return types.String(v)
	case liveQuery:
		_, q, _ := bytes.Cut(c.RequestHead().RequestURI(), []byte{'?'})
		if v, ok := credential.QueryValue(nil, q, []byte(name)); ok {
			return types.String(v)
		}
	case liveResponse:
		switch name {
		case "code":
			return types.Int(c.Fast.Response.StatusCode())
		case "body":
			if v, ok := responseBody(c); ok {
				return v
			}
		}
	case liveResponseHeaders:
		v := c.Fast.Response.Header.Peek(name)
		if len(v) == 0 {
			for k, value := range c.Fast.Response.Header.All() {
				if bytes.EqualFold(k, []byte(name)) {
					return types.String(value)
				}
			}
			return nil
		}
		return types.String(v)
	case liveSource:
		a, ok := c.Fast.RemoteAddr().(*net.TCPAddr)
		if !ok {
			return nil
		}
		switch name {
		case "address":
			return types.String(a.IP.String())
		case "port":
			return types.Int(a.Port)
		}
		// The client certificate's identity (peer.go), on a connection
		// that has one.
		src := map[string]any{}
		addClientIdentity(src, c.Fast.Conn())
		if v, ok := src[name]; ok {
			return types.DefaultTypeAdapter.NativeToValue(v)
		}
	}
	return nil
}

// liveMap is a CEL map whose entries are read from the request on demand.
// Lookups (request.path, request.headers["x-a"]) read one value; what
// needs the whole map (iterating, size, json(request)) builds it as
// InputFromCtx would, once per evaluation. It is the evaluation's
// liveState under a type per part of the request (K), so that handing out
// request, request.headers or source allocates nothing.
type liveMap[K liveKindOf] liveState

// liveKindOf is the part of the request a liveMap is.
type liveKindOf interface{ kind() liveKind }

type (
	requestPart         struct{}
	headersPart         struct{}
	queryPart           struct{}
	sourcePart          struct{}
	responsePart        struct{}
	responseHeadersPart struct{}
)

func (requestPart) kind() liveKind         { return liveRequest }
func (headersPart) kind() liveKind         { return liveHeaders }
func (queryPart) kind() liveKind           { return liveQuery }
func (sourcePart) kind() liveKind          { return liveSource }
func (responsePart) kind() liveKind        { return liveResponse }
func (responseHeadersPart) kind() liveKind { return liveResponseHeaders }

var (
	_ traits.Mapper = (*liveMap[requestPart])(nil)
	_ traits.Mapper = (*liveMap[headersPart])(nil)
)

func (m *liveMap[K]) kind() liveKind {
	var k K
	return k.kind()
}

func (m *liveMap[K]) state() *liveState { return (*liveState)(m) }

// Find implements traits.Mapper.
func (m *liveMap[K]) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	s, kind := m.state(), m.kind()
	switch {
	case kind == liveRequest && k == "headers":
		return (*liveMap[headersPart])(s), true
	case kind == liveRequest && k == "query":
		return (*liveMap[queryPart])(s), true
	case kind == liveResponse && k == "headers":
		return (*liveMap[responseHeadersPart])(s), true
	}
	return s.lookup(kind, string(k))
}

// requestHeader is the first value of the header named name, by a walk
// over the request's headers.
func requestHeader(c *policy.Ctx, name string) ([]byte, bool) {
	for k, v := range c.RequestHead().All() {
		if bytes.EqualFold(k, []byte(name)) {
			return v, true
		}
	}
	return nil, false
}

// native builds the whole map, as InputFromCtx does.
func (m *liveMap[K]) native() map[string]any {
	c := m.c
	switch m.kind() {
	case liveRequest:
		return InputFromCtx(c).Request
	case liveHeaders:
		return requestHeaderMap(c.RequestHead())
	case liveQuery:
		return queryMap(c)
	case liveResponse:
		out := map[string]any{"code": int64(c.Fast.Response.StatusCode()), "headers": responseHeaderMap(c)}
		if b, ok := responseBody(c); ok {
			out["body"] = []byte(b.(types.Bytes))
		}
		return out
	case liveResponseHeaders:
		return responseHeaderMap(c)
	}
	return InputFromCtx(c).Source
}

// requestBody is request.body: the request's body once a policy read it
// whole (policy.ReadRequestBody), as bytes (agentgateway's type); absent
// before, so that an expression reading it fails rather than see a body
// that is still streaming.
func requestBody(c *policy.Ctx) (ref.Val, bool) {
	req := &c.Fast.Request
	if !c.RequestBodyRead || req.IsBodyStream() {
		return nil, false
	}
	return types.Bytes(req.Body()), true
}

// responseBody is response.body, as requestBody.
func responseBody(c *policy.Ctx) (ref.Val, bool) {
	resp := &c.Fast.Response
	if !c.ResponseBodyRead || resp.IsBodyStream() {
		return nil, false
	}
	return types.Bytes(resp.Body()), true
}

// responseHeaderMap is the response's headers as rules see them:
// lower-case names, the first value of a repeated one.
func responseHeaderMap(c *policy.Ctx) map[string]any {
	out := map[string]any{}
	for k, v := range c.Fast.Response.Header.All() {
		name := string(appendLower(nil, k))
		if _, seen := out[name]; !seen {
			out[name] = string(v)
		}
	}
	return out
}

// queryMap is the request's query parameters, the first value of each.
func queryMap(c *policy.Ctx) map[string]any {
	out := map[string]any{}
	_, q, _ := bytes.Cut(c.RequestHead().RequestURI(), []byte{'?'})
	for len(q) > 0 {
		var pair []byte
		pair, q, _ = bytes.Cut(q, []byte{'&'})
		name, value, _ := bytes.Cut(pair, []byte{'='})
		if len(name) == 0 {
			continue
		}
		key := string(credential.QueryUnescape(nil, name))
		if _, seen := out[key]; !seen {
			out[key] = string(credential.QueryUnescape(nil, value))
		}
	}
	return out
}

// whole is the whole map as a CEL value, built once per evaluation (an
// expression asking its size in a loop builds it once).
func (m *liveMap[K]) whole() ref.Val {
	if m.wholes == nil {
		m.wholes = new([liveKinds]ref.Val)
	}
	kind := m.kind()
	if m.wholes[kind] == nil {
		m.wholes[kind] = types.DefaultTypeAdapter.NativeToValue(m.native())
	}
	return m.wholes[kind]
}

// Get implements traits.Indexer.
func (m *liveMap[K]) Get(key ref.Val) ref.Val {
	if v, ok := m.Find(key); ok {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

// Contains implements traits.Container.
func (m *liveMap[K]) Contains(key ref.Val) ref.Val {
	_, ok := m.Find(key)
	return types.Bool(ok)
}

// Iterator implements traits.Iterable.
func (m *liveMap[K]) Iterator() traits.Iterator { return m.whole().(traits.Mapper).Iterator() }

// Size implements traits.Sizer.
func (m *liveMap[K]) Size() ref.Val { return m.whole().(traits.Mapper).Size() }

// IsZeroValue implements traits.Zeroer.
func (m *liveMap[K]) IsZeroValue() bool { return false }

// ConvertToNative implements ref.Val.
func (m *liveMap[K]) ConvertToNative(t reflect.Type) (any, error) {
	return m.whole().ConvertToNative(t)
}

// ConvertToType implements ref.Val.
func (m *liveMap[K]) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from map to '%s'", t)
}

// Equal implements ref.Val.
func (m *liveMap[K]) Equal(other ref.Val) ref.Val { return m.whole().Equal(other) }

// Type implements ref.Val.
func (m *liveMap[K]) Type() ref.Type { return types.MapType }

// Value implements ref.Val.
func (m *liveMap[K]) Value() any { return m.native() }

// String describes the map for error messages.
func (m *liveMap[K]) String() string { return "live map " + strconv.Itoa(int(m.kind())) }
