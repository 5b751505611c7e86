package remoteratelimit

import (
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

func TestDescriptorsAndCost(t *testing.T) {
	rls := &rlstest.Server{Limit: 10}
	addr := rlstest.Start(t, rls)
	cost := config.ValueExpression(`int(request.headers["x-cost"])`)
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
