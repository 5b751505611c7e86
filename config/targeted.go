package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

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

// ListenerTarget is a gateway by name, or one of its listeners by name or
// bind port. The file's gateways are the entries of `gateways`, and the
// gateway named "default" (agentgateway's name for the gateway of a
// standalone file), which holds the listeners of the binds (see
// Listener.Gateway); their namespace is "default".
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

// DefaultGateway is the name of the gateway the listeners of the binds
// belong to, as agentgateway names the gateway of a standalone file; a
// `gateways` entry of that name is the same gateway.
const DefaultGateway = "default"

// Gateway returns the gateway the listener belongs to and the listener's
// name there: for a listener Parse made of a `gateways` entry, that entry's
// name and the listener's own name (the gateway's, for a gateway with one
// listener); for a listener of the binds, DefaultGateway and its name.
func (l *Listener) Gateway() (gateway, listener string) {
	if l.gateway != "" {
		return l.gateway, l.inGateway
	}
	return DefaultGateway, l.Name
}

// Match reports whether the target names listener l of bind b, and at
// which level it attaches there: LevelGateway for the whole gateway,
// LevelListener when it names the listener (by name or port).
func (t *ListenerTarget) Match(b *Bind, l *Listener) (Level, bool) {
	gw, name := l.Gateway()
	if t.GatewayName != gw || !SameNamespace(t.GatewayNamespace, "") {
		return 0, false
	}
	if t.ListenerName != nil && *t.ListenerName != name || t.Port != nil && (b.Port == nil || *t.Port != *b.Port) {
		return 0, false
	}
	if t.ListenerName == nil && t.Port == nil {
		return LevelGateway, true
	}
	return LevelListener, true
}

// SameNamespace reports whether a target's namespace names an object of
// the file in namespace ns: one without a namespace ("") is in "" and
// "default".
func SameNamespace(target, ns string) bool {
	return target == ns || ns == "" && target == "default"
}

// checkPolicyTargets refuses a gateway target that names no gateway, or no
// listener of it, of the file: such a policy would apply nowhere (or,
// were the name ignored, everywhere).
func (f *File) checkPolicyTargets(v checker) {
	type gatewayInfo struct {
		listeners []string // names in the gateway
		ports     []int
	}
	gateways := map[string]*gatewayInfo{}
	var names []string
	known := func(name string) *gatewayInfo {
		g := gateways[name]
		if g == nil {
			g = &gatewayInfo{}
			gateways[name] = g
			names = append(names, name)
		}
		return g
	}
	fromBinds := false
	for bi := range f.Binds {
		b := &f.Binds[bi]
		for li := range b.Listeners {
			gw, name := b.Listeners[li].Gateway()
			if b.Listeners[li].gateway == "" {
				fromBinds = true
			}
			g := known(gw)
			g.listeners = append(g.listeners, name)
			if b.Port != nil {
				g.ports = append(g.ports, *b.Port)
			}
		}
	}
	// A gateway that failed to decode has no bind, yet it is there.
	for _, ng := range f.Gateways {
		known(ng.Name)
	}
	for i := range f.Policies {
		t := f.Policies[i].Target.Gateway
		if t == nil {
			continue
		}
		path := indexPath("policies", i) + ".target.gateway"
		if !SameNamespace(t.GatewayNamespace, "") {
			v.Errorf(path+".gatewayNamespace", "no gateway in namespace %q: the file's gateways are in \"default\"", t.GatewayNamespace)
			continue
		}
		g := gateways[t.GatewayName]
		if g == nil {
			hint := "the file has no gateways"
			if len(names) > 0 {
				list := slices.Clone(names)
				for i, n := range list {
					if n == DefaultGateway && fromBinds {
						list[i] += " (the listeners of binds)"
					}
				}
				hint = "gateways: " + strings.Join(list, ", ")
			}
			v.Errorf(path+".gatewayName", "no gateway named %q (%s)", t.GatewayName, hint)
			continue
		}
		if len(g.listeners) == 0 {
			continue // refused while decoding
		}
		if t.ListenerName != nil && !slices.Contains(g.listeners, *t.ListenerName) {
			v.Errorf(path+".listenerName", "gateway %q has no listener named %q (listeners: %s)", t.GatewayName, *t.ListenerName, quotedList(g.listeners))
		}
		if t.Port != nil && !slices.Contains(g.ports, *t.Port) {
			v.Errorf(path+".port", "gateway %q has no listener on port %d", t.GatewayName, *t.Port)
		}
	}
}

// quotedList writes names quoted, comma-separated.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
