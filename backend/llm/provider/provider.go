package provider

import (
	"net"
	"strings"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy/credential"
)

// kind is a provider kind.
type kind uint8

const (
	kindOpenAI kind = iota + 1
	kindAzure
	kindAnthropic
	kindGemini
	kindVertex
	kindBedrock
	kindCustom
)

// Default hosts (agentgateway's).
const (
	openAIHost    = "api.openai.com"
	anthropicHost = "api.anthropic.com"
	geminiHost    = "generativelanguage.googleapis.com"
)

// Provider is one compiled provider: immutable, safe for concurrent use.
type Provider struct {
	name   string
	kind   kind
	config string // the kind's name in the configuration
	system string
	model  string

	addr string
	tls  backend.UpstreamTLS

	// pathOverride replaces the whole request target when set.
	pathOverride    string
	hasPathOverride bool
	// pathPrefix replaces the provider's base path; kept without its
	// trailing slashes.
	pathPrefix    string
	hasPathPrefix bool

	azure   azureSettings
	vertex  vertexSettings
	bedrock bedrockSettings
	custom  customSettings

	// creds puts the provider's credentials on a request; nil leaves the
	// client's headers as they are.
	creds credentials
	// extra are backendAuth's credentials: more secrets, each at its
	// location (an API manager's subscription key beside the provider's),
	// put on after creds, or before a SigV4 signature, which covers them.
	extra []credential.Fixed
}

// New compiles a provider. auth is the backendAuth that applies to it (nil:
// none). Errors are *decode.FieldError with paths relative to the provider
// ("provider.copilot", "policies.backendAuth.azure") for what this package
// cannot serve. New does no network I/O and reads no file: key files,
// credential files and the AWS and Google default credentials are read on
// first use, and tokens fetched then.
func New(p *config.NamedAIProvider, auth *config.BackendAuth) (*Provider, error) {
	out := &Provider{name: p.Name, config: p.Provider.Kind()}
	if err := out.compileKind(&p.Provider); err != nil {
		return nil, err
	}
	if err := out.compileAddress(p); err != nil {
		return nil, err
	}
	if p.PathOverride != nil {
		out.pathOverride, out.hasPathOverride = *p.PathOverride, true
	}
	if p.PathPrefix != nil {
		out.pathPrefix, out.hasPathPrefix = strings.TrimRight(*p.PathPrefix, "/"), true
	}
	creds, err := out.compileAuth(auth)
	if err != nil {
		return nil, err
	}
	out.creds = creds
	if auth != nil {
		if out.extra, err = credential.CompileCredentials(authPath, auth.Credentials); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compileKind reads the kind's settings.
func (p *Provider) compileKind(c *config.AIProvider) error {
	var model *string
	switch {
	case c.OpenAI != nil:
		p.kind, p.system, model = kindOpenAI, "openai", c.OpenAI.Model
	case c.Azure != nil:
		p.kind, p.system, model = kindAzure, "azure.ai.openai", c.Azure.Model
		if err := p.azure.compile(c.Azure); err != nil {
			return err
		}
	case c.Anthropic != nil:
		p.kind, p.system, model = kindAnthropic, "anthropic", c.Anthropic.Model
	case c.Gemini != nil:
		p.kind, p.system, model = kindGemini, "gcp.gemini", c.Gemini.Model
	case c.Vertex != nil:
		p.kind, p.system, model = kindVertex, "gcp.vertex_ai", c.Vertex.Model
		if err := p.vertex.compile(c.Vertex); err != nil {
			return err
		}
	case c.Bedrock != nil:
		p.kind, p.system, model = kindBedrock, "aws.bedrock", c.Bedrock.Model
		p.bedrock.compile(c.Bedrock)
	case c.Custom != nil:
		p.kind, p.system, model = kindCustom, "custom", c.Custom.Model
		if c.Custom.ProviderOverride != nil {
			p.system = *c.Custom.ProviderOverride
		}
		p.custom.compile(c.Custom)
	case c.Copilot != nil:
		return fieldError("provider.copilot", "GitHub Copilot is not supported yet")
	default:
		return fieldError("provider", "exactly one provider kind is required")
	}
	if model != nil {
		p.model = *model
	}
	return nil
}

// compileAddress sets where requests go: hostOverride as plain HTTP (as
// agentgateway does), else the provider's host on 443 with TLS.
func (p *Provider) compileAddress(c *config.NamedAIProvider) error {
	if c.HostOverride != "" {
		if _, _, err := net.SplitHostPort(c.HostOverride); err != nil {
			return fieldError("hostOverride", "must be host:port")
		}
		p.addr = c.HostOverride
		return nil
	}
	host := p.defaultHost()
	if host == "" {
		return fieldError("hostOverride", "required for a custom provider (it has no default host)")
	}
	p.addr = net.JoinHostPort(host, "443")
	p.tls = backend.UpstreamTLS{Enabled: true, ServerName: host}
	return nil
}

// defaultHost is the provider's API host ("" for custom providers).
func (p *Provider) defaultHost() string {
	switch p.kind {
	case kindOpenAI:
		return openAIHost
	case kindAzure:
		return p.azure.host
	case kindAnthropic:
		return anthropicHost
	case kindGemini:
		return geminiHost
	case kindVertex:
		return p.vertex.host()
	case kindBedrock:
		return "bedrock-runtime." + p.bedrock.region + ".amazonaws.com"
	}
	return ""
}

// Name is the configured name.
func (p *Provider) Name() string { return p.name }

// Kind is the provider kind as the configuration names it: "openAI",
// "azure", "anthropic", "gemini", "vertex", "bedrock" or "custom".
func (p *Provider) Kind() string { return p.config }

// System is the OpenTelemetry GenAI `gen_ai.provider.name` value:
// "openai", "azure.ai.openai", "anthropic", "gcp.gemini", "gcp.vertex_ai",
// "aws.bedrock", or the custom provider's providerOverride (default
// "custom").
func (p *Provider) System() string { return p.system }

// Model is the model the provider config fixes ("" when the client's is
// used).
func (p *Provider) Model() string { return p.model }

// Upstream is where requests go: "host:port" and the TLS settings for
// backend.Pools. Default hosts use port 443 with TLS; hostOverride is plain
// HTTP to that host:port.
func (p *Provider) Upstream() (addr string, tls backend.UpstreamTLS) { return p.addr, p.tls }

func fieldError(path, msg string) *decode.FieldError {
	return &decode.FieldError{Path: path, Msg: msg}
}

// ValidHostLabel reports a DNS label of lower-case letters, digits and
// hyphens: what a setting that becomes part of a host name may hold (a
// region, a location, a resource name).
func ValidHostLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
