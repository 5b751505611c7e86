package config

import "fmt"

// SimpleMCP is the top-level `mcp:` section (agentgateway's
// LocalSimpleMcpConfig): one MCP backend served on a port of its own, with
// route policies. Parse turns it into an ordinary bind, so the rest of the
// gateway never sees it.
type SimpleMCP struct {
	Gateways Unsupported `json:"gateways,omitzero"`
	// Port is the port to serve on (default 3000).
	Port                   *int           `json:"port,omitempty" cfg:"min=1,max=65535"`
	Targets                []MCPTarget    `json:"targets" cfg:"required,minItems=1,maxItems=32"`
	StatefulMode           string         `json:"statefulMode,omitempty" cfg:"enum=stateless|stateful"`
	PrefixMode             string         `json:"prefixMode,omitempty" cfg:"enum=conditional|always|never"`
	FailureMode            string         `json:"failureMode,omitempty" cfg:"enum=failClosed|failOpen"`
	DNSRebindingProtection Unsupported    `json:"dnsRebindingProtection,omitzero"`
	Policies               *RoutePolicies `json:"policies,omitempty"`
}

// defaultMCPPort is agentgateway's port for the top-level mcp section.
const defaultMCPPort = 3000

// desugarMCP turns the top-level mcp section into a bind with one listener
// and one route matching every path, as agentgateway does.
func (f *File) desugarMCP() Errors {
	m := f.MCP
	if m == nil {
		return nil
	}
	f.MCP = nil
	port := defaultMCPPort
	if m.Port != nil {
		port = *m.Port
	}
	for i, b := range f.Binds {
		if b.Port != nil && *b.Port == port {
			return Errors{fmt.Errorf("mcp.port: port %d is already used by binds[%d]; put the MCP route in that bind instead", port, i)}
		}
	}
	backend := &MCPBackend{Targets: m.Targets, StatefulMode: m.StatefulMode, PrefixMode: m.PrefixMode, FailureMode: m.FailureMode}
	var errs Errors
	seen := map[string]int{}
	for i, t := range m.Targets {
		if j, ok := seen[t.Name]; ok {
			errs = append(errs, fmt.Errorf("mcp.targets[%d].name: target %q is already defined by targets[%d]", i, t.Name, j))
		}
		seen[t.Name] = i
	}
	f.Binds = append(f.Binds, Bind{
		Port: &port,
		Listeners: []Listener{{
			Name: "mcp",
			Routes: []Route{{
				Name:      "default",
				Namespace: "internal",
				Policies:  m.Policies,
				Backends:  []RouteBackend{{Kind: BackendMCP, MCP: backend, Weight: 1}},
			}},
		}},
	})
	return errs
}
