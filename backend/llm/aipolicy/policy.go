package aipolicy

import (
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/config"
)

// Policy is a compiled ai policy (the server merges route and backend
// policies first). It is immutable and safe for concurrent use.
type Policy struct {
	exactAliases map[string]string
	wildcards    []wildcard

	request fieldSet // defaults, overrides, transformations
	final   fieldSet // finalTransformations

	prompts [convert.Responses + 1]enrichment
	// touchesConversation: a field names a member holding the
	// conversation of the format (see Request).
	touchesConversation [convert.Responses + 1]bool

	guards      []requestGuard
	guardScopes scope // the union of the guards' scopes
	response    *guard.Guard
	// remoteRequest: a request guard is remote; remoteResponse are the
	// remote response guards in order; streaming is promptGuard.streaming
	// Enabled.
	remoteRequest  bool
	remoteResponse []*guardrail.Guard
	streaming      bool
}

// New compiles p, its remote guards with guardrail's default options (pools
// of their own); see NewWithOptions.
func New(p *config.AIPolicy) (*Policy, error) {
	return NewWithOptions(p, guardrail.Options{})
}

// NewWithOptions compiles p, its remote guards (backend/llm/guardrail) with
// opts. Its errors are *decode.FieldError with the path relative to
// `policies.ai` ("promptGuard.request[0].regex.rules[1]"). promptCaching
// and routes are not this package's: the server reads them from the
// config.
func NewWithOptions(p *config.AIPolicy, opts guardrail.Options) (*Policy, error) {
	out := &Policy{}
	out.exactAliases, out.wildcards = compileAliases(p.ModelAliases)
	var err error
	if out.request, err = compileFields(p.Defaults, p.Overrides, p.Transformations, "transformations"); err != nil {
		return nil, err
	}
	if out.final, err = compileFields(nil, nil, p.FinalTransformations, "finalTransformations"); err != nil {
		return nil, err
	}
	if out.guards, err = compileRequestGuards(p.PromptGuard, &opts); err != nil {
		return nil, err
	}
	out.prompts = compilePrompts(p.Prompts, out.guards)
	out.touchesConversation[convert.Chat] = out.request.names("messages")
	out.touchesConversation[convert.Messages] = out.request.names("messages", "system")
	out.touchesConversation[convert.Responses] = out.request.names("input", "instructions")
	for _, g := range out.guards {
		out.guardScopes |= g.scope
		out.remoteRequest = out.remoteRequest || g.remote != nil
	}
	if out.response, err = compileResponseGuard(p.PromptGuard); err != nil {
		return nil, err
	}
	if out.remoteResponse, err = compileRemoteResponse(p.PromptGuard, &opts); err != nil {
		return nil, err
	}
	out.streaming = p.PromptGuard != nil && p.PromptGuard.Streaming == "Enabled"
	return out, nil
}

// NeedsCEL reports whether Request or Final evaluates CEL: the server builds
// their celrules.Input only then.
func (p *Policy) NeedsCEL() bool {
	return len(p.request.transforms) > 0 || len(p.final.transforms) > 0
}

// ResponseGuard is the regex response guards merged into one guard that
// masks (matches in answers are always masked, whatever the action), or
// nil when there are none.
func (p *Policy) ResponseGuard() *guard.Guard { return p.response }
