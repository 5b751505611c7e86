package mcp

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

// FuzzServePost feeds arbitrary bodies, session ids and content types to the
// MCP endpoint: it must answer every one with a status and never panic or
// reach a target (the only target here does not exist).
func FuzzServePost(f *testing.F) {
	b, err := New(Options{Name: "fuzz", Config: &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: "http://127.0.0.1:1/mcp"}}}})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "", "application/json")
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), "abc", "application/json")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), "", "application/json; charset=utf-8")
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","result":{}}`), "eyJuIjoieCJ9", "application/json")
	f.Add([]byte(`{`), "", "text/plain")
	f.Fuzz(func(t *testing.T, body []byte, session, contentType string) {
		var fctx fasthttp.RequestCtx
		fctx.Request.Header.SetMethod(fasthttp.MethodPost)
		fctx.Request.SetRequestURI("/mcp")
		fctx.Request.Header.SetContentType(contentType)
		if session != "" {
			fctx.Request.Header.Set(headerSessionID, session)
		}
		fctx.Request.SetBody(body)
		b.Serve(&Request{Fast: &fctx, MaxBody: 4096})
		if st := fctx.Response.StatusCode(); st < 200 || st > 599 {
			t.Fatalf("status %d", st)
		}
	})
}
