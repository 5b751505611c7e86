// Package policytest builds requests and policy contexts for the tests of
// policy kinds, as the server would hand them over.
package policytest

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/policy"
)

// NewRequest builds a request context; headers are name/value pairs.
func NewRequest(method, uri string, headers ...string) *fasthttp.RequestCtx {
	var fctx fasthttp.RequestCtx
	fctx.Request.Header.SetMethod(method)
	fctx.Request.SetRequestURI(uri)
	fctx.Request.Header.SetHost("gw.test")
	for i := 0; i+1 < len(headers); i += 2 {
		fctx.Request.Header.Add(headers[i], headers[i+1])
	}
	return &fctx
}

// Ctx wraps a request as the server does: Path is the raw path.
func Ctx(fctx *fasthttp.RequestCtx) *policy.Ctx {
	uri := fctx.Request.Header.RequestURI()
	path := uri
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		path = uri[:i]
	}
	return &policy.Ctx{Fast: fctx, Path: path, Host: []byte("gw.test"), Scheme: []byte("http")}
}
