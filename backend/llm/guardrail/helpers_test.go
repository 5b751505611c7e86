package guardrail_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// newRequestGuard decodes a request guard written in the file format and
// compiles it.
func newRequestGuard(yaml string, opts guardrail.Options) (*guardrail.Guard, error) {
	var c config.RequestGuard
	if errs := decode.YAML([]byte(yaml), &c); errs != nil {
		return nil, errs
	}
	return guardrail.NewRequestGuard(&c, opts)
}

func newResponseGuard(yaml string, opts guardrail.Options) (*guardrail.Guard, error) {
	var c config.ResponseGuard
	if errs := decode.YAML([]byte(yaml), &c); errs != nil {
		return nil, errs
	}
	return guardrail.NewResponseGuard(&c, opts)
}

func mustRequestGuard(t testing.TB, yaml string, opts guardrail.Options) *guardrail.Guard {
	t.Helper()
	g, err := newRequestGuard(yaml, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

func mustResponseGuard(t testing.TB, yaml string, opts guardrail.Options) *guardrail.Guard {
	t.Helper()
	g, err := newResponseGuard(yaml, opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

// fieldPath is the path of a compile error (a *decode.FieldError), or the
// error text when it is another error.
func fieldPath(err error) string {
	var fe *decode.FieldError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return "not a FieldError: " + err.Error()
}

// testContext bounds a test's calls.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// msgs builds messages from role, content pairs.
func msgs(pairs ...string) []guardrail.Message {
	out := make([]guardrail.Message, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, guardrail.Message{Role: pairs[i], Content: pairs[i+1]})
	}
	return out
}

// clientRequest is a client's POST to path with header pairs, as the
// server sees it: its headers, and the CEL input built from them.
func clientRequest(path string, claims map[string]any, headers ...string) (*fasthttp.RequestHeader, *celrules.Input) {
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(path)
	req.Header.SetHost("llm.example.com")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	fc := new(fasthttp.RequestCtx)
	fc.Init(&req, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4000}, nil)
	c := &policy.Ctx{Fast: fc, Host: []byte("llm.example.com"), Path: fc.Request.URI().PathOriginal(), Scheme: []byte("http"), Claims: claims}
	in := celrules.InputFromCtx(c)
	hdr := new(fasthttp.RequestHeader)
	fc.Request.Header.CopyTo(hdr)
	return hdr, &in
}
