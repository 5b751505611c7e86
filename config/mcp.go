package config

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// MCPBackend is the `mcp:` backend of a route: MCP servers ("targets")
// multiplexed behind one endpoint (agentgateway's LocalMcpBackend).
type MCPBackend struct {
	Targets []MCPTarget `json:"targets" cfg:"required,minItems=1,maxItems=32"`
	// StatefulMode is "stateful" (the default: one upstream session per target
	// for each client session) or "stateless" (short-lived upstream sessions
	// per request).
	StatefulMode string `json:"statefulMode,omitempty" cfg:"enum=stateless|stateful"`
	// PrefixMode is "conditional" (the default: names are prefixed with the
	// target name when there is more than one target), "always" or "never".
	PrefixMode string `json:"prefixMode,omitempty" cfg:"enum=conditional|always|never"`
	// FailureMode is "failClosed" (the default) or "failOpen" (skip targets
	// that fail, as long as one works).
	FailureMode string `json:"failureMode,omitempty" cfg:"enum=failClosed|failOpen"`

	DNSRebindingProtection Unsupported `json:"dnsRebindingProtection,omitzero"`
}

// Stateless reports whether upstream sessions last one request.
func (m *MCPBackend) Stateless() bool { return m.StatefulMode == "stateless" }

// Validate checks that target names are unique and usable as prefixes.
func (m *MCPBackend) Validate(v *decode.Validation) {
	seen := map[string]int{}
	for i, t := range m.Targets {
		if j, ok := seen[t.Name]; ok {
			v.Errorf(fmt.Sprintf("targets[%d].name", i), "target %q is already defined by targets[%d]", t.Name, j)
			continue
		}
		seen[t.Name] = i
	}
}

// MCPTargetKind says how the gateway reaches an MCP target.
type MCPTargetKind uint8

// MCP target kinds.
const (
	MCPTargetNone       MCPTargetKind = iota
	MCPTargetStreamable               // mcp: streamable HTTP
	MCPTargetSSE                      // sse: legacy HTTP+SSE
	MCPTargetStdio                    // stdio: a local process
)

// MCPTarget is one entry of `mcp.targets`: a name plus exactly one of `mcp`
// (streamable HTTP), `sse` or `stdio`.
type MCPTarget struct {
	Name string
	Kind MCPTargetKind
	// URL is the endpoint of an HTTP target (mcp or sse), built from
	// `host` (a URL, or host:port) or from `host`, `port` and `path`.
	URL   string
	Stdio *MCPStdio
}

// MCPStdio is a target started as a local process speaking MCP over stdin
// and stdout.
type MCPStdio struct {
	Cmd      string            `json:"cmd" cfg:"required,minLen=1"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	ClearEnv bool              `json:"clear_env,omitempty"`
}

var mcpTargetKinds = unionKinds{served: []string{"mcp", "sse", "stdio"}, later: []string{"openapi"}}

// DecodeNode decodes the target union.
func (t *MCPTarget) DecodeNode(n *decode.Node) {
	decodeBackendUnion(n, mcpTargetKinds, []string{"name", "policies"}, func(key string, v *decode.Node) {
		switch key {
		case "name":
			v.Decode(&t.Name)
			if v.Kind() == decode.String && !validTargetName(t.Name) {
				v.Errorf("must be 1 to 64 letters, digits, '-' or '.' (it prefixes tool names)")
			}
		case "policies":
			v.Errorf("not supported yet")
		case "mcp":
			t.Kind = MCPTargetStreamable
			t.URL = decodeTargetURL(v, "/mcp")
		case "sse":
			t.Kind = MCPTargetSSE
			t.URL = decodeTargetURL(v, "/sse")
		case "stdio":
			t.Kind = MCPTargetStdio
			v.Decode(&t.Stdio)
		default:
			v.Errorf("MCP target kind %q is not supported yet", key)
		}
	})
	if n.Kind() == decode.Map && n.Get("name") == nil {
		n.Errorf("name: required")
	}
}

// validTargetName accepts names that can prefix tool names unambiguously:
// the prefix separator "_" is not allowed inside them.
func validTargetName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// mcpHTTPTarget is the `mcp:` / `sse:` object of a target.
type mcpHTTPTarget struct {
	Host    string      `json:"host,omitempty"`
	Port    *int        `json:"port,omitempty" cfg:"min=1,max=65535"`
	Path    *string     `json:"path,omitempty"`
	Backend Unsupported `json:"backend,omitzero"`
}

// decodeTargetURL builds the endpoint URL of an HTTP target.
func decodeTargetURL(v *decode.Node, defaultPath string) string {
	var h mcpHTTPTarget
	if !v.Decode(&h) {
		return ""
	}
	if h.Host == "" {
		v.Errorf("host: required")
		return ""
	}
	if h.Port != nil {
		// host, port and path.
		if strings.Contains(h.Host, "/") || strings.Contains(h.Host, ":") && !strings.HasPrefix(h.Host, "[") {
			v.Get("host").Errorf("must be a host name or IP address when port is set")
			return ""
		}
		path := defaultPath
		if h.Path != nil {
			path = *h.Path
		}
		if !strings.HasPrefix(path, "/") {
			v.Get("path").Errorf("must start with '/'")
			return ""
		}
		return "http://" + net.JoinHostPort(strings.Trim(h.Host, "[]"), strconv.Itoa(*h.Port)) + path
	}
	raw := h.Host
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		v.Get("host").Errorf("must be an http(s) URL such as http://127.0.0.1:3001/mcp, or host:port")
		return ""
	}
	if h.Path != nil {
		if !strings.HasPrefix(*h.Path, "/") {
			v.Get("path").Errorf("must start with '/'")
			return ""
		}
		u.Path = *h.Path
	} else if u.Path == "" {
		u.Path = defaultPath
	}
	return u.String()
}

// MarshalJSON writes the target back in file form, for /config_dump.
func (t MCPTarget) MarshalJSON() ([]byte, error) {
	m := map[string]any{"name": t.Name}
	switch t.Kind {
	case MCPTargetStreamable:
		m["mcp"] = map[string]any{"host": redactURL(t.URL)}
	case MCPTargetSSE:
		m["sse"] = map[string]any{"host": redactURL(t.URL)}
	case MCPTargetStdio:
		// Environment values may hold secrets: every one is redacted,
		// the names kept (a map, so that the dump parses back), and so is
		// the value of a flag with a credential name.
		s := map[string]any{"cmd": t.Stdio.Cmd, "args": redactArgs(t.Stdio.Args)}
		if len(t.Stdio.Env) > 0 {
			env := make(map[string]string, len(t.Stdio.Env))
			for k := range t.Stdio.Env {
				env[k] = Redacted
			}
			s["env"] = env
		}
		if t.Stdio.ClearEnv {
			s["clear_env"] = true
		}
		m["stdio"] = s
	}
	return json.Marshal(m)
}

// MCPSettings is `config.mcp`.
type MCPSettings struct {
	// SessionTTL closes client sessions idle for longer (default 30m).
	SessionTTL *Duration `json:"sessionTtl,omitempty"`
	// MaxSessions is our extension (agentgateway has no such field): the
	// most client sessions one MCP backend holds (default 10000). A new
	// session past it ends the least recently used idle one, whose client
	// gets 404 and starts over as after expiry; when every session is busy
	// the new one is refused with 503.
	MaxSessions *int `json:"maxSessions,omitempty" cfg:"min=1,max=10000000"`
	// MaxStdioProcesses is our extension: the most stdio target processes
	// one MCP backend runs at once over all its sessions (default 64).
	// Starting one past it stops the least recently used idle process
	// (its session starts it again on its next call); when none is idle
	// the start fails.
	MaxStdioProcesses *int `json:"maxStdioProcesses,omitempty" cfg:"min=1,max=100000"`
}

// SessionSettings is `config.session`: the key protecting session ids.
type SessionSettings struct {
	// Key is 32 bytes in hex (`openssl rand -hex 32`): AES-256-GCM key for
	// MCP session ids, which carry the upstream session ids so that another
	// replica can resume a session.
	Key SessionKey `json:"key" cfg:"required"`
}

// SessionKey is a 32-byte key given in hex.
type SessionKey []byte

// DecodeNode parses the hex key.
func (k *SessionKey) DecodeNode(n *decode.Node) {
	s, ok := n.String()
	if !ok {
		n.Errorf("expected a string of 64 hex digits, got %s", n.Describe())
		return
	}
	b, err := parseSessionKey(s)
	if err != nil {
		n.Errorf("%v", err)
		return
	}
	*k = b
}

// parseSessionKey reads a session key: 64 hex digits (also SESSION_KEY's
// form).
func parseSessionKey(s string) (SessionKey, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, errors.New("must be 64 hex digits (32 bytes), for example from `openssl rand -hex 32`")
	}
	return b, nil
}

// MarshalJSON hides the key in /config_dump.
func (k SessionKey) MarshalJSON() ([]byte, error) { return []byte(`"<redacted>"`), nil }
