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
)

// liveMap is a CEL map whose entries are read from the request on demand.
// Lookups (request.path, request.headers["x-a"]) read one value; what
// needs the whole map (iterating, size, json(request)) builds it as
// InputFromCtx would.
type liveMap struct {
	c    *policy.Ctx
	kind liveKind
}

var _ traits.Mapper = liveMap{}

// Find implements traits.Mapper.
func (m liveMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	f := m.c.Fast
	switch m.kind {
	case liveRequest:
		switch k {
		case "method":
			return types.String(f.Method()), true
		case "path":
			return types.String(m.c.Path), true
		case "host":
			return types.String(m.c.Host), true
		case "scheme":
			return types.String(m.c.Scheme), true
		case "uri":
			return types.String(m.c.RequestHead().RequestURI()), true
		case "headers":
			return liveMap{m.c, liveHeaders}, true
		case "query":
			return liveMap{m.c, liveQuery}, true
		case "body":
			return requestBody(m.c)
		}
	case liveHeaders:
		// Header names are matched without regard to case; a repeated
		// header shows its first value, as in agentgateway.
		v := m.c.RequestHead().Peek(string(k))
		if len(v) == 0 {
			// Absent, empty, or a name fasthttp does not normalise the way
			// it stored it: look at each. (fasthttp keeps User-Agent and
			// Content-Type apart, and Peek gives a reused header's absent
			// one as an empty value, not nil.)
			var ok bool
			if v, ok = m.header(string(k)); !ok {
				return nil, false
			}
		}
		return types.String(v), true
	case liveQuery:
		_, q, _ := bytes.Cut(m.c.RequestHead().RequestURI(), []byte{'?'})
		if v, ok := credential.QueryValue(nil, q, []byte(k)); ok {
			return types.String(v), true
		}
	case liveResponse:
		switch k {
		case "code":
			return types.Int(f.Response.StatusCode()), true
		case "headers":
			return liveMap{m.c, liveResponseHeaders}, true
		case "body":
			return responseBody(m.c)
		}
	case liveResponseHeaders:
		v := f.Response.Header.Peek(string(k))
		if len(v) == 0 {
			for name, value := range f.Response.Header.All() {
				if bytes.EqualFold(name, []byte(k)) {
					return types.String(value), true
				}
			}
			return nil, false
		}
		return types.String(v), true
	case liveSource:
		a, ok := f.RemoteAddr().(*net.TCPAddr)
		if !ok {
			return nil, false
		}
		switch k {
		case "address":
			return types.String(a.IP.String()), true
		case "port":
			return types.Int(a.Port), true
		}
		// The client certificate's identity (peer.go), on a connection
		// that has one.
		src := map[string]any{}
		addClientIdentity(src, f.Conn())
		if v, ok := src[string(k)]; ok {
			return types.DefaultTypeAdapter.NativeToValue(v), true
		}
	}
	return nil, false
}

// header is the first value of the header named name, by a walk over the
// request's headers.
func (m liveMap) header(name string) ([]byte, bool) {
	for k, v := range m.c.RequestHead().All() {
		if bytes.EqualFold(k, []byte(name)) {
			return v, true
		}
	}
	return nil, false
}

// native builds the whole map, as InputFromCtx does.
func (m liveMap) native() map[string]any {
	in := InputFromCtx(m.c)
	switch m.kind {
	case liveRequest:
		return in.Request
	case liveHeaders:
		return in.Request["headers"].(map[string]any)
	case liveQuery:
		return queryMap(m.c)
	case liveResponse:
		out := map[string]any{"code": int64(m.c.Fast.Response.StatusCode()), "headers": responseHeaderMap(m.c)}
		if b, ok := responseBody(m.c); ok {
			out["body"] = []byte(b.(types.Bytes))
		}
		return out
	case liveResponseHeaders:
		return responseHeaderMap(m.c)
	}
	return in.Source
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

func (m liveMap) whole() ref.Val { return types.DefaultTypeAdapter.NativeToValue(m.native()) }

// Get implements traits.Indexer.
func (m liveMap) Get(key ref.Val) ref.Val {
	if v, ok := m.Find(key); ok {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

// Contains implements traits.Container.
func (m liveMap) Contains(key ref.Val) ref.Val {
	_, ok := m.Find(key)
	return types.Bool(ok)
}

// Iterator implements traits.Iterable.
func (m liveMap) Iterator() traits.Iterator { return m.whole().(traits.Mapper).Iterator() }

// Size implements traits.Sizer.
func (m liveMap) Size() ref.Val { return m.whole().(traits.Mapper).Size() }

// IsZeroValue implements traits.Zeroer.
func (m liveMap) IsZeroValue() bool { return false }

// ConvertToNative implements ref.Val.
func (m liveMap) ConvertToNative(t reflect.Type) (any, error) {
	return m.whole().ConvertToNative(t)
}

// ConvertToType implements ref.Val.
func (m liveMap) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from map to '%s'", t)
}

// Equal implements ref.Val.
func (m liveMap) Equal(other ref.Val) ref.Val { return m.whole().Equal(other) }

// Type implements ref.Val.
func (m liveMap) Type() ref.Type { return types.MapType }

// Value implements ref.Val.
func (m liveMap) Value() any { return m.native() }

// String describes the map for error messages.
func (m liveMap) String() string { return "live map " + strconv.Itoa(int(m.kind)) }
