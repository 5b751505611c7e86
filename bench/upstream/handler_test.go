package main

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func TestHandlerServe(t *testing.T) {
	h := newHandler()
	tests := []struct {
		desc       string
		method     string
		path       string
		wantStatus int
		wantLen    int
	}{
		{desc: "small body", method: "GET", path: "/small", wantStatus: 200, wantLen: smallSize},
		{desc: "1 MiB body", method: "GET", path: "/1m", wantStatus: 200, wantLen: 1 << 20},
		{desc: "query string ignored", method: "GET", path: "/small?x=1", wantStatus: 200, wantLen: smallSize},
		{desc: "unknown path", method: "GET", path: "/nope", wantStatus: 404, wantLen: 0},
		{desc: "non-GET rejected", method: "POST", path: "/small", wantStatus: 405, wantLen: 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod(tc.method)
			ctx.Request.SetRequestURI(tc.path)
			h.serve(&ctx)
			if got := ctx.Response.StatusCode(); got != tc.wantStatus {
				t.Fatalf("status = %d, want %d", got, tc.wantStatus)
			}
			if got := len(ctx.Response.Body()); got != tc.wantLen {
				t.Fatalf("body length = %d, want %d", got, tc.wantLen)
			}
		})
	}
}

func TestFill(t *testing.T) {
	for _, n := range []int{1, 25, smallSize, largeSize} {
		b := fill(n)
		if len(b) != n {
			t.Fatalf("fill(%d) length = %d", n, len(b))
		}
		if b[n-1] != '\n' {
			t.Fatalf("fill(%d) does not end in a newline", n)
		}
	}
}

func TestHandlerServeAllocs(t *testing.T) {
	h := newHandler()
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/1m")
	h.serve(&ctx) // warm the response header buffers
	allocs := testing.AllocsPerRun(100, func() {
		ctx.Response.Reset()
		h.serve(&ctx)
	})
	if allocs != 0 {
		t.Fatalf("serve allocates %.1f times per request, want 0", allocs)
	}
}
