package main

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

const (
	// smallSize is the length of the GET /small body.
	smallSize = 100
	// largeSize is the length of the GET /1m body (1 MiB).
	largeSize = 1 << 20
)

var contentType = []byte("application/octet-stream")

// handler serves the fixed benchmark bodies. Bodies are built once and
// handed to fasthttp without copying.
type handler struct {
	small []byte
	large []byte
}

func newHandler() *handler {
	return &handler{
		small: fill(smallSize),
		large: fill(largeSize),
	}
}

// fill returns n bytes of printable filler ending in a newline.
func fill(n int) []byte {
	const pattern = "relaygate-bench-upstream-"
	b := bytes.Repeat([]byte(pattern), n/len(pattern)+1)[:n]
	b[n-1] = '\n'
	return b
}

func (h *handler) serve(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		ctx.Response.Header.Set("Allow", "GET")
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	var body []byte
	switch string(ctx.Path()) {
	case "/small":
		body = h.small
	case "/1m":
		body = h.large
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	ctx.Response.Header.SetContentTypeBytes(contentType)
	ctx.Response.SetBodyRaw(body)
}
