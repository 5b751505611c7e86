package policy

import (
	"io"

	"github.com/valyala/fasthttp"
)

// Detacher is a response body stream that a response policy may take off
// the response to read it itself: after Detach, the stream's next Close
// (the one resetting the response's body makes) does nothing, and the
// taker closes it when done.
type Detacher interface {
	io.Reader
	Detach()
}

// TakeBodyStream removes resp's body stream without closing it and returns
// it; the caller owns it then, and closes it if it is an io.Closer. ok is
// false, and resp unchanged, when resp's stream cannot be taken (it is not
// a Detacher) or resp has no body stream.
func TakeBodyStream(resp *fasthttp.Response) (r io.Reader, ok bool) {
	d, ok := resp.BodyStream().(Detacher)
	if !ok {
		return nil, false
	}
	d.Detach()
	resp.ResetBody()
	return d, true
}

// Unwrapper is a body stream that reads another one, which Unwrap
// returns: whoever looks for a stream's kind (to observe how it ends)
// looks through it.
type Unwrapper interface {
	Unwrap() io.Reader
}

// Innermost returns r, or the stream r wraps, or that one's, down to the
// first stream that wraps nothing.
func Innermost(r io.Reader) io.Reader {
	for {
		u, ok := r.(Unwrapper)
		if !ok {
			return r
		}
		r = u.Unwrap()
	}
}
