package server

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

// TestRemoteRateLimitAcrossReplicasE2E: two gateways asking one rate limit
// service share its limit, per descriptor; the service's answer headers
// reach the client and the backend; and the failure modes hold with the
// service down.
func TestRemoteRateLimitAcrossReplicasE2E(t *testing.T) {
	var mu sync.Mutex
	var checked string
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		checked = r.Header.Get("X-Ratelimit-Checked")
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	rls := &rlstest.Server{Limit: 3}
	addr := rlstest.Start(t, rls)
	cfg := `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        remoteRateLimit:
          domain: gateway
          host: '${RLS}'
          descriptors:
          - entries:
            - {key: tenant, value: 'request.headers["x-tenant"]'}
            type: requests
      backends: [{host: '${UP}'}]
`
	vars := map[string]string{"UP": up, "RLS": addr}
	replicas := []*testGateway{startGateway(t, cfg, vars), startGateway(t, cfg, vars)}
	statuses := []int{}
	for i := range 4 {
		resp, _ := get(t, replicas[i%2].url(3000)+"/", "X-Tenant", "a")
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("X-Ratelimit-Limit") != "limited" {
			t.Errorf("429 without the service's headers")
		}
	}
	if statuses[0] != 200 || statuses[1] != 200 || statuses[2] != 200 || statuses[3] != 429 {
		t.Fatalf("statuses across both replicas %v, want three 200s then 429", statuses)
	}
	mu.Lock()
	if checked != "yes" {
		t.Errorf("the backend did not get the service's request header: %q", checked)
	}
	mu.Unlock()
	// Another tenant has a limit of its own; a request without the header
	// makes no descriptor and is not counted.
	if resp, _ := get(t, replicas[0].url(3000)+"/", "X-Tenant", "b"); resp.StatusCode != 200 {
		t.Fatalf("tenant b: %d", resp.StatusCode)
	}
	before := len(rls.Requests())
	if resp, _ := get(t, replicas[1].url(3000)+"/"); resp.StatusCode != 200 || len(rls.Requests()) != before {
		t.Fatalf("no descriptor: %d, %d service calls", resp.StatusCode, len(rls.Requests())-before)
	}
	if got := rls.Requests()[0].GetDomain(); got != "gateway" {
		t.Errorf("domain %q", got)
	}

	// The service down: failClosed answers 500, failOpen lets requests by.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	down := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /closed}}]
      policies:
        remoteRateLimit: {domain: d, host: '${RLS}', descriptors: [{entries: [{key: k, value: '"v"'}]}]}
      backends: [{host: '${UP}'}]
    - policies:
        remoteRateLimit: {domain: d, host: '${RLS}', failureMode: failOpen, descriptors: [{entries: [{key: k, value: '"v"'}]}]}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "RLS": dead})
	if resp, body := get(t, down.url(3000)+"/closed"); resp.StatusCode != 500 || body != "rate limit service unavailable\n" {
		t.Errorf("failClosed: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, down.url(3000)+"/open"); resp.StatusCode != 200 {
		t.Errorf("failOpen: %d", resp.StatusCode)
	}
}

// TestRemoteRateLimitTokensE2E: an LLM route's token descriptor is asked
// with no hits before the exchange and charged the answer's tokens after
// it, so a budget the earlier answers spent refuses the next request.
func TestRemoteRateLimitTokensE2E(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 60, OutputTokens: 40}})
	rls := &rlstest.Server{Limit: 150}
	addr := rlstest.Start(t, rls)
	limits := `
remoteRateLimit:
  domain: llm
  host: '` + addr + `'
  descriptors:
  - entries: [{key: route, value: '"llm"'}]
    type: tokens
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits), nil)
	post := func() int {
		t.Helper()
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
		resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// 150 tokens: two exchanges of 100 are admitted (0, then 100 spent);
	// the third finds 200 spent.
	for i, want := range []int{200, 200, 429} {
		if got := post(); got != want {
			t.Fatalf("request %d: %d, want %d", i+1, got, want)
		}
		if want == 200 {
			// The charge goes out after the answer: wait for it.
			n := 2 * (i + 1)
			eventually(t, 5*time.Second, "the token charge", func() bool { return len(rls.Requests()) >= n })
		}
	}
	reqs := rls.Requests()
	check, charge := reqs[0].GetDescriptors()[0], reqs[1].GetDescriptors()[0]
	if check.GetHitsAddend().GetValue() != 0 || charge.GetHitsAddend().GetValue() != 100 {
		t.Errorf("hits: check %v, charge %v; want 0 and 100", check.GetHitsAddend(), charge.GetHitsAddend())
	}
}

// TestRemoteRateLimitCannotBreakFraming: Content-Length or
// Transfer-Encoding among the service's headers change nothing of how the
// gateway frames the request it forwards or the refusal it answers. Before,
// a Content-Length of 0 on an allowed POST failed it with 502 and nothing
// reached the backend.
func TestRemoteRateLimitCannotBreakFraming(t *testing.T) {
	up, last := bodyRecorder(t, nil)
	framing := []*corev3.HeaderValue{{Key: "content-length", Value: "0"}, {Key: "Transfer-Encoding", Value: "chunked"}}
	rls := &rlstest.Server{Limit: 2, RequestHeaders: framing, ResponseHeaders: framing}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        remoteRateLimit:
          domain: gateway
          host: '${RLS}'
          descriptors:
          - entries: [{key: route, value: '"one"'}]
            type: requests
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "RLS": rlstest.Start(t, rls)})
	for i, chunked := range []bool{false, true} {
		resp, body := postBody(t, tg.url(3000)+"/", `{"n":1}`, chunked)
		if seen, n := last(); resp.StatusCode != 200 || body != "ok" || n != i+1 || string(seen.body) != `{"n":1}` {
			t.Errorf("chunked %v: %d %q; the backend got %d requests, the last with %q", chunked, resp.StatusCode, body, n, seen.body)
		}
	}
	resp, body := postBody(t, tg.url(3000)+"/", `{"n":1}`, false)
	if resp.StatusCode != 429 || resp.Header.Get("X-Ratelimit-Limit") != "limited" || len(resp.TransferEncoding) != 0 || !strings.Contains(body, "rate limit") {
		t.Errorf("the refusal: %d %v %q", resp.StatusCode, resp.Header, body)
	}
}

// TestRemoteRateLimitInvalidUTF8E2E: a descriptor value made of the
// client's bytes that are not UTF-8 reaches the service (each run of them
// as U+FFFD). The request's strings must be UTF-8, and grpc-go refused to
// marshal it: the question never left, so failOpen let the request by
// unlimited and failClosed answered 500.
func TestRemoteRateLimitInvalidUTF8E2E(t *testing.T) {
	up, _ := headerRecorder(t, nil)
	rls := &rlstest.Server{Limit: 0}
	addr := rlstest.Start(t, rls)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /open}}]
      policies:
        remoteRateLimit: {domain: d, host: '${RLS}', failureMode: failOpen, descriptors: [{entries: [{key: tenant, value: 'request.headers["x-tenant"]'}]}]}
      backends: [{host: '${UP}'}]
    - policies:
        remoteRateLimit: {domain: d, host: '${RLS}', descriptors: [{entries: [{key: tenant, value: 'request.headers["x-tenant"]'}]}]}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "RLS": addr})
	for _, path := range []string{"/open", "/closed"} {
		t.Run(path, func(t *testing.T) {
			before := len(rls.Requests())
			if resp, _ := get(t, tg.url(3000)+path, "X-Tenant", "a\xffb"); resp.StatusCode != 429 {
				t.Fatalf("%d, want 429 from the service", resp.StatusCode)
			}
			reqs := rls.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("the service got %d requests, want 1", len(reqs)-before)
			}
			if got := reqs[len(reqs)-1].GetDescriptors()[0].GetEntries()[0].GetValue(); got != "a\uFFFDb" {
				t.Errorf("the service saw %q, want %q", got, "a\uFFFDb")
			}
		})
	}
}
