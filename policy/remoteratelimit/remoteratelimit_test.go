package remoteratelimit

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

func TestDescriptorsAndCost(t *testing.T) {
	rls := &rlstest.Server{Limit: 10}
	addr := rlstest.Start(t, rls)
	cost := config.RateLimitCost(`int(request.headers["x-cost"])`)
	p, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "path", Value: "request.path"}, {Key: "m", Value: "request.method"}}, Cost: &cost},
		{Entries: []config.RateLimitEntry{{Key: "user", Value: "jwt.sub"}}}, // no token: skipped
	}}, Options{Addr: addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/a", "X-Cost", "4"))
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("limited")
	}
	reqs := rls.Requests()
	if len(reqs) != 1 || len(reqs[0].GetDescriptors()) != 1 {
		t.Fatalf("requests %v", reqs)
	}
	d := reqs[0].GetDescriptors()[0]
	if len(d.GetEntries()) != 2 || d.GetEntries()[0].GetValue() != "/a" || d.GetEntries()[1].GetValue() != "GET" || d.GetHitsAddend().GetValue() != 4 {
		t.Fatalf("descriptor %v", d)
	}
	// Three more requests of cost 4 pass the limit of 10 on the third.
	var last policy.Result
	for range 2 {
		c = policytest.Ctx(policytest.NewRequest("GET", "/a", "X-Cost", "4"))
		last = p.OnRequest(c)
	}
	if last != policy.Done || c.Fast.Response.StatusCode() != 429 {
		t.Fatalf("12 hits of 10: %v %d", last, c.Fast.Response.StatusCode())
	}
}

func TestCompileErrors(t *testing.T) {
	_, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "a", Value: "request.path =="}}},
	}}, Options{Addr: "127.0.0.1:1"})
	if fe, ok := err.(*policy.FieldError); !ok || fe.Field != "descriptors[0].entries[0].value" {
		t.Fatalf("err = %v", err)
	}
}

// TestLimitOverride: limitOverride sends the descriptor's limit, computed
// per request; a value that is not a limit leaves the descriptor out.
func TestLimitOverride(t *testing.T) {
	rls := &rlstest.Server{Limit: 10}
	addr := rlstest.Start(t, rls)
	override := config.ValueExpression(`{"unit": request.headers["x-unit"], "requestsPerUnit": int(request.headers["x-quota"])}`)
	p, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"v"`}}, LimitOverride: &override},
	}}, Options{Addr: addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		unit, quota string
		want        typev3.RateLimitUnit // UNKNOWN: the descriptor is left out
		perUnit     uint32
	}{
		{"minute", "100", typev3.RateLimitUnit_MINUTE, 100},
		{"Hour", "0", typev3.RateLimitUnit_HOUR, 0},
		{"fortnight", "5", typev3.RateLimitUnit_UNKNOWN, 0},
		{"second", "-1", typev3.RateLimitUnit_UNKNOWN, 0},
		{"second", "4294967296", typev3.RateLimitUnit_UNKNOWN, 0},
	} {
		before := len(rls.Requests())
		c := policytest.Ctx(policytest.NewRequest("GET", "/", "X-Unit", tc.unit, "X-Quota", tc.quota))
		if p.OnRequest(c) != policy.Continue {
			t.Fatalf("%s/%s: limited", tc.unit, tc.quota)
		}
		reqs := rls.Requests()
		if tc.want == typev3.RateLimitUnit_UNKNOWN {
			if len(reqs) != before {
				t.Errorf("%s/%s: asked with an invalid override", tc.unit, tc.quota)
			}
			continue
		}
		l := reqs[len(reqs)-1].GetDescriptors()[0].GetLimit()
		if l.GetUnit() != tc.want || l.GetRequestsPerUnit() != tc.perUnit {
			t.Errorf("%s/%s: limit %v", tc.unit, tc.quota, l)
		}
	}
}

// TestTokenCost: a token descriptor's cost is evaluated once the answer is
// complete, over the request and llm; without one the charge is the total;
// one that fails leaves its descriptor out of the charge.
func TestTokenCost(t *testing.T) {
	rls := &rlstest.Server{Limit: 1000}
	addr := rlstest.Start(t, rls)
	weighted := config.RateLimitCost(`llm.inputTokens + 4 * llm.outputTokens + int(request.headers["x-extra"])`)
	failing := config.RateLimitCost(`llm.nope`)
	p, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"weighted"`}}, Type: "tokens", Cost: &weighted},
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"total"`}}, Type: "tokens"},
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"failing"`}}, Type: "tokens", Cost: &failing},
	}}, Options{Addr: addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("POST", "/", "X-Extra", "5"))
	if p.OnRequest(c) != policy.Continue || len(c.TokenCharges) != 1 {
		t.Fatalf("admission: %d charges", len(c.TokenCharges))
	}
	c.TokenCharges[0](policy.TokenUsage{Total: 13, LLM: func() map[string]any {
		return map[string]any{"inputTokens": int64(10), "outputTokens": int64(3), "totalTokens": int64(13)}
	}})
	deadline := time.Now().Add(5 * time.Second)
	for len(rls.Requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no charge")
		}
		time.Sleep(time.Millisecond)
	}
	charge := rls.Requests()[1].GetDescriptors()
	got := map[string]uint64{}
	for _, d := range charge {
		got[d.GetEntries()[0].GetValue()] = d.GetHitsAddend().GetValue()
	}
	if len(got) != 2 || got["weighted"] != 10+4*3+5 || got["total"] != 13 {
		t.Fatalf("charged %v, want weighted 27 and total 13 (failing left out)", got)
	}
}

// TestRequestHeadersReplaceEveryValue: a header the service adds to an
// allowed request replaces every value the client sent under its name,
// not only the first (fasthttp's Set): agentgateway inserts it.
func TestRequestHeadersReplaceEveryValue(t *testing.T) {
	rls := &rlstest.Server{Limit: 10, RequestHeaders: []*corev3.HeaderValue{{Key: "x-tenant", Value: "t1"}}}
	addr := rlstest.Start(t, rls)
	p, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"v"`}}},
	}}, Options{Addr: addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/",
		"X-Ratelimit-Checked", "forged1", "X-Ratelimit-Checked", "forged2", "X-Tenant", "m1", "X-Tenant", "m2"))
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("limited")
	}
	for name, want := range map[string]string{"X-Ratelimit-Checked": "yes", "X-Tenant": "t1"} {
		if got := c.Fast.Request.Header.PeekAll(name); len(got) != 1 || string(got[0]) != want {
			t.Errorf("%s = %q, want only %q", name, got, want)
		}
	}
}

// TestRequestHeadersKeepHost: the service cannot change the request's
// Host (Envoy refuses routing header mutations by default); its other
// headers still go on.
func TestRequestHeadersKeepHost(t *testing.T) {
	rls := &rlstest.Server{Limit: 10, RequestHeaders: []*corev3.HeaderValue{
		{Key: "host", Value: "evil.example"}, {Key: "Host", Value: "evil.example"}, {Key: ":authority", Value: "evil.example"}, {Key: "x-tenant", Value: "t1"},
	}}
	addr := rlstest.Start(t, rls)
	core, logs := observer.New(zap.DebugLevel)
	p, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"v"`}}},
	}}, Options{Addr: addr, Timeout: time.Second, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("limited")
	}
	req := &c.Fast.Request
	if got := req.Header.PeekAll("Host"); len(got) != 1 || string(req.Host()) != "gw.test" {
		t.Errorf("Host %q, %q; want only gw.test", got, req.Host())
	}
	if got := string(req.Header.Peek("X-Tenant")); got != "t1" {
		t.Errorf("X-Tenant %q, want t1", got)
	}
	if n := logs.FilterLevelExact(zap.DebugLevel).Len(); n != 3 {
		t.Errorf("%d debug lines, want one per header ignored", n)
	}
}

// TestResponseHeaders: as agentgateway's apply, an allowed request's
// response gets the service's response headers (each replacing every
// value of its name) and x-ratelimit-* headers from the most constrained
// status with a limit, unless the service named one of those; a refusal
// gets the same on its 429, with the service's raw_body when it sent one.
func TestResponseHeaders(t *testing.T) {
	cost := config.RateLimitCost(`3`)
	descriptors := []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"light"`}}},
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"heavy"`}}, Cost: &cost},
	}
	for _, tc := range []struct {
		desc       string
		rls        *rlstest.Server
		wantStatus int
		wantBody   string
		want       map[string][]string // nil values: absent
	}{
		{
			desc:       "allowed: the service's headers and the tightest limit's",
			rls:        &rlstest.Server{Limit: 5, ReportLimits: true, ResetIn: 42500 * time.Millisecond, OKResponseHeaders: []*corev3.HeaderValue{{Key: "x-quota", Value: "q1"}}},
			wantStatus: 200, wantBody: "backend",
			want: map[string][]string{"X-Quota": {"q1"}, "X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"2"}, "X-Ratelimit-Reset": {"42"}},
		},
		{
			desc:       "allowed: the service names an x-ratelimit header",
			rls:        &rlstest.Server{Limit: 5, ReportLimits: true, OKResponseHeaders: []*corev3.HeaderValue{{Key: "x-ratelimit-remaining", Value: "few"}}},
			wantStatus: 200, wantBody: "backend",
			want: map[string][]string{"X-Quota": {"b1", "b2"}, "X-Ratelimit-Remaining": {"few"}, "X-Ratelimit-Limit": nil},
		},
		{
			desc:       "allowed: no status has a limit",
			rls:        &rlstest.Server{Limit: 5},
			wantStatus: 200, wantBody: "backend",
			want: map[string][]string{"X-Ratelimit-Limit": nil, "X-Ratelimit-Remaining": {"backend"}},
		},
		{
			desc:       "refused with a raw body",
			rls:        &rlstest.Server{Limit: 2, ReportLimits: true, RawBody: []byte(`{"error":"slow down"}`), ResponseHeaders: []*corev3.HeaderValue{{Key: "content-type", Value: "application/json"}}},
			wantStatus: 429, wantBody: `{"error":"slow down"}`,
			want: map[string][]string{"Content-Type": {"application/json"}, "X-Ratelimit-Limit": {"2"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"0"}},
		},
		{
			desc:       "refused without one",
			rls:        &rlstest.Server{Limit: 2},
			wantStatus: 429, wantBody: "rate limit exceeded\n",
			want: map[string][]string{"Content-Type": {"text/plain; charset=utf-8"}, "X-Ratelimit-Limit": {"limited"}, "X-Ratelimit-Remaining": nil},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			addr := rlstest.Start(t, tc.rls)
			p, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: descriptors}, Options{Addr: addr, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			b := policy.NewChainBuilder()
			b.Add(policy.KindRemoteRateLimit, p)
			chain := b.Build()
			c := policytest.Ctx(policytest.NewRequest("GET", "/"))
			resp := &c.Fast.Response
			if chain.RunRequest(c) == policy.Continue {
				resp.Header.Add("X-Quota", "b1")
				resp.Header.Add("X-Quota", "b2")
				resp.Header.Set("X-Ratelimit-Remaining", "backend")
				resp.SetBodyString("backend")
			}
			chain.RunResponse(c)
			if resp.StatusCode() != tc.wantStatus || string(resp.Body()) != tc.wantBody {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode(), resp.Body(), tc.wantStatus, tc.wantBody)
			}
			for name, want := range tc.want {
				got := resp.Header.PeekAll(name)
				if name == "Content-Type" {
					got = [][]byte{resp.Header.ContentType()}
				}
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) && (len(got) != 0 || len(want) != 0) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// failingRLS answers every question with a gRPC error of its own words.
type failingRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	msg string
}

func (f *failingRLS) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return nil, status.Error(codes.Unavailable, f.msg)
}

// TestServiceErrorBounded: a service's error text is bounded where it is
// logged, for a question and for a token charge: a 100 KB message made a
// 100 KB warning per request. The failure mode still applies.
func TestServiceErrorBounded(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	addr := policytest.ServeGRPC(t, func(s *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(s, &failingRLS{msg: long}) })
	core, logs := observer.New(zap.WarnLevel)
	p, err := New(&config.RemoteRateLimit{Domain: "d", Descriptors: []config.RateLimitDescriptor{
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"v"`}}},
		{Entries: []config.RateLimitEntry{{Key: "k", Value: `"t"`}}, Type: "tokens"},
	}}, Options{Addr: addr, Timeout: time.Second, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 500 {
		t.Fatalf("%d, want failClosed's 500", c.Fast.Response.StatusCode())
	}
	c.TokenCharges[0](policy.TokenUsage{Total: 10, LLM: func() map[string]any { return map[string]any{} }})
	deadline := time.Now().Add(5 * time.Second)
	for logs.Len() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines logged, want 2", logs.Len())
		}
		time.Sleep(time.Millisecond)
	}
	for _, e := range logs.All() {
		text := fmt.Sprint(e.ContextMap()["error"])
		if len(text) > 400 || !strings.Contains(text, "truncated") || !strings.Contains(text, "xxxx") {
			t.Errorf("%s: logged %d bytes (%.80q...), want its first bytes, marked as truncated", e.Message, len(text), text)
		}
	}
}

// TestServiceOutageLogThrottled: a service that cannot be reached (a port
// that refuses) fails every request, and the log says so once per
// logEvery, with the count of the lines held back, for questions in either
// failure mode and for token charges; the failure mode still applies to
// each request. Every failed request wrote a warning (300 lines for 300
// requests).
func TestServiceOutageLogThrottled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		mode   string
		status int
	}{{"failClosed", 500}, {"failOpen", 200}} {
		t.Run(tc.mode, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			p, err := New(&config.RemoteRateLimit{Domain: "d", FailureMode: tc.mode, Descriptors: []config.RateLimitDescriptor{
				{Entries: []config.RateLimitEntry{{Key: "k", Value: `"v"`}}},
				{Entries: []config.RateLimitEntry{{Key: "k", Value: `"t"`}}, Type: "tokens"},
			}}, Options{Addr: dead, Timeout: time.Second, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			var clock atomic.Int64
			p.now = func() time.Time { return time.Unix(0, clock.Load()) }
			const requests = 50
			ask := func() {
				t.Helper()
				c := policytest.Ctx(policytest.NewRequest("GET", "/"))
				p.OnRequest(c)
				if got := c.Fast.Response.StatusCode(); got != tc.status {
					t.Fatalf("status %d, want %d (%s)", got, tc.status, tc.mode)
				}
				c.TokenCharges[0](policy.TokenUsage{Total: 10, LLM: func() map[string]any { return map[string]any{} }})
			}
			lines := func(msg string) []observer.LoggedEntry {
				return logs.FilterMessageSnippet(msg).All()
			}
			// charges waits for the background charges to have failed:
			// logged (each line after the first counting those it held
			// back) or counted.
			charges := func(n int64) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					got := p.chargeLog.Dropped()
					for _, e := range lines("could not charge") {
						held, _ := e.ContextMap()["similar_errors_not_logged"].(int64)
						got += 1 + held
					}
					if got >= n {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d charges failed, want %d", got, n)
					}
					time.Sleep(time.Millisecond)
				}
			}
			for range requests {
				ask()
			}
			charges(requests)
			if n := len(lines("did not answer")); n != 1 {
				t.Fatalf("%d lines for %d failed questions within %v, want 1", n, requests, logEvery)
			}
			if n := len(lines("could not charge")); n != 1 {
				t.Fatalf("%d lines for %d failed charges within %v, want 1", n, requests, logEvery)
			}
			clock.Add(int64(logEvery))
			ask()
			charges(requests + 1)
			for _, msg := range []string{"did not answer", "could not charge"} {
				got := lines(msg)
				if len(got) != 2 || got[1].ContextMap()["similar_errors_not_logged"] != int64(requests-1) {
					t.Fatalf("%q after %v: %d lines, the last %v; want a second with %d held back", msg, logEvery, len(got), got[len(got)-1].ContextMap(), requests-1)
				}
			}
		})
	}
}
