package guardrail_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// cloudKind starts a cloud guard's emulator and returns it, the host the
// guard calls and the guard's configuration.
type cloudKind struct {
	name  string
	start func(t *testing.T) (*guardrailtest.Server, string, string)
}

var cloudKinds = []cloudKind{
	{"openAIModeration", func(t *testing.T) (*guardrailtest.Server, string, string) {
		m := guardrailtest.NewModeration(t)
		return m.Server, openAIHost, moderationYAML(m.APIKey)
	}},
	{"bedrockGuardrails", func(t *testing.T) (*guardrailtest.Server, string, string) {
		b := guardrailtest.NewBedrock(t)
		return b.Server, bedrockHost, bedrockYAML(b, "")
	}},
	{"googleModelArmor", func(t *testing.T) (*guardrailtest.Server, string, string) {
		issuer := llmtest.NewVertex(t)
		m := guardrailtest.NewModelArmor(t, issuer)
		return m.Server, modelArmorHost, modelArmorYAML(m, issuer.ServiceAccountFile())
	}},
	{"azureContentSafety", func(t *testing.T) (*guardrailtest.Server, string, string) {
		cs := guardrailtest.NewContentSafety(t)
		return cs.Server, azureHost, azureYAML("{key: "+cs.Key+"}", "  analyzeText: {}\n")
	}},
}

// TestCloudFailures: a cloud guard's failure is an error naming the guard
// (the server answers 503), never a verdict, and each call is bounded.
func TestCloudFailures(t *testing.T) {
	failures := []struct {
		desc  string
		setup func(t *testing.T, s *guardrailtest.Server) (addr string)
		want  string // in the error
	}{
		{"unreachable", func(t *testing.T, _ *guardrailtest.Server) string { return guardrailtest.RefusedAddr(t) }, "cannot connect"},
		{"500", func(_ *testing.T, s *guardrailtest.Server) string {
			s.Fail(guardrailtest.Failure{Status: 500})
			return s.Addr()
		}, "answered 500"},
		{"429", func(_ *testing.T, s *guardrailtest.Server) string {
			s.Fail(guardrailtest.Failure{Status: 429})
			return s.Addr()
		}, "answered 429"},
		{"reset", func(_ *testing.T, s *guardrailtest.Server) string {
			s.Fail(guardrailtest.Failure{Reset: true})
			return s.Addr()
		}, ""},
		{"timeout", func(t *testing.T, s *guardrailtest.Server) string {
			t.Cleanup(s.Hold())
			return s.Addr()
		}, "timed out"},
		{"garbage body", func(_ *testing.T, s *guardrailtest.Server) string {
			s.Fail(guardrailtest.Failure{Status: 200, Body: "\x00\xffnot json"})
			return s.Addr()
		}, "invalid answer"},
		{"empty object", func(_ *testing.T, s *guardrailtest.Server) string {
			s.Fail(guardrailtest.Failure{Status: 200, Body: "{}"})
			return s.Addr()
		}, "invalid answer"},
		{"answer too large", func(_ *testing.T, s *guardrailtest.Server) string {
			s.Fail(guardrailtest.Failure{Status: 200, Body: `{"x":"` + strings.Repeat("y", 64<<10) + `"}`})
			return s.Addr()
		}, "larger than"},
	}
	for _, kind := range cloudKinds {
		for _, f := range failures {
			t.Run(kind.name+"/"+f.desc, func(t *testing.T) {
				t.Parallel()
				s, host, yaml := kind.start(t)
				addr := f.setup(t, s)
				// The timeout leaves room for a token fetch under -race.
				opts := guardrail.Options{HostOverride: map[string]string{host: addr}, Timeout: 2 * time.Second, MaxAnswer: 16 << 10}
				g := mustRequestGuard(t, yaml, opts)
				start := time.Now()
				v, err := g.Check(testContext(t), msgs("user", "hello"), nil)
				if err == nil {
					t.Fatalf("no error; verdict %+v", v)
				}
				if v.Action != guardrail.Pass || v.Rejection != nil || v.Failed {
					t.Errorf("a verdict with the error: %+v", v)
				}
				if !strings.HasPrefix(err.Error(), kind.name+" guard: ") || !strings.Contains(err.Error(), f.want) {
					t.Errorf("err %q, want it to name the guard and hold %q", err, f.want)
				}
				t.Log(err)
				if elapsed := time.Since(start); elapsed > 10*time.Second {
					t.Errorf("took %v", elapsed)
				}
			})
		}
	}
}

// TestCanceledContext: a call whose context is already done is not made.
func TestCanceledContext(t *testing.T) {
	m := guardrailtest.NewModeration(t)
	g := mustRequestGuard(t, moderationYAML(m.APIKey), override(openAIHost, m.Addr()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Check(ctx, msgs("user", "hello"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("%d calls", n)
	}
}

// TestConcurrentChecks runs one guard of each kind from many goroutines
// (with -race): a Guard is safe for concurrent use.
func TestConcurrentChecks(t *testing.T) {
	for _, kind := range cloudKinds {
		t.Run(kind.name, func(t *testing.T) {
			s, host, yaml := kind.start(t)
			g := mustRequestGuard(t, yaml, override(host, s.Addr()))
			const workers, each = 8, 5
			errs := make(chan error, workers*each)
			for range workers {
				go func() {
					for range each {
						_, err := g.Check(testContext(t), msgs("user", "hello"), nil)
						errs <- err
					}
				}()
			}
			for range workers * each {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			if n := len(s.Requests()); n != workers*each {
				t.Errorf("%d calls", n)
			}
		})
	}
}
