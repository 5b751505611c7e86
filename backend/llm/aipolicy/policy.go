package aipolicy

import (
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/guard"
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
}

// New compiles p. Its errors are *decode.FieldError with the path relative
// to `policies.ai` ("promptGuard.request[0].regex.rules[1]"). Guards other
// than regex are refused as not served yet. promptCaching and routes are
// not this package's: the server reads them from the config.
func New(p *config.AIPolicy) (*Policy, error) {
	out := &Policy{}
	out.exactAliases, out.wildcards = compileAliases(p.ModelAliases)
	var err error
	if out.request, err = compileFields(p.Defaults, p.Overrides, p.Transformations, "transformations"); err != nil {
		return nil, err
	}
	if out.final, err = compileFields(nil, nil, p.FinalTransformations, "finalTransformations"); err != nil {
		return nil, err
	}
	if out.guards, err = compileRequestGuards(p.PromptGuard); err != nil {
		return nil, err
	}
	out.prompts = compilePrompts(p.Prompts, out.guards)
	out.touchesConversation[convert.Chat] = out.request.names("messages")
	out.touchesConversation[convert.Messages] = out.request.names("messages", "system")
	out.touchesConversation[convert.Responses] = out.request.names("input", "instructions")
	for _, g := range out.guards {
		out.guardScopes |= g.scope
	}
	if out.response, err = compileResponseGuard(p.PromptGuard); err != nil {
		return nil, err
	}
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
