package server

import (
	"bytes"
	"math"
	"strconv"

	"github.com/valyala/fasthttp"
)

// Max-Forwards (RFC 9110 7.6.2): a TRACE or OPTIONS request whose
// Max-Forwards is 0 is not forwarded but answered by the gateway, as its
// final recipient; one whose Max-Forwards is greater goes on with it one
// less. Other methods' Max-Forwards is left alone, as the RFC allows. A
// value that is not a number (or a field given twice) is left alone too:
// it cannot be decremented, and refusing the request over it would break
// what forwarding it did before.
//
// Both are answered where the request would be forwarded (applyMaxForwards),
// so that the route's policies (authentication, a CORS preflight, an
// authorization) answer first, as they do without Max-Forwards. OPTIONS
// gets an empty 200; TRACE a 501: the gateway does not echo requests. An
// echo reflected the credentials a route reads from fields or query
// parameters of its own choosing (an apiKey's header, an access_token
// parameter), which no list of sensitive names catches, and answered
// before the route's authentication (an outside probe found both).

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

// applyMaxForwards readies an OPTIONS or TRACE request for its backend: with
// its Max-Forwards one less, or, when its Max-Forwards is 0, answered here:
// OPTIONS with 200 and no body (the gateway knows no options of the target
// resource to tell), TRACE with 501 (no echo). answered reports the latter.
func applyMaxForwards(fctx *fasthttp.RequestCtx) (status int, answered bool) {
	n, ok := maxForwards(fctx)
	switch {
	case !ok:
		return 0, false
	case n == 0 && fctx.IsTrace():
		return respondError(fctx, fasthttp.StatusNotImplemented, "TRACE is not answered by the gateway"), true
	case n == 0:
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
