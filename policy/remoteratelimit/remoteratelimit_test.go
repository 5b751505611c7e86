package remoteratelimit

import (
	"testing"
	"time"

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
