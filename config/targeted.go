package config

import "github.com/relaygate/gateway/config/decode"

// TargetedPolicy is an entry of the top-level `policies`: one policy
// attached to the gateway (every listener, or one by name or port), to
// routes by name, or to a named backend. It merges with the policies
// written inline at the same place: a gateway target is the lowest level,
// then a listener's own policies; a route target comes below the route's
// inline policies and a route rule target above them; a backend target
// comes below the named backend's own policies.
type TargetedPolicy struct {
	Name   ResourceName `json:"name" cfg:"required"`
	Target PolicyTarget `json:"target" cfg:"required"`
	// Phase is route (the default: after a route is selected) or gateway
	// (before route selection, for policies that affect it: a gateway
	// target only, and only the kinds GatewayPhaseKinds names). The phases
	// do not merge: a listener's gateway-phase policies run, then its
	// route's.
	Phase string `json:"phase,omitempty" cfg:"enum=route|gateway"`
	// Policy holds exactly one kind.
	Policy RoutePolicies `json:"policy" cfg:"required"`
}

// Validate enforces one kind per entry, as agentgateway does.
func (p *TargetedPolicy) Validate(v *decode.Validation) {
	kinds := p.Kinds()
	if n := len(kinds); n != 1 {
		v.Errorf("policy", "must hold exactly one policy, not %d (write one entry per policy)", n)
		return
	}
	if p.Phase != PhaseGateway {
		return
	}
	if p.Target.Gateway == nil {
		v.Errorf("phase", "gateway runs before a route is selected, so it needs a gateway target (the gateway, or a listener)")
	}
	if !GatewayPhaseKinds[kinds[0]] {
		v.Errorf("policy."+kinds[0], "cannot run in the gateway phase (there: %s)", gatewayPhaseKindList)
	}
}

// PhaseGateway is the phase of policies that run before route selection.
const PhaseGateway = "gateway"

// GatewayPhaseKinds are the kinds that may run in the gateway phase, as in
// agentgateway (its gateway policies).
var GatewayPhaseKinds = map[string]bool{
	"cors": true, "jwtAuth": true, "basicAuth": true, "apiKey": true, "extAuthz": true,
	"authorization": true, "extProc": true, "transformations": true,
}

const gatewayPhaseKindList = "cors, jwtAuth, basicAuth, apiKey, extAuthz, authorization, extProc, transformations"

// Kinds lists the kinds the entry sets.
func (p *TargetedPolicy) Kinds() []string {
	var set PolicySet
	set.Attach(LevelRoute, "", &p.Policy)
	return set.Kinds()
}

// ResourceName names a policy: name and namespace.
type ResourceName struct {
	Name      string `json:"name" cfg:"required,minLen=1"`
	Namespace string `json:"namespace" cfg:"required"`
}

// PolicyTarget is exactly one of gateway, route, backend (listenerSet is
// not served yet).
type PolicyTarget struct {
	Gateway     *ListenerTarget `json:"gateway,omitempty"`
	Route       *RouteTarget    `json:"route,omitempty"`
	Backend     *BackendTarget  `json:"backend,omitempty"`
	ListenerSet Unsupported     `json:"listenerSet,omitzero"`
}

// DecodeNode decodes the union.
func (t *PolicyTarget) DecodeNode(n *decode.Node) {
	type plain PolicyTarget
	decodeExactlyOne(n, (*plain)(t), "gateway", "route", "backend", "listenerSet")
}

// ListenerTarget is the gateway (a standalone file has one, whatever its
// name), or one of its listeners by name or bind port.
type ListenerTarget struct {
	GatewayName      string  `json:"gatewayName" cfg:"required"`
	GatewayNamespace string  `json:"gatewayNamespace" cfg:"required"`
	ListenerName     *string `json:"listenerName,omitempty"`
	Port             *int    `json:"port,omitempty" cfg:"min=1,max=65535"`
}

// RouteTarget names routes by name and namespace, and optionally one rule
// (a route's ruleName).
type RouteTarget struct {
	Name      string      `json:"name" cfg:"required,minLen=1"`
	Namespace string      `json:"namespace" cfg:"required"`
	RuleName  *string     `json:"ruleName,omitempty"`
	Kind      Unsupported `json:"kind,omitzero"`
}

// BackendTarget names a top-level backend: {backend: {name, namespace}}
// (a service is not served yet).
type BackendTarget struct {
	Backend *struct {
		Name      string      `json:"name" cfg:"required,minLen=1"`
		Namespace string      `json:"namespace" cfg:"required"`
		Section   Unsupported `json:"section,omitzero"`
	} `json:"backend,omitempty"`
	Service Unsupported `json:"service,omitzero"`
}

// DecodeNode decodes the union.
func (t *BackendTarget) DecodeNode(n *decode.Node) {
	type plain BackendTarget
	decodeExactlyOne(n, (*plain)(t), "backend", "service")
}
