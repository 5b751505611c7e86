package extproc

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestImmediateResponseDropsOnlyBadHeaders: an immediate response with one
// header that cannot travel (a CR/LF in its value, an invalid name, an
// unknown append_action) or that is not the service's (framing,
// hop-by-hop, a pseudo-header), or past policy.MaxServiceHeaderBytes,
// reaches the client with its other headers;
// before, one bad header dropped them all (a 401 lost its
// WWW-Authenticate).
func TestImmediateResponseDropsOnlyBadHeaders(t *testing.T) {
	set := func(k, v string, action corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}, AppendAction: action}
	}
	const overwrite = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	svc := &extproctest.Server{Answer: func(*extproctest.Stream, *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
			Headers: &procv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				set("www-authenticate", `Bearer realm="api"`, overwrite),
				set("x-bad", "a\r\nx-injected: 1", overwrite),
				set("bad name", "v", overwrite),
				set("x-unknown-action", "v", corev3.HeaderValueOption_HeaderAppendAction(9)),
				set("content-length", "0", overwrite),
				set("connection", "upgrade", overwrite),
				set(":status", "200", overwrite),
				set("x-huge", strings.Repeat("h", 40<<10), overwrite),
				{Header: nil},
				set("x-why", "no token", overwrite),
			}},
			Body: []byte("sign in"),
		}}}}
	}}
	p := compile(t, extproctest.Start(t, svc), false, 5*time.Second)
	c := newCtx("GET", "/x", "")
	if p.OnRequest(c) != policy.Done {
		t.Fatal("the immediate response did not answer the request")
	}
	resp := &c.Fast.Response
	if resp.StatusCode() != 401 || string(resp.Body()) != "sign in" {
		t.Fatalf("%d %q, want the service's 401", resp.StatusCode(), resp.Body())
	}
	if got := string(resp.Header.Peek("WWW-Authenticate")); got != `Bearer realm="api"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
	if got := string(resp.Header.Peek("X-Why")); got != "no token" {
		t.Errorf("X-Why %q", got)
	}
	for _, name := range []string{"X-Bad", "X-Injected", "Bad Name", "X-Unknown-Action", "Connection", "X-Huge"} {
		if v := resp.Header.Peek(name); v != nil {
			t.Errorf("%s: %q, want it left out", name, v)
		}
	}
	if resp.Header.ConnectionUpgrade() || string(resp.Header.Peek("Content-Length")) == "0" {
		t.Errorf("framing or hop-by-hop fields from the service: %q", resp.Header.Header())
	}
}
