package guardrail_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/config"
)

// TestGuardPolicies: a guard's policies set headers on its calls, bound
// them in time, and give the credentials (passthrough: the client's).
func TestGuardPolicies(t *testing.T) {
	m := guardrailtest.NewModeration(t)
	opts := override(openAIHost, m.Addr())

	t.Run("requestHeaderModifier, then the key over it", func(t *testing.T) {
		g := mustRequestGuard(t, `openAIModeration:
  policies:
    requestHeaderModifier: {set: {x-org: org-7, authorization: "Bearer from-modifier"}}
    backendAuth: {key: `+m.APIKey+`}
`, opts)
		if _, err := g.Check(testContext(t), msgs("user", "hi"), nil); err != nil {
			t.Fatal(err)
		}
		r := m.Last()
		if r.Header.Get("X-Org") != "org-7" || r.Header.Get("Authorization") != "Bearer "+m.APIKey {
			t.Errorf("headers %v", r.Header)
		}
	})
	t.Run("passthrough", func(t *testing.T) {
		g := mustRequestGuard(t, "openAIModeration: {policies: {backendAuth: {passthrough: {}}}}\n", opts)
		if _, err := g.Check(testContext(t), msgs("user", "hi"), &guardrail.Input{Token: []byte(m.APIKey)}); err != nil {
			t.Fatal(err)
		}
		if got := m.Last().Header.Get("Authorization"); got != "Bearer "+m.APIKey {
			t.Errorf("Authorization %q", got)
		}
		// Without a token, nothing is inserted (and the service refuses).
		_, err := g.Check(testContext(t), msgs("user", "hi"), nil)
		if err == nil || m.Last().Header.Get("Authorization") != "" {
			t.Errorf("err %v Authorization %q", err, m.Last().Header.Get("Authorization"))
		}
	})
	t.Run("http.requestTimeout bounds the call", func(t *testing.T) {
		release := m.Hold()
		defer release()
		g := mustRequestGuard(t, moderationYAML(m.APIKey)+"    http: {requestTimeout: 200ms}\n", guardrail.Options{
			HostOverride: map[string]string{openAIHost: m.Addr()}, Timeout: time.Minute})
		start := time.Now()
		_, err := g.Check(testContext(t), msgs("user", "hi"), nil)
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Errorf("err %v", err)
		}
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("took %v", elapsed)
		}
	})
}

// TestPoolFactory: with Options.Pool, the server's pools carry the calls:
// the factory gets the address, TLS and tcp policy.
func TestPoolFactory(t *testing.T) {
	type poolCall struct {
		addr string
		tls  backend.UpstreamTLS
		tcp  bool
	}
	var calls []poolCall
	pools := backend.NewPools()
	factory := func(addr string, tls backend.UpstreamTLS, tcp *config.BackendTCP) *backend.Upstream {
		calls = append(calls, poolCall{addr, tls, tcp != nil})
		return pools.Get(addr, backend.PoolSettings{TLS: tls})
	}
	const yaml = `bedrockGuardrails:
  guardrailIdentifier: gr
  guardrailVersion: "1"
  region: eu-west-3
  policies:
    tcp: {keepalives: {enabled: false}, connectTimeout: 2s}
`
	mustRequestGuard(t, yaml, guardrail.Options{Pool: factory})
	b := guardrailtest.NewBedrock(t)
	mustRequestGuard(t, yaml, guardrail.Options{Pool: factory, HostOverride: map[string]string{"bedrock-runtime.eu-west-3.amazonaws.com": b.Addr()}})
	want := []poolCall{
		{"bedrock-runtime.eu-west-3.amazonaws.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "bedrock-runtime.eu-west-3.amazonaws.com"}, true},
		{b.Addr(), backend.UpstreamTLS{}, true},
	}
	if len(calls) != len(want) || calls[0] != want[0] || calls[1] != want[1] {
		t.Errorf("pool calls %+v, want %+v", calls, want)
	}

	// A call goes through the pool the factory gave.
	m := guardrailtest.NewModeration(t)
	g := mustRequestGuard(t, moderationYAML(m.APIKey), guardrail.Options{Pool: factory, HostOverride: map[string]string{openAIHost: m.Addr()}})
	if _, err := g.Check(testContext(t), msgs("user", "hi"), nil); err != nil {
		t.Fatal(err)
	}
	if pools.Len() != 3 {
		t.Errorf("%d pools", pools.Len())
	}
}
