package fault

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
)

func delay(t *testing.T, fixed time.Duration, expr string) *Delay {
	t.Helper()
	d, err := NewDelay(&config.Delay{Duration: config.FaultDuration{Fixed: fixed, Expr: expr}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDelayFor(t *testing.T) {
	c := policytest.Ctx(policytest.NewRequest("GET", "/", "X-Chaos", "1"))
	for _, tc := range []struct {
		desc string
		d    *Delay
		want time.Duration
	}{
		{"fixed", delay(t, 2*time.Second, ""), 2 * time.Second},
		{"milliseconds by header", delay(t, 0, `request.headers["x-chaos"] == "1" ? 500 : 0`), 500 * time.Millisecond},
		{"a double", delay(t, 0, `1.5`), 1500 * time.Microsecond},
		{"a duration", delay(t, 0, `duration("250ms")`), 250 * time.Millisecond},
		{"negative is none", delay(t, 0, `-5`), 0},
		{"a failing expression is none", delay(t, 0, `jwt.sub == "x" ? 5 : 1`), 0},
		{"a string is none", delay(t, 0, `"soon"`), 0},
		{"capped", delay(t, 0, `duration("10h")`), config.MaxDelay},
	} {
		if got := tc.d.For(c); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestDelayWaits(t *testing.T) {
	d := delay(t, 0, `request.headers["x-chaos"] == "1" ? 50 : 0`)
	c := policytest.Ctx(policytest.NewRequest("GET", "/", "X-Chaos", "1"))
	start := time.Now()
	if d.OnRequest(c) != policy.Continue {
		t.Fatal("answered")
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("waited %v, want at least 50ms", waited)
	}
}

// random() is drawn per evaluation, not once at load.
func TestRandomPerRequest(t *testing.T) {
	status := 503
	r, err := NewDirectResponse(&config.DirectResponse{Conditional: []config.ConditionalDirectResponse{
		{Condition: "random() < 0.5", Status: &status, Body: config.Bytes("injected fault")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	answered := 0
	const n = 2000
	for range n {
		c := policytest.Ctx(policytest.NewRequest("GET", "/"))
		if r.OnRequest(c) == policy.Done {
			answered++
			if c.Fast.Response.StatusCode() != 503 || string(c.Fast.Response.Body()) != "injected fault" {
				t.Fatalf("answer %d %q", c.Fast.Response.StatusCode(), c.Fast.Response.Body())
			}
		}
	}
	// Half, within nine standard deviations (22 each).
	if answered < 800 || answered > 1200 {
		t.Fatalf("%d of %d answered, want about half", answered, n)
	}
}

func TestConditionalResponse(t *testing.T) {
	s503, s404 := 503, 404
	r, err := NewDirectResponse(&config.DirectResponse{Conditional: []config.ConditionalDirectResponse{
		{Condition: `request.headers["x-fail"] == "1"`, Status: &s503},
		{Condition: `request.path == "/gone"`, Status: &s404, Body: config.Bytes("gone")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, header string
		want         int // 0: goes on
	}{{"/", "1", 503}, {"/gone", "", 404}, {"/", "", 0}} {
		var h []string
		if tc.header != "" {
			h = []string{"X-Fail", tc.header}
		}
		c := policytest.Ctx(policytest.NewRequest("GET", tc.path, h...))
		res := r.OnRequest(c)
		if tc.want == 0 && res != policy.Continue || tc.want != 0 && (res != policy.Done || c.Fast.Response.StatusCode() != tc.want) {
			t.Errorf("%s %s: %v %d, want %d", tc.path, tc.header, res, c.Fast.Response.StatusCode(), tc.want)
		}
	}
	// The plain form is the plain policy.
	if p, err := NewDirectResponse(&config.DirectResponse{Status: &s404}); err != nil {
		t.Fatal(err)
	} else if _, ok := p.(*policy.DirectResponse); !ok {
		t.Fatalf("plain form is %T", p)
	}
}
