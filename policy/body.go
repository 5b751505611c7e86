package policy

import (
	"errors"
	"io"
	"net"

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

// StreamObserver is told how a response body stream ended once it is
// closed: the bytes it gave, and nil when it was read to its end, else why
// not (backend.StreamObserver's method: the server's record of the
// request).
type StreamObserver interface {
	StreamClosed(bytes int, err error)
}

// ObservedBody is a response body stream of a policy's making, over the
// stream it unwraps to, that can fail on its own after the response's head
// went out (extProc's processed body, when its service fails then): the
// request's record must say so, and count the bytes the body gave, not
// the ones it read. Observe(o) has the body tell o how it ended once it is
// closed, and returns the observer to hand the stream it wraps in o's
// place (which the body then tells o through); when nothing it wraps is
// observed, the body tells o itself.
type ObservedBody interface {
	Observe(o StreamObserver) StreamObserver
}

// ObservedBodyOf returns the first ObservedBody among r and the streams it
// wraps, nil when there is none.
func ObservedBodyOf(r io.Reader) ObservedBody {
	for r != nil {
		if o, ok := r.(ObservedBody); ok {
			return o
		}
		u, ok := r.(Unwrapper)
		if !ok {
			return nil
		}
		r = u.Unwrap()
	}
	return nil
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

// ErrBodyTooLarge is a body larger than a policy may read whole
// (frontendPolicies.http.maxBufferSize).
var ErrBodyTooLarge = errors.New("the body is larger than maxBufferSize")

// ClientBodyError is the error of a request body the client failed to send
// (cut short, too slow): the client's fault, not the gateway's. The
// server's guard of the client's stream returns one.
type ClientBodyError interface {
	error
	ClientBody()
}

// BodyFailure is the error a request body stream of a policy's making
// (extProc's processed body) ends with when that policy failed: neither
// the client nor the upstream. Whoever reads the body answers the request
// as the policy answers the same failure before the body (Respond), and
// logs it as the policy's (Error names Kind); it is not retried.
type BodyFailure struct {
	Kind   Kind
	Status int
	Body   []byte // sent as text/plain
	Err    error
	// Answer, when set, makes the answer in place of Body (Status is its
	// status): the policy's service answered the request itself while the
	// body streamed (an extProc immediate response, headers and all).
	Answer func(resp *fasthttp.Response)
}

func (e *BodyFailure) Error() string { return string(e.Kind) + ": " + e.Err.Error() }
func (e *BodyFailure) Unwrap() error { return e.Err }

// Respond makes resp the policy's answer to the failure.
func (e *BodyFailure) Respond(resp *fasthttp.Response) {
	if e.Answer != nil {
		e.Answer(resp)
		return
	}
	resp.Reset()
	resp.SetStatusCode(e.Status)
	resp.Header.SetContentTypeBytes(contentTypeText)
	resp.SetBody(e.Body)
}

// ReadRequestBody reads the request's body whole, up to max bytes, and
// keeps it as the request's body, so the backend still gets all of it. CEL
// shows it as request.body from then on (c.RequestBodyRead). A body read
// before (by this or another policy) is not read again. The error is
// ErrBodyTooLarge beyond max, before anything is read when the declared
// length says so; else the stream's, a ClientBodyError when the client
// failed to send it.
func ReadRequestBody(c *Ctx, max int) ([]byte, error) {
	req := &c.Fast.Request
	if !req.IsBodyStream() {
		body := req.Body()
		if len(body) > max {
			return nil, ErrBodyTooLarge
		}
		c.RequestBodyRead = true
		return body, nil
	}
	n := req.Header.ContentLength()
	if n > max {
		return nil, ErrBodyTooLarge
	}
	body, err := readWhole(req.BodyStream(), n, max)
	if err != nil {
		return nil, err
	}
	// Raw: the stream's own buffer stays the server's, which drains what
	// the stream left (nothing, here) after the handler.
	req.SetBodyRaw(body)
	req.Header.SetContentLength(len(body))
	c.RequestBodyRead = true
	return body, nil
}

// ReadResponseBody is ReadRequestBody for the response: a streamed body is
// read to its end (its upstream connection goes back to its pool) and
// kept as the response's body; c.ResponseBodyRead is set. On an error the
// stream stays on the response, read in part: resetting the response
// closes it (and its connection).
func ReadResponseBody(c *Ctx, max int) ([]byte, error) {
	resp := &c.Fast.Response
	if !resp.IsBodyStream() {
		body := resp.Body()
		if len(body) > max {
			return nil, ErrBodyTooLarge
		}
		c.ResponseBodyRead = true
		return body, nil
	}
	n := resp.Header.ContentLength()
	if n > max {
		return nil, ErrBodyTooLarge
	}
	body, err := readWhole(resp.BodyStream(), n, max)
	if err != nil {
		return nil, err
	}
	resp.SetBodyRaw(body)
	resp.Header.SetContentLength(len(body))
	c.ResponseBodyRead = true
	return body, nil
}

// errLongerThanDeclared is a body stream that goes on past its declared
// length.
var errLongerThanDeclared = errors.New("the body is longer than its Content-Length")

// readWhole reads r to its end: n bytes when n >= 0 (the declared length,
// at most max), else up to max (ErrBodyTooLarge beyond).
func readWhole(r io.Reader, n, max int) ([]byte, error) {
	if n >= 0 {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		// The stream's end, so that it knows it was read whole.
		var one [1]byte
		for {
			m, err := r.Read(one[:])
			if m > 0 {
				return nil, errLongerThanDeclared
			}
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return nil, err
			}
		}
	}
	buf, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(buf) > max {
		return nil, ErrBodyTooLarge
	}
	return buf, nil
}

var (
	bodyTooLarge = []byte("request body too large\n")
	bodyTimeout  = []byte("request body timeout\n")
	bodyBroken   = []byte("malformed or incomplete request body\n")
	bodyFailed   = []byte("request body processing failed\n")
)

// RespondRequestBodyError answers a request whose body ReadRequestBody
// could not read: 413 beyond max, 408 or 400 when the client failed to
// send it (too slow, or cut short), the policy's answer when another
// policy's processing of it failed (BodyFailure), else 500. The connection
// closes after the answer, the body unread to its end.
func RespondRequestBodyError(c *Ctx, err error) {
	resp := &c.Fast.Response
	resp.Reset()
	resp.Header.SetContentTypeBytes(contentTypeText)
	var ce ClientBodyError
	var ne net.Error
	var pf *BodyFailure
	switch {
	case errors.As(err, &pf):
		pf.Respond(resp)
	case errors.Is(err, ErrBodyTooLarge):
		resp.SetStatusCode(fasthttp.StatusRequestEntityTooLarge)
		resp.SetBody(bodyTooLarge)
	case errors.As(err, &ce) && errors.As(err, &ne) && ne.Timeout():
		resp.SetStatusCode(fasthttp.StatusRequestTimeout)
		resp.SetBody(bodyTimeout)
	case errors.As(err, &ce), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, errLongerThanDeclared):
		resp.SetStatusCode(fasthttp.StatusBadRequest)
		resp.SetBody(bodyBroken)
	default:
		resp.SetStatusCode(fasthttp.StatusInternalServerError)
		resp.SetBody(bodyFailed)
	}
	c.Fast.SetConnectionClose()
}
