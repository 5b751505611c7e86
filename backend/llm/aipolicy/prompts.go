package aipolicy

import (
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
)

// enrichment is `prompts` written out for one client format: the items to
// insert before and after the conversation (comma-separated JSON values,
// nil when none) and, for Messages, the system prompt's text blocks.
//
// The prompts are configuration, so the request guards run on them once,
// here: their texts are written out masked, and rejectAt is the first
// guard that refuses one (-1: none). At run time that guard refuses every
// request, as agentgateway's would after enriching it.
type enrichment struct {
	pre, post       []byte
	sysPre, sysPost []byte
	rejectAt        int
}

func (e *enrichment) empty() bool {
	return e.pre == nil && e.post == nil && e.sysPre == nil && e.sysPost == nil
}

// compilePrompts writes the prompts in each client format, as agentgateway's
// request types add them (prepend_prompts, append_prompts):
//
//   - Chat: {"role": r, "content": text} messages.
//   - Messages: system prompts become {"type":"text","text":...} blocks of
//     the top-level "system" (a string system prompt becomes one such
//     block), the others {"role": r, "content": text} messages.
//   - Responses: input items; an assistant message is
//     {"type":"message","role":"assistant","content":text}, a system or
//     developer one keeps its role, and any other role becomes "user", their
//     content one input_text part.
func compilePrompts(pe *config.PromptEnrichment, guards []requestGuard) (out [convert.Responses + 1]enrichment) {
	for f := range out {
		out[f].rejectAt = -1
	}
	if pe == nil {
		return out
	}
	for _, f := range []convert.Format{convert.Chat, convert.Messages, convert.Responses} {
		for _, m := range pe.Prepend {
			out[f].add(f, m, false, guards)
		}
		for _, m := range pe.Append {
			out[f].add(f, m, true, guards)
		}
	}
	return out
}

// add writes one prompt in format f, guarded.
func (e *enrichment) add(f convert.Format, m config.ChatMessage, after bool, guards []requestGuard) {
	text, rejectAt := guardPrompt(guards, promptScope(f, m.Role), m.Content)
	if rejectAt >= 0 && (e.rejectAt < 0 || rejectAt < e.rejectAt) {
		e.rejectAt = rejectAt
	}
	switch {
	case f == convert.Messages && m.Role == "system":
		block := append([]byte(`{"type":"text","text":`), llm.AppendString(nil, text)...)
		pick(e, after, true).add(append(block, '}'))
	case f == convert.Responses:
		pick(e, after, false).add(responsesItem(m.Role, text))
	default:
		pick(e, after, false).add(appendRoleMessage(nil, m.Role, text))
	}
}

// promptScope is the scope a prompt of the role has in format f: the scope
// its text would have in a client's body (texts.go).
func promptScope(f convert.Format, role string) scope {
	switch {
	case role == "system":
		return scopeSystem
	case role == "developer" && f != convert.Messages:
		return scopeSystem
	case (role == "tool" || role == "function") && f == convert.Chat:
		return scopeToolOutput
	}
	return scopeMessages
}

// guardPrompt runs the request guards in order on a prompt's text: the
// text as the masks leave it, or the index of the guard that refuses it.
func guardPrompt(guards []requestGuard, s scope, text string) (string, int) {
	b := []byte(text)
	for gi, g := range guards {
		if g.g == nil {
			continue // remote guards are asked per request, about the client's texts only
		}
		if g.scope&s == 0 {
			continue
		}
		if g.g.Action() == guard.ActionReject {
			if v, _ := g.g.Check(b); v == guard.Rejected {
				return text, gi
			}
			continue
		}
		if masked, ok := g.g.AppendMask(nil, b); ok {
			b = masked
		}
	}
	return string(b), -1
}

// list is a comma-separated list of JSON values being built.
type list struct{ b *[]byte }

func (l list) add(v []byte) {
	if *l.b != nil {
		*l.b = append(*l.b, ',')
	}
	*l.b = append(*l.b, v...)
}

func pick(e *enrichment, after, system bool) list {
	switch {
	case system && after:
		return list{&e.sysPost}
	case system:
		return list{&e.sysPre}
	case after:
		return list{&e.post}
	}
	return list{&e.pre}
}

func appendRoleMessage(dst []byte, role, content string) []byte {
	dst = append(dst, `{"role":`...)
	dst = llm.AppendString(dst, role)
	dst = append(dst, `,"content":`...)
	dst = llm.AppendString(dst, content)
	return append(dst, '}')
}

func responsesItem(role, text string) []byte {
	if role == "assistant" {
		b := append([]byte(nil), `{"type":"message","role":"assistant","content":`...)
		b = llm.AppendString(b, text)
		return append(b, '}')
	}
	if role != "system" && role != "developer" {
		role = "user"
	}
	return appendInputMessage(nil, role, llm.AppendString(nil, text))
}

// appendInputMessage writes a Responses message item whose content is one
// input_text part holding the string token text.
func appendInputMessage(dst []byte, role string, text []byte) []byte {
	dst = append(dst, `{"type":"message","role":`...)
	dst = llm.AppendString(dst, role)
	dst = append(dst, `,"content":[{"type":"input_text","text":`...)
	dst = append(dst, text...)
	return append(dst, `}]}`...)
}
