package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

// TestLocalRateLimitRunsInPolicyOrder: localRateLimit runs at its place in
// policy.Order, after authorization and before remoteRateLimit and every
// policy after it, on every kind of route. A request it refuses is answered
// 429 without meeting them: a direct response or a redirect (route or
// backend level) is limited too, the remote service is not asked (its quota
// stays), the external processor and a delay do not see the request. It
// used to run after the whole chain, so direct responses and redirects were
// never limited (4 of 4 requests through a limit of one an hour), and a
// refused request had spent the remote quota, met the processor and waited
// out the delay first.
func TestLocalRateLimitRunsInPolicyOrder(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	rls := &rlstest.Server{Limit: 100}
	proc := &extproctest.Server{}
	const once = `localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}]`
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /direct}}]
      policies:
        `+once+`
        directResponse: {status: 200, body: hello}
    - matches: [{path: {pathPrefix: /redirect}}]
      policies:
        `+once+`
        requestRedirect: {scheme: https}
    - matches: [{path: {pathPrefix: /backend-redirect}}]
      policies:
        `+once+`
      backends: [{host: '${UP}', policies: {requestRedirect: {scheme: https}}}]
    - matches: [{path: {pathPrefix: /remote}}]
      policies:
        `+once+`
        remoteRateLimit: {domain: d, host: '${RLS}', descriptors: [{entries: [{key: k, value: '"v"'}]}]}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /extproc}}]
      policies:
        `+once+`
        extProc: {host: '${PROC}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /delay}}]
      policies:
        `+once+`
        timeout: {requestTimeout: 2s}
        delay: {duration: 'request.headers["x-slow"] == "1" ? 60000 : 0'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "RLS": rlstest.Start(t, rls), "PROC": extproctest.Start(t, proc)})
	tests := []struct {
		path      string
		first     int
		untouched func() string // what the refused request must not have reached
	}{
		{"/direct", 200, nil},
		{"/redirect", 302, nil},
		{"/backend-redirect", 302, nil},
		{"/remote", 200, func() string {
			if n := len(rls.Requests()); n != 1 {
				return "the rate limit service was asked " + itoa(n) + " times, want once (the allowed request)"
			}
			return ""
		}},
		{"/extproc", 200, func() string {
			if n := len(proc.Streams()); n != 1 {
				return "the external processor saw " + itoa(n) + " requests, want 1 (the allowed one)"
			}
			return ""
		}},
		// The second request asks for a delay longer than the route's
		// timeout: run before the limit, it would be answered 504.
		{"/delay", 200, nil},
	}
	for _, tc := range tests {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			resp, _ := get(t, tg.url(3000)+tc.path)
			if resp.StatusCode != tc.first {
				t.Fatalf("first request: %d, want %d", resp.StatusCode, tc.first)
			}
			if got := resp.Header.Get("X-Ratelimit-Remaining"); got != "0" {
				t.Errorf("first request: x-ratelimit-remaining %q, want 0", got)
			}
			resp, body := get(t, tg.url(3000)+tc.path, "X-Slow", "1")
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("second request: %d %q (Retry-After %q), want 429 from the limit of one an hour", resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
			if tc.untouched != nil {
				if msg := tc.untouched(); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// TestLocalRateLimitLLMInPolicyOrder: an LLM route's requests buckets
// admit in the policies' order too, so a request they refuse does not
// spend the remote rate limit's quota; and the llm section's limit is
// taken once per request (it was taken twice: once after the route's
// policies, again by the exchange, so a limit of 2 let one request by).
func TestLocalRateLimitLLMInPolicyOrder(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
	rls := &rlstest.Server{Limit: 100}
	limits := `
localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}]
remoteRateLimit: {domain: d, host: '` + rlstest.Start(t, rls) + `', descriptors: [{entries: [{key: k, value: '"v"'}]}]}
`
	cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits) + `
llm:
  port: 4000
  policies:
    localRateLimit: [{maxTokens: 2, tokensPerFill: 1, fillInterval: 1h}]
  models:
  - name: m
    provider: openAI
    params: {model: gpt-4o-mini, apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}
`
	tg := startGateway(t, cfg, nil)
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for i, want := range []int{200, 429} {
		if resp, body := postJSON(t, tg.url(8080)+"/v1/chat/completions", chat); resp.StatusCode != want {
			t.Fatalf("ai route, request %d: %d %q, want %d", i+1, resp.StatusCode, body, want)
		}
	}
	if n := len(rls.Requests()); n != 1 {
		t.Errorf("the rate limit service was asked %d times, want once (the allowed request)", n)
	}
	for i, want := range []int{200, 200, 429} {
		resp, body := postJSON(t, tg.url(4000)+"/v1/chat/completions", chat)
		if resp.StatusCode != want {
			t.Fatalf("llm section, request %d: %d %q, want %d", i+1, resp.StatusCode, body, want)
		}
		if want == 200 && resp.Header.Get("X-Ratelimit-Remaining") != itoa(1-i) {
			t.Errorf("llm section, request %d: x-ratelimit-remaining %q, want %d", i+1, resp.Header.Get("X-Ratelimit-Remaining"), 1-i)
		}
	}
}

// TestLocalRateLimitAllocations: admitting a request where localRateLimit
// runs, and writing its x-ratelimit-* headers, allocates nothing, on a
// proxied route as on one a direct response answers.
func TestLocalRateLimitAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	up := fastUpstream(t)
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	const limit = `localRateLimit: [{maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1s}]`
	if err := gw.Apply(parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /direct}}]
      policies:
        `+limit+`
        directResponse: {status: 200, body: hello}
    - policies:
        `+limit+`
        requestHeaderModifier: {set: {x-a: b}}
      backends: [{host: '`+up+`'}]
`, nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Shutdown(expiredContext()) })
	addr := gw.Addrs()[3000].String()
	for _, path := range []string{"/alloc", "/direct"} {
		t.Run(path, func(t *testing.T) {
			c := &fasthttp.HostClient{Addr: addr}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + addr + path)
			do := func() {
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 || len(resp.Header.Peek("X-Ratelimit-Remaining")) == 0 {
					t.Fatalf("%v %d, x-ratelimit-remaining %q", err, resp.StatusCode(), resp.Header.Peek("X-Ratelimit-Remaining"))
				}
			}
			for range 200 { // warm pools
				do()
			}
			if allocs := testing.AllocsPerRun(2000, do); allocs >= 0.5 {
				t.Fatalf("%.2f allocations per request, want 0", allocs)
			}
		})
	}
}

// TestLocalRateLimitBucketPerRoute: every route has buckets of its own,
// whatever its name: routes named alike on two ports, unnamed routes of
// listeners named alike on two binds or of two unnamed listeners of one
// bind (each called "<listener>/route0"), two routes of one name in one
// listener, a top-level route on the listeners of two gateways (as if
// written under each, as the README has it). They used to share one bucket when their limits were the same
// (the pool's key was the route's name and the limit), so calls to one
// route spent the other's.
func TestLocalRateLimitBucketPerRoute(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	const once = `localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}]`
	route := func(name, path string) string {
		r := "\n    - "
		if name != "" {
			r += "name: " + name + "\n      "
		}
		return r + "matches: [{path: {pathPrefix: " + path + "}}]\n      policies: {" + once + "}\n      backends: [{host: '${UP}'}]"
	}
	type call struct {
		port       int
		path, host string
	}
	tests := []struct {
		desc string
		cfg  string
		a, b call
	}{
		{"listeners named alike on two binds", `
binds:
- port: 3000
  listeners:
  - name: main
    routes:` + route("", "/api") + `
- port: 3001
  listeners:
  - name: main
    routes:` + route("", "/admin"),
			call{3000, "/api", ""}, call{3001, "/admin", ""}},
		// A policy attached to listeners is each of their routes' (each
		// with buckets of its own).
		{"a gateway-wide policy on listeners named alike", `
policies:
- name: {name: limit, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  policy: {` + once + `}
binds:
- port: 3000
  listeners:
  - name: main
    routes: [{backends: [{host: '${UP}'}]}]
- port: 3001
  listeners:
  - name: main
    routes: [{backends: [{host: '${UP}'}]}]`,
			call{3000, "/", ""}, call{3001, "/", ""}},
		{"routes named alike on two ports", `
binds:
- port: 3000
  listeners:
  - routes:` + route("same", "/x") + `
- port: 3001
  listeners:
  - routes:` + route("same", "/x"),
			call{3000, "/x", ""}, call{3001, "/x", ""}},
		{"two unnamed listeners of one bind", `
binds:
- port: 3000
  listeners:
  - hostname: a.example
    routes:` + route("", "/x") + `
  - hostname: b.example
    routes:` + route("", "/x"),
			call{3000, "/x", "a.example"}, call{3000, "/x", "b.example"}},
		// Each gateway's listener serves the route as if written under it.
		{"a top-level route on two gateways", `
gateways:
  a: {port: 3000}
  b: {port: 3001}
routes:
- name: api
  gateways: [a, b]
  policies: {` + once + `}
  backends: [{host: '${UP}'}]`,
			call{3000, "/", ""}, call{3001, "/", ""}},
		{"two routes of one name in one listener", `
binds:
- port: 3000
  listeners:
  - routes:` + route("same", "/x") + route("same", "/y"),
			call{3000, "/x", ""}, call{3000, "/y", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGateway(t, tc.cfg+"\n", map[string]string{"UP": up})
			send := func(c call) int {
				t.Helper()
				resp, _ := get(t, tg.url(c.port)+c.path, "Host", c.host)
				return resp.StatusCode
			}
			for i, step := range []struct {
				c    call
				want int
			}{{tc.a, 200}, {tc.b, 200}, {tc.a, 429}, {tc.b, 429}} {
				if got := send(step.c); got != step.want {
					t.Fatalf("request %d (port %d %s%s): %d, want %d", i+1, step.c.port, step.c.host, step.c.path, got, step.want)
				}
			}
		})
	}
}

// TestLocalRateLimitReloadKeepsBuckets: a reload that keeps a route and its
// limit keeps its buckets, also when routes of other names come before it
// (its identity is its listener, name and rule, not its position).
func TestLocalRateLimitReloadKeepsBuckets(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	kept := `
    - name: kept
      matches: [{path: {pathPrefix: /kept}}]
      policies: {localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}]}
      backends: [{host: '${UP}'}]
`
	vars := map[string]string{"UP": up}
	tg := startGateway(t, "binds:\n- port: 3000\n  listeners:\n  - routes:"+kept, vars)
	if resp, _ := get(t, tg.url(3000)+"/kept"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	tg.apply(`binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /new}}]
      policies: {localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}]}
      backends: [{host: '${UP}'}]`+kept, vars)
	if resp, _ := get(t, tg.url(3000)+"/kept"); resp.StatusCode != 429 {
		t.Fatalf("after a reload adding a route before it: %d, want 429 (its spent bucket kept)", resp.StatusCode)
	}
	if resp, _ := get(t, tg.url(3000)+"/new"); resp.StatusCode != 200 {
		t.Fatalf("the new route: %d, want 200 (a bucket of its own)", resp.StatusCode)
	}
}
