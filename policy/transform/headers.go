package transform

import (
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/policy"
)

// requestHeaders edits the request being forwarded. Set replaces every
// value of the name (policy.SetRequestHeader), so that a client's second copy
// never reaches the backend beside the gateway's. rawPaths keeps a :path as
// computed (Options.RawPaths).
type requestHeaders struct {
	c        *policy.Ctx
	rawPaths bool
}

func (r requestHeaders) Set(k, v string) { policy.SetRequestHeader(&r.c.Fast.Request.Header, k, v) }
func (r requestHeaders) Add(k, v string) { r.c.Fast.Request.Header.Add(k, v) }
func (r requestHeaders) Del(k string) {
	policy.DelRequestHeader(&r.c.Fast.Request.Header, []byte(k))
}

// reset removes every header but Host (the request's authority) and those
// deleteAllBut keeps.
func (r requestHeaders) reset() {
	h := &r.c.Fast.Request.Header
	deleteAllBut(h.All(), h.Del, "Host")
}

func (r requestHeaders) pseudo(name, value string) bool {
	h := &r.c.Fast.Request.Header
	switch name {
	case ":method":
		if !settableMethod(value, h.IsHead()) {
			return false
		}
		h.SetMethod(value)
	case ":path":
		if !policy.ValidOriginForm(value) {
			return false
		}
		if !r.rawPaths {
			// As the client's path was before routing and authorization:
			// "/a/../admin" goes as "/admin", not for the upstream to
			// resolve. A path normalizing refuses (an encoded "/", a
			// "", a broken escape), which a client's request would be
			// answered 400 for, leaves the path alone.
			var ok bool
			if value, ok = policy.NormalizeTarget(value); !ok {
				return false
			}
		}
		h.SetRequestURI(value)
		r.c.PathFromTarget()
	case ":authority":
		if !policy.ValidAuthority(value) {
			return false
		}
		h.SetHost(value)
		r.c.HostRewritten = true
	default:
		return false
	}
	return true
}

// settableMethod reports whether a transformation may make value the
// request's method; head says the request is a HEAD. A method is a token
// (RFC 9110 9.1), and neither of these, in any case (servers that read
// methods case-insensitively exist):
//   - CONNECT: an upstream answering it 2xx would turn the pooled
//     connection into a tunnel, whatever came next on it;
//   - HEAD, to or from: the answer to a HEAD has no body, and the client's
//     connection is framed by the client's method. A body relayed to a
//     HEAD client, or a GET client's answer sent without its body, would
//     be read as the start of the next answer.
func settableMethod(value string, head bool) bool {
	switch {
	case !policy.ValidHeaderName(value), strings.EqualFold(value, fasthttp.MethodConnect):
		return false
	case strings.EqualFold(value, fasthttp.MethodHead):
		return head && value == fasthttp.MethodHead
	}
	return !head
}

// setBody replaces the request's body: the client's stream, unread, is
// left to the server to drain. Expressions evaluated later (the
// response's, the access log's) see the new body as request.body.
func (r requestHeaders) setBody(b []byte) {
	req := &r.c.Fast.Request
	req.SetBodyRaw(b)
	req.Header.SetContentLength(len(b))
	r.c.RequestBodyRead = true
}

// responseHeaders edits the response being returned; Set replaces every
// value of the name, as requestHeaders' does.
type responseHeaders struct{ c *policy.Ctx }

func (r responseHeaders) Set(k, v string) { policy.SetResponseHeader(&r.c.Fast.Response.Header, k, v) }
func (r responseHeaders) Add(k, v string) { r.c.Fast.Response.Header.Add(k, v) }
func (r responseHeaders) Del(k string) {
	policy.DelResponseHeader(&r.c.Fast.Response.Header, []byte(k))
}

// reset removes every header but those deleteAllBut keeps.
func (r responseHeaders) reset() {
	h := &r.c.Fast.Response.Header
	deleteAllBut(h.All(), h.Del)
}

// deleteAllBut deletes every header of all except Content-Type, those named
// in keep, and the framing and hop-by-hop ones (policy.ReservedHeader),
// which describe the body the gateway sends and its connections: a
// replace can neither set nor remove them (an upgrade stays the client's
// to ask for).
func deleteAllBut(all iter.Seq2[[]byte, []byte], del func(string), keep ...string) {
	var names []string
	for k := range all {
		name := string(k)
		if name == "Content-Type" || policy.ReservedHeader(name) || slices.Contains(keep, name) {
			continue
		}
		names = append(names, name)
	}
	for _, n := range names {
		del(n)
	}
}

// setBody replaces the response's body, unless the response has none to
// replace (an answer to HEAD, 1xx, 204, 304). A stream not read is closed
// (its upstream connection with it).
func (r responseHeaders) setBody(b []byte) {
	resp := &r.c.Fast.Response
	code := resp.StatusCode()
	if r.c.Fast.Request.Header.IsHead() || code < 200 || code == fasthttp.StatusNoContent || code == fasthttp.StatusNotModified {
		return
	}
	resp.SetBodyRaw(b)
	resp.Header.SetContentLength(len(b))
	r.c.ResponseBodyRead = true
}

// pseudo sets :status, a final one (200..599): a 1xx is not an answer
// (101 would tell the client the connection switched protocols). The
// upstream's reason phrase goes with its status: the new status is sent
// with its own ("201 Created", not "201 OK").
func (r responseHeaders) pseudo(name, value string) bool {
	if name != ":status" {
		return false
	}
	code, err := strconv.Atoi(value)
	if err != nil || code < 200 || code > 599 {
		return false
	}
	h := &r.c.Fast.Response.Header
	h.SetStatusCode(code)
	h.SetStatusMessage(nil)
	return true
}
