package transform

import (
	"iter"
	"slices"
	"strconv"

	"github.com/relaygate/gateway/policy"
)

// requestHeaders edits the request being forwarded.
type requestHeaders struct{ c *policy.Ctx }

func (r requestHeaders) Set(k, v string) { r.c.Fast.Request.Header.Set(k, v) }
func (r requestHeaders) Add(k, v string) { r.c.Fast.Request.Header.Add(k, v) }
func (r requestHeaders) Del(k string)    { r.c.Fast.Request.Header.Del(k) }

// reset removes every header but Host (the request's authority) and the
// framing headers, which describe the body the gateway forwards.
func (r requestHeaders) reset() {
	h := &r.c.Fast.Request.Header
	deleteAllBut(h.All(), h.Del, "Host")
}

func (r requestHeaders) pseudo(name, value string) bool {
	h := &r.c.Fast.Request.Header
	switch name {
	case ":method":
		if value == "" {
			return false
		}
		h.SetMethod(value)
	case ":path":
		if value == "" || value[0] != '/' {
			return false
		}
		h.SetRequestURI(value)
	case ":authority":
		if value == "" {
			return false
		}
		h.SetHost(value)
		r.c.HostRewritten = true
	default:
		return false
	}
	return true
}

// responseHeaders edits the response being returned.
type responseHeaders struct{ c *policy.Ctx }

func (r responseHeaders) Set(k, v string) { r.c.Fast.Response.Header.Set(k, v) }
func (r responseHeaders) Add(k, v string) { r.c.Fast.Response.Header.Add(k, v) }
func (r responseHeaders) Del(k string)    { r.c.Fast.Response.Header.Del(k) }

// reset removes every header but the framing ones.
func (r responseHeaders) reset() {
	h := &r.c.Fast.Response.Header
	deleteAllBut(h.All(), h.Del)
}

// deleteAllBut deletes every header of all except the framing headers,
// which describe the body the gateway sends, and those named in keep.
func deleteAllBut(all iter.Seq2[[]byte, []byte], del func(string), keep ...string) {
	var names []string
	for k := range all {
		switch string(k) {
		case "Content-Length", "Transfer-Encoding", "Content-Type":
			continue
		}
		if !slices.Contains(keep, string(k)) {
			names = append(names, string(k))
		}
	}
	for _, n := range names {
		del(n)
	}
}

func (r responseHeaders) pseudo(name, value string) bool {
	if name != ":status" {
		return false
	}
	code, err := strconv.Atoi(value)
	if err != nil || code < 100 || code > 599 {
		return false
	}
	r.c.Fast.Response.SetStatusCode(code)
	return true
}
