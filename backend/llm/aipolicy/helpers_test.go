package aipolicy

import (
	"net"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// compile decodes an ai policy written in the file format and compiles it.
func compile(yaml string) (*Policy, error) {
	var cfg config.AIPolicy
	if errs := decode.YAML([]byte(yaml), &cfg); errs != nil {
		return nil, errs
	}
	return New(&cfg)
}

func mustPolicy(t testing.TB, yaml string) *Policy {
	t.Helper()
	p, err := compile(yaml)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// benchPolicyOf is mustPolicy for benchmark setup outside a test.
func benchPolicyOf(yaml string) *Policy {
	p, err := compile(yaml)
	if err != nil {
		panic(err)
	}
	return p
}

// apply runs Request and returns the body, or "REJECT <status>" or
// "ERROR <message>", checking the conventions every call keeps.
func apply(t testing.TB, p *Policy, body string, f convert.Format, in *celrules.Input) string {
	t.Helper()
	src := []byte(body)
	dst := []byte("prefix:")
	out, rej, err := p.Request(dst, src, f, in)
	switch {
	case err != nil:
		return "ERROR " + err.Error()
	case rej != nil:
		var resp fasthttp.Response
		return "REJECT " + strconv.Itoa(rej.Write(&resp))
	}
	if string(src) != body {
		t.Fatalf("Request modified its input: %s", src)
	}
	if &out[0] == &src[0] {
		if len(out) != len(src) {
			t.Fatalf("unchanged body returned with another length")
		}
		return string(out)
	}
	if string(out[:7]) != "prefix:" {
		t.Fatalf("result not appended to dst: %q", out)
	}
	out = out[7:]
	if !llm.ValidObject(out) {
		t.Fatalf("output is not a JSON object: %s", out)
	}
	return string(out)
}

// requestInput is the CEL input of a POST to path with the given header
// pairs, built as the server builds it.
func requestInput(path string, headers ...string) *celrules.Input {
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(path)
	req.Header.SetHost("llm.example.com")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	fc := new(fasthttp.RequestCtx)
	fc.Init(&req, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4000}, nil)
	c := &policy.Ctx{Fast: fc, Host: []byte("llm.example.com"), Path: fc.Request.URI().PathOriginal(), Scheme: []byte("http")}
	in := celrules.InputFromCtx(c)
	return &in
}
