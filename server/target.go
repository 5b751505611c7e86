package server

import (
	"github.com/relaygate/gateway/backend"
	mcpgw "github.com/relaygate/gateway/backend/mcp"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
)

// target is what a route's backend sends requests to: an HTTP upstream
// (static or dynamic) or an MCP backend (an LLM provider group is next).
// exchange takes the request past the route's request policies and the
// backend's redirect, leaves the answer (or an error response) in the
// response and returns the status sent. proceed runs the policies every
// kind shares around it; a backend policy a kind cannot apply is refused
// when the config is compiled (honors), so none is ever accepted and
// ignored.
type target interface {
	exchange(b *bind, rs *requestState, r *route, rb *routeBackend) int
	// honors reports whether the kind applies a backend policy (by its
	// field name under policies).
	honors(policy string) bool
}

// httpUpstream forwards to an HTTP upstream: a fixed one, or one named by
// the request's Host (dynamic).
type httpUpstream struct {
	static  *backend.Upstream // nil for dynamic
	dynamic *backend.Dynamic
}

func (t *httpUpstream) exchange(b *bind, rs *requestState, r *route, rb *routeBackend) int {
	return b.forward(rs, r, rb, t)
}

// honors every backend policy but ai, which only an LLM provider applies.
func (t *httpUpstream) honors(policy string) bool { return policy != "ai" }

// mcpRelay relays to an MCP backend. It speaks to its targets with
// requests of its own, so the client request's headers are not what
// reaches them: requestHeaderModifier has nothing to modify.
type mcpRelay struct {
	mcp *mcpgw.Backend
}

func (t *mcpRelay) exchange(b *bind, rs *requestState, r *route, rb *routeBackend) int {
	return b.serveMCP(rs, r, rb, t.mcp)
}

func (t *mcpRelay) honors(policy string) bool {
	return policy != "requestHeaderModifier" && policy != "ai"
}

// refuseUnhonored is the config error for a backend policy set on a
// backend whose kind does not apply it; it names the level that set it.
func refuseUnhonored(t target, set *config.PolicySet) error {
	for _, k := range set.Kinds() {
		if !t.honors(k) {
			return &decode.FieldError{Path: set.Path(k), Msg: "not applied to this kind of backend: remove it"}
		}
	}
	return nil
}

var (
	_ target = (*httpUpstream)(nil)
	_ target = (*mcpRelay)(nil)
)
