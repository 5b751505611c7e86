package config

// SimpleMCP is the top-level `mcp:` section (agentgateway's
// LocalSimpleMcpConfig): one MCP backend with route policies, served on
// gateway listeners (at /mcp, /sse and /.well-known) or on a port of its
// own (every path). Parse turns it into an ordinary route, so the rest of
// the gateway never sees it.
type SimpleMCP struct {
	// Gateways are the gateways (or gateway listeners) the section's route
	// attaches to; by default the gateway named "default" when there is
	// one with an HTTP listener and no port is set.
	Gateways GatewayRefs `json:"gateways,omitzero"`
	// Port is the port to serve on (default 3000).
	Port                   *int           `json:"port,omitempty" cfg:"min=1,max=65535"`
	Targets                []MCPTarget    `json:"targets" cfg:"required,minItems=1,maxItems=32"`
	StatefulMode           string         `json:"statefulMode,omitempty" cfg:"enum=stateless|stateful"`
	PrefixMode             string         `json:"prefixMode,omitempty" cfg:"enum=conditional|always|never"`
	FailureMode            string         `json:"failureMode,omitempty" cfg:"enum=failClosed|failOpen"`
	DNSRebindingProtection Unsupported    `json:"dnsRebindingProtection,omitzero"`
	Policies               *RoutePolicies `json:"policies,omitempty"`

	// attached: Parse gave the section's route to gateway listeners.
	attached bool
}

// defaultMCPPort is agentgateway's port for the top-level mcp section.
const defaultMCPPort = 3000

// mcpPaths are the path prefixes the mcp section serves on a gateway's
// listener, as in agentgateway.
var mcpPaths = []string{"/mcp", "/sse", "/.well-known"}

// desugarMCP turns the top-level mcp section into a route: one of each
// gateway listener it attaches to, or of a bind of its own matching every
// path, as agentgateway does. The section stays, for the config dump.
func (f *File) desugarMCP(c checker, ix *gatewayIndex) {
	m := f.MCP
	seen := map[string]int{}
	for i, t := range m.Targets {
		if j, ok := seen[t.Name]; ok {
			c.Errorf(indexPath("mcp.targets", i)+".name", "target %q is already defined by targets[%d]", t.Name, j)
		}
		seen[t.Name] = i
	}
	backend := &MCPBackend{Targets: m.Targets, StatefulMode: m.StatefulMode, PrefixMode: m.PrefixMode, FailureMode: m.FailureMode}
	route := Route{
		Name:      "default",
		Namespace: "internal",
		Policies:  m.Policies,
		Backends:  []RouteBackend{{Kind: BackendMCP, MCP: backend, Weight: 1}},
		at:        "mcp",
	}
	refs, attached := ix.section(c, "mcp", &m.Gateways, m.Port != nil)
	m.attached = attached
	if attached {
		for _, p := range mcpPaths {
			route.Matches = append(route.Matches, RouteMatch{Path: &PathMatch{Kind: PathPrefix, Value: p}})
		}
		for _, ref := range refs {
			l := &f.Binds[ref.bind].Listeners[ref.listener]
			l.Routes = append(l.Routes, route)
		}
		return
	}
	port := defaultMCPPort
	if m.Port != nil {
		port = *m.Port
	}
	for i, b := range f.Binds {
		if b.Port != nil && *b.Port == port {
			instead := "put the MCP route in that bind instead"
			if b.origin != "" {
				instead = "attach the mcp section to it with mcp.gateways instead"
			}
			c.Errorf("mcp.port", "port %d is already used by %s; %s", port, b.path(i), instead)
			return
		}
	}
	f.Binds = append(f.Binds, Bind{
		Port: &port,
		Listeners: []Listener{{
			Name:   "mcp",
			Routes: []Route{route},
			at:     "mcp",
		}},
		origin: "mcp",
	})
}
