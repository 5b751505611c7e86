package main

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func BenchmarkHandlerServe(b *testing.B) {
	h := newHandler()
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/small")
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.serve(&ctx)
	}
}
