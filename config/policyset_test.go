package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestPolicySetMerge(t *testing.T) {
	listenerCORS := &CORS{AllowOrigins: []string{"https://a.example"}}
	routeCORS := &CORS{AllowOrigins: []string{"https://b.example"}}
	listenerRules := &CELRuleSet{Rules: []CELRule{{Expr: "a"}}}
	routeRules := &CELRuleSet{Rules: []CELRule{{Kind: RuleDeny, Expr: "b"}}}
	backendAI := &AIPolicy{ModelAliases: map[string]string{"x": "y"}, Defaults: map[string]any{"t": 1}}
	routeAI := &AIPolicy{Defaults: map[string]any{"t": 2}}

	tests := []struct {
		desc    string
		attach  func(s *PolicySet)
		kind    string
		want    any
		origins []PolicyOrigin
	}{
		{
			desc: "a kind set at one level is that level's",
			attach: func(s *PolicySet) {
				s.Attach(LevelListener, "l.policies", &ListenerPolicy{CORS: listenerCORS})
				s.Attach(LevelRoute, "r.policies", &RoutePolicies{})
			},
			kind: "cors", want: listenerCORS,
			origins: []PolicyOrigin{{LevelListener, "l.policies.cors"}},
		},
		{
			desc: "the higher level replaces the lower whole",
			attach: func(s *PolicySet) {
				s.Attach(LevelListener, "l.policies", &ListenerPolicy{CORS: listenerCORS})
				s.Attach(LevelRoute, "r.policies", &RoutePolicies{CORS: routeCORS})
			},
			kind: "cors", want: routeCORS,
			origins: []PolicyOrigin{{LevelListener, "l.policies.cors"}, {LevelRoute, "r.policies.cors"}},
		},
		{
			desc: "authorization rules accumulate, the lower level's first",
			attach: func(s *PolicySet) {
				s.Attach(LevelListener, "l.policies", &ListenerPolicy{Authorization: listenerRules})
				s.Attach(LevelRoute, "r.policies", &RoutePolicies{Authorization: routeRules})
			},
			kind: "authorization", want: &CELRuleSet{Rules: []CELRule{{Expr: "a"}, {Kind: RuleDeny, Expr: "b"}}},
			origins: []PolicyOrigin{{LevelListener, "l.policies.authorization"}, {LevelRoute, "r.policies.authorization"}},
		},
		{
			desc: "the ai policy merges field by field",
			attach: func(s *PolicySet) {
				s.Attach(LevelRoute, "r.policies", &RoutePolicies{AI: backendAI})
				s.Attach(LevelBackend, "b.policies", &BackendPolicies{AI: routeAI})
			},
			kind: "ai", want: &AIPolicy{ModelAliases: map[string]string{"x": "y"}, Defaults: map[string]any{"t": 2}},
			origins: []PolicyOrigin{{LevelRoute, "r.policies.ai"}, {LevelBackend, "b.policies.ai"}},
		},
		{
			desc:   "a nil policies struct attaches nothing",
			attach: func(s *PolicySet) { s.Attach(LevelRoute, "r.policies", (*RoutePolicies)(nil)) },
			kind:   "cors",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var s PolicySet
			tc.attach(&s)
			got := s.Get(tc.kind)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("Get(%q) = %#v, want nil", tc.kind, got)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Get(%q) = %#v, want %#v", tc.kind, got, tc.want)
			}
			if o := s.Origins(tc.kind); !reflect.DeepEqual(o, tc.origins) {
				t.Errorf("Origins = %v, want %v", o, tc.origins)
			}
			if p := s.Path(tc.kind); p != tc.origins[len(tc.origins)-1].Path {
				t.Errorf("Path = %q", p)
			}
		})
	}
	// The merges leave the attached values as they were.
	if len(listenerRules.Rules) != 1 || len(routeRules.Rules) != 1 || backendAI.Defaults["t"] != 1 {
		t.Error("a merge modified an attached value")
	}
}

func TestPolicySetCloneAndFill(t *testing.T) {
	var base PolicySet
	base.Attach(LevelListener, "l.policies", &ListenerPolicy{CORS: &CORS{}})
	a := base.Clone()
	a.Attach(LevelRoute, "r.policies", &RoutePolicies{CSRF: &CSRF{}})
	if base.Has("csrf") {
		t.Fatal("attaching to a clone changed its original")
	}
	if !a.Has("cors") || !a.Has("csrf") {
		t.Fatalf("clone kinds = %v", a.Kinds())
	}
	var bp BackendPolicies
	var s PolicySet
	auth := &BackendAuth{}
	s.Attach(LevelBackend, "b.policies", &BackendPolicies{BackendAuth: auth})
	s.Fill(&bp)
	if bp.BackendAuth != auth {
		t.Fatalf("Fill left backendAuth %v", bp.BackendAuth)
	}
	if got := PolicyOf[BackendAuth](&s, "backendAuth"); got != auth {
		t.Fatalf("PolicyOf = %v", got)
	}
	if PolicyOf[CORS](&s, "cors") != nil {
		t.Fatal("PolicyOf of an unset kind is not nil")
	}
}

// Every field of a policies struct is a kind: its json name, the same at
// every level that has it, with the same type there (the one policy
// model: a kind means one thing wherever it is attached).
func TestPolicyFieldsAgreeAcrossLevels(t *testing.T) {
	types := map[string]reflect.Type{}
	for _, level := range []any{RoutePolicies{}, ListenerPolicy{}, BackendPolicies{}} {
		lt := reflect.TypeOf(level)
		for _, f := range policyFields(lt) {
			ft := lt.Field(f.index).Type
			if prev, ok := types[f.name]; ok && prev != ft {
				t.Errorf("%s.%s is %v, elsewhere %v", lt.Name(), f.name, ft, prev)
			}
			types[f.name] = ft
		}
	}
	if len(types) < 15 {
		t.Fatalf("only %d kinds found", len(types))
	}
}

// FuzzParseAPIKeyFile reads any key file without panicking; what it
// accepts is a non-empty list of entries each with exactly one of key and
// keyHash.
func FuzzParseAPIKeyFile(f *testing.F) {
	f.Add([]byte("alice: k1\nbob: {key: k2, metadata: {group: eng}}\n"))
	f.Add([]byte(`["k1", {"keyHash": "sha256:` + strings.Repeat("ab", 32) + `"}]`))
	f.Add([]byte("- {key: {file: /x}}\n- k\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseAPIKeyFile(data)
		if err != nil {
			return
		}
		if len(keys) == 0 {
			t.Fatal("accepted with no keys")
		}
		for i, k := range keys {
			if (k.Key == nil) == (k.KeyHash == "") {
				t.Fatalf("entry %d has key %v and keyHash %q", i, k.Key, k.KeyHash)
			}
		}
	})
}
