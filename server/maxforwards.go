package server

import (
	"bytes"
	"math"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

// Max-Forwards (RFC 9110 7.6.2): a TRACE or OPTIONS request whose
// Max-Forwards is 0 is not forwarded but answered by the gateway, as its
// final recipient; one whose Max-Forwards is greater goes on with it one
// less. Other methods' Max-Forwards is left alone, as the RFC allows. A
// value that is not a number (or a field given twice) is left alone too:
// it cannot be decremented, and refusing the request over it would break
// what forwarding it did before.
//
// TRACE is answered as soon as the request is known valid, before routing
// (answerTrace): its answer reflects the request as received, which a
// route's policies change (a header they set, a backend's credentials).
// OPTIONS is answered where the request would be forwarded (applyMaxForwards),
// so that the route's policies (a CORS preflight, an authorization) answer
// it first, as they do without Max-Forwards.

var headerMaxForwards = []byte(fasthttp.HeaderMaxForwards)

// maxForwardsLimit is the largest Max-Forwards forwarded (RFC 9110 7.6.2's
// "maximum supported value"): a larger one goes on as this.
const maxForwardsLimit = math.MaxInt32

// maxForwards returns a TRACE or OPTIONS request's Max-Forwards; ok is false
// for other methods and for a missing or invalid value.
func maxForwards(fctx *fasthttp.RequestCtx) (n uint64, ok bool) {
	if !fctx.IsTrace() && !fctx.IsOptions() {
		return 0, false
	}
	var v []byte
	fields := 0
	for k, val := range fctx.Request.Header.All() {
		if bytes.EqualFold(k, headerMaxForwards) {
			fields++
			v = val
		}
	}
	if fields != 1 || len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= maxForwardsLimit { // saturates above the limit
			n = n*10 + uint64(c-'0')
		}
	}
	return n, true
}

// answerTrace answers a TRACE request whose Max-Forwards is 0, as its
// final recipient (RFC 9110 9.3.8): 200 with the request as received, as
// message/http, without the fields that may hold credentials
// (config.SensitiveHeader: Authorization, Cookie, X-Api-Key, ...), which
// the RFC asks the recipient to leave out. The request line names the
// version the request came in (HTTP/2.0 for an HTTP/2 stream's). ok is
// false for any other request.
func answerTrace(fctx *fasthttp.RequestCtx, h2 bool) (status int, ok bool) {
	if !fctx.IsTrace() {
		return 0, false
	}
	if n, valid := maxForwards(fctx); !valid || n != 0 {
		return 0, false
	}
	req := &fctx.Request.Header
	var b []byte
	b = append(b, req.Method()...)
	b = append(b, ' ')
	b = append(b, req.RequestURI()...)
	if h2 {
		b = append(b, " HTTP/2.0\r\n"...)
	} else {
		b = append(b, ' ')
		b = append(b, req.Protocol()...)
		b = append(b, "\r\n"...)
	}
	for k, v := range req.All() {
		if config.SensitiveHeader(string(k)) {
			continue
		}
		b = append(b, k...)
		b = append(b, ": "...)
		b = append(b, v...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	resp := &fctx.Response
	resp.Reset()
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.Header.SetContentType("message/http")
	resp.SetBody(b)
	return fasthttp.StatusOK, true
}

// applyMaxForwards readies an OPTIONS or TRACE request for its backend: with
// its Max-Forwards one less, or, for an OPTIONS whose Max-Forwards is 0,
// answered here (200, no body: the gateway knows no options of the target
// resource to tell). answered reports the latter.
func applyMaxForwards(fctx *fasthttp.RequestCtx) (status int, answered bool) {
	n, ok := maxForwards(fctx)
	switch {
	case !ok:
		return 0, false
	case n == 0:
		// (A TRACE's was answered by answerTrace.)
		resp := &fctx.Response
		resp.Reset()
		resp.SetStatusCode(fasthttp.StatusOK)
		resp.Header.SetNoDefaultContentType(true)
		return fasthttp.StatusOK, true
	}
	var buf [20]byte
	fctx.Request.Header.SetBytesKV(headerMaxForwards, strconv.AppendUint(buf[:0], min(n-1, maxForwardsLimit), 10))
	return 0, false
}
