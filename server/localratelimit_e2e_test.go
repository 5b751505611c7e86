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
