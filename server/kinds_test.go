package server

import (
	"reflect"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// Every policy a route or listener can hold is a routeKind, and every one a
// backend can hold is a backendKind: a kind the file accepts is never
// compiled by nobody.
func TestEveryPolicyFieldIsAKind(t *testing.T) {
	route := map[string]bool{}
	for _, k := range routeKinds {
		if route[k.name] {
			t.Errorf("routeKinds lists %q twice", k.name)
		}
		route[k.name] = true
	}
	for _, c := range []struct {
		level any
		known map[string]bool
	}{
		{config.RoutePolicies{}, route},
		{config.ListenerPolicy{}, route},
		{config.BackendPolicies{}, backendKinds},
	} {
		lt := reflect.TypeOf(c.level)
		for i := range lt.NumField() {
			f := lt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Type == reflect.TypeFor[config.Unsupported]() || name == "" {
				continue
			}
			if !c.known[name] {
				t.Errorf("%s.%s (%s) is not a kind the compiler knows", lt.Name(), f.Name, name)
			}
		}
	}
}

// Every setting of llm.policies reaches the section's route (llmBind):
// each is copied there, or is guardrails, which the models read.
func TestLLMPoliciesServed(t *testing.T) {
	served := map[string]bool{"jwtAuth": true, "authorization": true, "cors": true, "basicAuth": true, "apiKey": true,
		"extAuthz": true, "transformations": true, "localRateLimit": true, "guardrails": true, "remoteRateLimit": true, "extProc": true}
	lt := reflect.TypeOf(config.LLMPolicies{})
	for i := range lt.NumField() {
		f := lt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type == reflect.TypeFor[config.Unsupported]() {
			continue
		}
		if !served[name] {
			t.Errorf("llm.policies.%s is decoded but llmBind does not pass it on", name)
		}
	}
}
