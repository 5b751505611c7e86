package config

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// BackendKind says which kind of backend a reference describes.
type BackendKind uint8

// Backend kinds.
const (
	BackendNone    BackendKind = iota
	BackendHost                // host: "host:port"
	BackendRef                 // backend: "name" of a top-level backend
	BackendDynamic             // dynamic: {} — destination from the request's Host
	BackendMCP                 // mcp: MCP targets multiplexed behind the route
	BackendAI                  // ai: LLM providers
	// BackendLLMModels is the llm section's models, the backend of the
	// route Parse adds to each gateway listener the section attaches to
	// (llm.gateways). A file cannot write it.
	BackendLLMModels
)

// RouteBackend is one entry of `routes[].backends`: exactly one of the backend
// kinds, plus a weight and backend policies.
type RouteBackend struct {
	Kind     BackendKind
	Host     string // BackendHost: "host:port"
	Backend  string // BackendRef: name of a top-level backend
	MCP      *MCPBackend
	AI       *AIBackend
	Weight   int
	Policies *BackendPolicies
}

// routeBackendKinds lists the backend kinds of the schema. The schema's
// `invalid` (a backend that fails every request, agentgateway's
// placeholder) is no kind to offer a user.
var routeBackendKinds = unionKinds{
	served: []string{"host", "backend", "dynamic", "mcp", "ai"},
	later:  []string{"service", "internal", "aws", "routeGroup"},
	hidden: []string{"invalid"},
}

// DecodeNode decodes the union, naming the offending key on error.
func (b *RouteBackend) DecodeNode(n *decode.Node) {
	b.Weight = 1
	decodeBackendUnion(n, routeBackendKinds, []string{"weight", "policies"}, func(key string, v *decode.Node) {
		if decodeSimpleBackendKey(key, v, &b.Kind, &b.Host, &b.Backend, &b.Weight) {
			return
		}
		switch key {
		case "policies":
			v.Decode(&b.Policies)
		case "mcp":
			b.Kind = BackendMCP
			v.Decode(&b.MCP)
		case "ai":
			b.Kind = BackendAI
			v.Decode(&b.AI)
		default:
			v.Errorf("backend kind %q is not supported yet", key)
		}
	})
}

// MaxWeight is the largest backend weight, Gateway API's bound on a
// backendRef's: weights are relative, and the sum of a route's stays far
// from overflowing when each is bounded.
const MaxWeight = 1_000_000

// decodeSimpleBackendKey decodes the keys that route and TCP route
// backends share (weight, host, backend, dynamic), reporting whether key
// was one of them.
func decodeSimpleBackendKey(key string, v *decode.Node, kind *BackendKind, host, ref *string, weight *int) bool {
	switch key {
	case "weight":
		v.Decode(weight)
		switch {
		case *weight < 0:
			v.Errorf("must be >= 0")
		case *weight > MaxWeight:
			v.Errorf("must be <= %d", MaxWeight)
		}
	case "host":
		*kind = BackendHost
		decodeHostPort(v, host)
	case "backend":
		*kind = BackendRef
		v.Decode(ref)
		*ref = backendRefName(*ref)
		if *ref == "" {
			v.Errorf("must not be empty")
		}
	case "dynamic":
		*kind = BackendDynamic
		var d DynamicBackend
		v.Decode(&d)
	default:
		return false
	}
	return true
}

// DynamicBackend is `dynamic: {}`; the CEL `target` comes with the policy engine.
type DynamicBackend struct {
	Target Unsupported `json:"target,omitzero"`
}

// NamedBackend is one entry of the top-level `backends` list.
type NamedBackend struct {
	Name     string
	Kind     BackendKind
	Host     string
	MCP      *MCPBackend
	AI       *AIBackend
	Policies *BackendPolicies
}

var namedBackendKinds = unionKinds{served: []string{"host", "mcp", "ai"}, later: []string{"internal", "aws"}}

// DecodeNode decodes a top-level backend.
func (b *NamedBackend) DecodeNode(n *decode.Node) {
	decodeBackendUnion(n, namedBackendKinds, []string{"name", "policies"}, func(key string, v *decode.Node) {
		switch key {
		case "name":
			v.Decode(&b.Name)
		case "policies":
			v.Decode(&b.Policies)
		case "host":
			b.Kind = BackendHost
			decodeHostPort(v, &b.Host)
		case "mcp":
			b.Kind = BackendMCP
			v.Decode(&b.MCP)
		case "ai":
			b.Kind = BackendAI
			v.Decode(&b.AI)
		default:
			v.Errorf("backend kind %q is not supported yet", key)
		}
	})
	if n.Kind() == decode.Map && n.Get("name") == nil {
		n.Errorf("name: required")
	} else if n.Kind() == decode.Map && b.Name == "" {
		n.Get("name").Errorf("must not be empty")
	}
}

// backendRefName is the top-level backend a `backend:` reference names.
// agentgateway keys a file's backends as namespace/name with an empty
// namespace, so its own files write the reference to backend "api" as
// "/api"; both spellings name the same backend here.
func backendRefName(ref string) string { return strings.TrimPrefix(ref, "/") }

// unionKinds are the kinds of a backend union, as the schema has them:
// those served, those refused as not supported yet (later), and hidden
// ones, refused too but neither listed nor suggested. each of
// decodeBackendUnion decodes the served kinds and refuses the others.
type unionKinds struct{ served, later, hidden []string }

// laterNote is the note that follows a list of the served kinds:
// "; not supported yet: internal, aws" ("" when all are served).
func (k unionKinds) laterNote() string {
	if len(k.later) == 0 {
		return ""
	}
	return "; not supported yet: " + joinOr(k.later)
}

// decodeBackendUnion walks a map holding exactly one of kinds plus the shared
// keys, calling each for every key it knows and recording errors for the
// rest (an unknown key with the nearest known one, as the decoder does).
func decodeBackendUnion(n *decode.Node, kinds unionKinds, shared []string, each func(key string, v *decode.Node)) {
	if n.Kind() != decode.Map {
		n.Errorf("expected a map with one of: %s%s", joinOr(kinds.served), kinds.laterNote())
		return
	}
	found := ""
	for _, key := range n.Keys() {
		v := n.Get(key)
		if contains(shared, key) {
			each(key, v)
			continue
		}
		if !contains(kinds.served, key) && !contains(kinds.later, key) && !contains(kinds.hidden, key) {
			v.Errorf("%s", decode.UnknownField(key, slices.Concat(kinds.served, kinds.later, shared)))
			continue
		}
		if found != "" {
			v.Errorf("only one backend kind may be set (already have %q)", found)
			continue
		}
		found = key
		each(key, v)
	}
	if found == "" {
		n.Errorf("exactly one of %s is required%s", joinOr(kinds.served), kinds.laterNote())
	}
}

func decodeHostPort(v *decode.Node, out *string) {
	v.Decode(out)
	if v.Kind() == decode.Null {
		// `host: null` names no host (and would dump as "").
		v.Errorf("must be host:port (for example 127.0.0.1:8080)")
		return
	}
	if v.Kind() != decode.String {
		return
	}
	if err := checkHostPort(*out); err != nil {
		v.Errorf("%v", err)
	}
}

// MarshalJSON writes the backend back in file form, for /config_dump.
func (b RouteBackend) MarshalJSON() ([]byte, error) {
	m := map[string]any{"weight": b.Weight}
	addBackendKind(m, b.Kind, b.Host, b.Backend)
	if b.MCP != nil {
		m["mcp"] = b.MCP
	}
	if b.AI != nil {
		m["ai"] = b.AI
	}
	if b.Policies != nil {
		m["policies"] = b.Policies
	}
	return json.Marshal(m)
}

// MarshalJSON writes the backend back in file form, for /config_dump.
func (b NamedBackend) MarshalJSON() ([]byte, error) {
	m := map[string]any{"name": b.Name}
	addBackendKind(m, b.Kind, b.Host, "")
	if b.MCP != nil {
		m["mcp"] = b.MCP
	}
	if b.AI != nil {
		m["ai"] = b.AI
	}
	if b.Policies != nil {
		m["policies"] = b.Policies
	}
	return json.Marshal(m)
}

func addBackendKind(m map[string]any, kind BackendKind, host, ref string) {
	switch kind {
	case BackendHost:
		m["host"] = host
	case BackendRef:
		m["backend"] = ref
	case BackendDynamic:
		m["dynamic"] = map[string]any{}
	}
}
