package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Level is where a policy is attached. A policy set at a higher level wins
// a merge: the spec's precedence is Gateway < Listener < Route < Route rule
// < Backend.
type Level uint8

// The attachment levels, lowest precedence first.
const (
	LevelGateway Level = iota
	LevelListener
	LevelRoute
	LevelRule
	LevelBackend
)

var levelNames = [...]string{"gateway", "listener", "route", "route rule", "backend"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "level?"
}

// PolicyOrigin is where one level's setting of a policy was written.
type PolicyOrigin struct {
	Level Level
	// Path is the policy's field path in the file
	// ("binds[0].listeners[0].policies.cors").
	Path string
}

// PolicySet is the policies that apply at one place (a route, a backend),
// merged across the levels they were attached at. It is the one policy
// model of every level: a listener's, a route's and a backend's policies
// are all attached to a PolicySet, by kind, the kind being the policy's
// field name under `policies` ("jwtAuth", "cors", ...).
//
// A kind's merge rule is declared beside its config type: by default the
// highest level's value replaces the others whole (the spec's field by
// field, not deep, merge); a type with a mergeOver method combines them
// (authorization rules accumulate across levels; the ai policy merges its
// own fields). Every level that contributed is kept as the kind's origins,
// so an error or the config dump can say where a merged setting came from.
//
// A PolicySet is built while compiling and read only after; the zero
// value is empty and ready to use.
type PolicySet struct {
	kinds map[string]*attachedPolicy
}

type attachedPolicy struct {
	value any // the kind's config value, merged
	from  []PolicyOrigin
}

// policyMerger is a policy config type whose levels combine rather than
// replace each other. mergeOver returns the receiver (the higher level)
// merged over lower, a value of the same type; neither is modified.
type policyMerger interface {
	mergeOver(lower any) any
}

// Attach adds one level's policies over what the set holds. policies is a
// pointer to a struct of policy fields (RoutePolicies, ListenerPolicy,
// BackendPolicies and the like); nil attaches nothing. path is the struct's
// field path ("binds[0].listeners[0].routes[1].policies"). Attach levels
// lowest precedence first.
func (s *PolicySet) Attach(level Level, path string, policies any) {
	v := reflect.ValueOf(policies)
	if !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
		return
	}
	v = reflect.Indirect(v)
	for _, f := range policyFields(v.Type()) {
		fv := v.Field(f.index)
		if fv.IsZero() {
			continue
		}
		s.set(f.name, level, path+"."+f.name, fv.Interface())
	}
}

// Set attaches one kind's value at level; path is its field path. It is
// Attach for a value that does not come from a policies struct (a
// setting a level writes in a shape of its own, normalized).
func (s *PolicySet) Set(kind string, level Level, path string, value any) {
	s.set(kind, level, path, value)
}

func (s *PolicySet) set(kind string, level Level, path string, value any) {
	if s.kinds == nil {
		s.kinds = map[string]*attachedPolicy{}
	}
	origin := PolicyOrigin{Level: level, Path: path}
	prev := s.kinds[kind]
	if prev == nil {
		s.kinds[kind] = &attachedPolicy{value: value, from: []PolicyOrigin{origin}}
		return
	}
	merged := value
	if m, ok := value.(policyMerger); ok {
		merged = m.mergeOver(prev.value)
	}
	from := append(append(make([]PolicyOrigin, 0, len(prev.from)+1), prev.from...), origin)
	s.kinds[kind] = &attachedPolicy{value: merged, from: from}
}

// Inherit attaches kind as from holds it, merged value and origins, to s,
// which holds nothing of it yet: a kind a route holds for its backends
// (backendTLS), inherited before the backend's own levels attach over it.
// A nil from or a kind from does not hold attaches nothing.
func (s *PolicySet) Inherit(from *PolicySet, kind string) {
	if from == nil || from.kinds[kind] == nil {
		return
	}
	if s.kinds == nil {
		s.kinds = map[string]*attachedPolicy{}
	}
	s.kinds[kind] = from.kinds[kind] // attachedPolicy values are never modified
}

// Fill sets each field of the policies struct dst points to from the
// merged value of its kind (the inverse of Attach), for code that reads a
// level's struct type; kinds dst has no field for are left out.
func (s *PolicySet) Fill(dst any) {
	v := reflect.ValueOf(dst).Elem()
	for _, f := range policyFields(v.Type()) {
		if p := s.kinds[f.name]; p != nil {
			v.Field(f.index).Set(reflect.ValueOf(p.value))
		}
	}
}

// Clone returns a copy that can be attached to without changing s (a
// listener's set, copied for each of its routes).
func (s *PolicySet) Clone() *PolicySet {
	out := &PolicySet{}
	if len(s.kinds) > 0 {
		out.kinds = make(map[string]*attachedPolicy, len(s.kinds))
		for k, v := range s.kinds {
			out.kinds[k] = v // attachedPolicy values are never modified
		}
	}
	return out
}

// Get returns the merged value of kind, or nil.
func (s *PolicySet) Get(kind string) any {
	if p := s.kinds[kind]; p != nil {
		return p.value
	}
	return nil
}

// Has reports whether kind is set.
func (s *PolicySet) Has(kind string) bool { return s.kinds[kind] != nil }

// Origins returns the levels that set kind, lowest precedence first.
func (s *PolicySet) Origins(kind string) []PolicyOrigin {
	if p := s.kinds[kind]; p != nil {
		return p.from
	}
	return nil
}

// Path is the field path of kind's highest setting, the one an error
// about the merged value names ("" when kind is not set).
func (s *PolicySet) Path(kind string) string {
	if p := s.kinds[kind]; p != nil {
		return p.from[len(p.from)-1].Path
	}
	return ""
}

// Kinds returns the kinds set, sorted.
func (s *PolicySet) Kinds() []string {
	out := make([]string, 0, len(s.kinds))
	for k := range s.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PolicyOf returns s's merged value of kind as a *T, or nil when kind is not
// set. It panics when kind holds another type: a programming error.
func PolicyOf[T any](s *PolicySet, kind string) *T {
	v := s.Get(kind)
	if v == nil {
		return nil
	}
	return v.(*T)
}

// policyField is one field of a policies struct: its kind and index.
type policyField struct {
	name  string
	index int
}

var policyFieldCache sync.Map // reflect.Type -> []policyField

// policyFields lists the attachable fields of a policies struct: every
// field with a json name except those of type Unsupported (which never
// decode to a value).
func policyFields(t reflect.Type) []policyField {
	if v, ok := policyFieldCache.Load(t); ok {
		return v.([]policyField)
	}
	unsupported := reflect.TypeFor[Unsupported]()
	var out []policyField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Type == unsupported {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, policyField{name: name, index: i})
	}
	policyFieldCache.Store(t, out)
	return out
}

// mergeOver accumulates authorization rules across levels: every level's
// rules count, the lower levels' first.
func (r *CELRuleSet) mergeOver(lower any) any {
	l := lower.(*CELRuleSet)
	return &CELRuleSet{Rules: append(append(make([]CELRule, 0, len(l.Rules)+len(r.Rules)), l.Rules...), r.Rules...)}
}

// mergeOver merges the ai policy field by field: a field the higher level
// sets replaces the lower level's.
func (p *AIPolicy) mergeOver(lower any) any {
	return MergeAIPolicy(lower.(*AIPolicy), p)
}

// MergeAIPolicy merges two ai policies field by field; fields set in over
// win. Either may be nil.
func MergeAIPolicy(base, over *AIPolicy) *AIPolicy {
	if base == nil {
		return over
	}
	if over == nil {
		return base
	}
	m := *base
	bv, ov, mv := reflect.ValueOf(base).Elem(), reflect.ValueOf(over).Elem(), reflect.ValueOf(&m).Elem()
	for i := range bv.NumField() {
		if f := ov.Field(i); mv.Type().Field(i).IsExported() && !f.IsZero() {
			mv.Field(i).Set(f)
		}
	}
	return &m
}

// policyLevels are the levels a file writes policies at, each with its
// policies struct, for the error of a policy written at the wrong one.
var policyLevels = []struct {
	level  Level
	fields []policyField
}{
	{LevelListener, policyFields(reflect.TypeFor[ListenerPolicy]())},
	{LevelRoute, policyFields(reflect.TypeFor[RoutePolicies]())},
	{LevelBackend, policyFields(reflect.TypeFor[BackendPolicies]())},
}

// levelHint is the error for key, which the policies of level here do
// not take, when it is a policy of other levels: `"timeout" is a route
// policy, not allowed in listener policies`; "" when it is none.
func levelHint(key string, here Level) string {
	var at []string
	for _, l := range policyLevels {
		if l.level != here && slices.ContainsFunc(l.fields, func(f policyField) bool { return f.name == key }) {
			at = append(at, l.level.String())
		}
	}
	if len(at) == 0 {
		return ""
	}
	return fmt.Sprintf("%q is a %s policy, not allowed in %s policies", key, strings.Join(at, " or "), here)
}

// UnknownFieldHint says when a key is a policy of another level
// (decode.FieldHinter).
func (*ListenerPolicy) UnknownFieldHint(key string) string { return levelHint(key, LevelListener) }

// UnknownFieldHint says when a key is a policy of another level
// (decode.FieldHinter).
func (*BackendPolicies) UnknownFieldHint(key string) string { return levelHint(key, LevelBackend) }
