package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

// TestServiceHeadersBounded: the headers one answer of an external service
// adds to a request are bounded (policy.MaxServiceHeaderBytes, 32 KiB, the
// gateway's own HTTP/1.1 request head limit), each service as it treats an
// invalid header: ext_authz (gRPC) and the rate limit service drop what
// goes past the bound and let the rest through; ext_proc's mutation fails,
// by failureMode; the HTTP protocol's answer head is read up to the bound
// (a larger one is a service that could not decide), so its copied
// headers are too. Before, a 3 MB value went upstream (where this test's
// backend refused the head), and an HTTP service's answer over fasthttp's
// 4 KiB read buffer failed the check.
func TestServiceHeadersBounded(t *testing.T) {
	big := strings.Repeat("v", 3<<20)
	var many []*corev3.HeaderValueOption // 300 headers of 200 bytes: about 60 KiB
	for i := range 300 {
		many = append(many, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-h" + strconv.Itoa(i), Value: strings.Repeat("m", 200)}})
	}
	authz := extauthztest.Start(t, &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		hs := []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "x-big", Value: big}},
			{Header: &corev3.HeaderValue{Key: "x-good", Value: "1"}},
		}
		if r.GetAttributes().GetRequest().GetHttp().GetPath() == "/authz/many" {
			hs = many
		}
		return extauthztest.Allow(&authv3.OkHttpResponse{Headers: hs}, nil)
	}})
	rls := rlstest.Start(t, &rlstest.Server{Limit: 1000, RequestHeaders: []*corev3.HeaderValue{
		{Key: "x-big", Value: big}, {Key: "x-good", Value: "1"},
	}})
	proc := extproctest.Start(t, &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{"x-big": big[:40<<10], "x-good": "1"}), nil)}
		}
		return extproctest.Passthrough(st, m)
	}})
	httpAuthz := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 20 << 10
		if r.URL.Path == "/httpauthz/over" {
			n = 40 << 10
		}
		w.Header().Set("X-Token", strings.Repeat("t", n))
		w.WriteHeader(200)
	}))
	up, seen := headerRecorder(t, nil)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /authz}}]
      policies:
        extAuthz: {host: '${AUTHZ}', protocol: {grpc: {}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /rls}}]
      policies:
        remoteRateLimit: {domain: d, host: '${RLS}', descriptors: [{entries: [{key: k, value: '"v"'}]}]}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /proc}}]
      policies:
        extProc: {host: '${PROC}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /httpauthz}}]
      policies:
        extAuthz: {host: '${HTTPAUTHZ}', protocol: {http: {includeResponseHeaders: [x-token]}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": authz, "RLS": rls, "PROC": proc, "HTTPAUTHZ": httpAuthz})

	for _, path := range []string{"/authz", "/rls"} {
		resp, body := get(t, tg.url(3000)+path)
		if h := seen(); resp.StatusCode != 200 || h.Get("X-Big") != "" || h.Get("X-Good") != "1" {
			t.Errorf("%s: %d %q; the backend got x-big of %d bytes, x-good %q: want the large header dropped, the other through",
				path, resp.StatusCode, body, len(h.Get("X-Big")), h.Get("X-Good"))
		}
	}
	resp, body := get(t, tg.url(3000)+"/authz/many")
	h, n, size := seen(), 0, 0
	for name, vs := range h {
		if strings.HasPrefix(name, "X-H") {
			n++
			size += len(name) + len(vs[0])
		}
	}
	if resp.StatusCode != 200 || n == 0 || n == 300 || size > 32<<10 {
		t.Errorf("300 headers of 200 bytes: %d %q; the backend got %d of them, %d bytes: want those within 32 KiB", resp.StatusCode, body, n, size)
	}
	if resp, body := get(t, tg.url(3000)+"/proc"); resp.StatusCode != 500 || !strings.Contains(body, "external processing failed") {
		t.Errorf("ext_proc headers over 32 KiB: %d %q, want failClosed's 500", resp.StatusCode, body)
	}
	resp, body = get(t, tg.url(3000)+"/httpauthz")
	if got := seen().Get("X-Token"); resp.StatusCode != 200 || len(got) != 20<<10 {
		t.Errorf("an HTTP answer with a 20 KiB header: %d %q, the backend got x-token of %d bytes", resp.StatusCode, body, len(got))
	}
	if resp, body := get(t, tg.url(3000)+"/httpauthz/over"); resp.StatusCode != 403 || !strings.Contains(body, "external authorization failed") {
		t.Errorf("an HTTP answer with a 40 KiB header: %d %q, want the failure's 403", resp.StatusCode, body)
	}
}
