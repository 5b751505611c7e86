package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// Gemini streams (streamGenerateContent?alt=sse): every event is a whole
// GenerateContentResponse holding the next parts; a function call comes
// whole in one part; usageMetadata is cumulative; the stream has no last
// event, so the end is a finish reason followed by the end of the body.

func (s *Stream) geminiEvent(dst, data []byte) []byte {
	g := &s.gm
	if err := g.Decode(&s.dec, data); err != nil {
		return s.invalid(dst, err)
	}
	if g.Error.Present() {
		var e llm.GeminiErrorBody
		if err := s.dec.DecodeTrusted(data, &e); err != nil {
			return s.invalid(dst, err)
		}
		status := e.Error.Code
		if status < 400 || status > 599 {
			status = 500
		}
		return s.providerError(dst, status, googleErrorType(e.Error.Status, status, s.info.Client), bytesOf(e.Error.Message))
	}
	dst = s.start(dst, g.ResponseID, g.ModelVersion)
	s.addUsage(geminiUsage(&g.UsageMetadata))
	if len(g.Candidates) == 0 {
		return dst
	}
	c := &g.Candidates[0]
	for j := range c.Content.Parts {
		p := &c.Content.Parts[j]
		var i int
		switch {
		case p.FunctionCall.Name != "":
			id := p.FunctionCall.ID
			if id == "" {
				start := len(s.scratch)
				s.scratch = appendID(s.scratch, "call_")
				id = string(s.scratch[start:])
				s.scratch = s.scratch[:start] // id is a copy: a long stream's scratch stays small
			}
			dst, i = s.openSigned(dst, kToolUse, id, p.FunctionCall.Name, nil, p.ThoughtSignature)
			args := p.FunctionCall.Args
			if !args.Present() {
				args = llm.Raw("{}")
			}
			start := len(s.scratch)
			s.scratch = llm.AppendQuoted(s.scratch, args)
			dst = s.delta(dst, i, dArgs, s.scratch[start:])
			s.scratch = s.scratch[:start]
			dst = s.closeBlock(dst)
		case emptyPart(p):
			// Gemini often ends a stream with an empty text part: it makes
			// no block (an Anthropic client would get an empty text block,
			// which its API refuses when the turn is sent back; a Responses
			// client an empty message item).
		case p.Text.IsString() && p.Thought:
			dst, i = s.ensureOpen(dst, kThinking)
			dst = s.delta(dst, i, dThinking, p.Text)
			dst = s.delta(dst, i, dSignature, p.ThoughtSignature)
		case p.Text.IsString():
			if s.rd.open >= 0 && s.rd.openKind == kText {
				// (a signature on a part that goes on with the text is
				// dropped: a Messages client has the text's start already)
				i = s.rd.open
			} else {
				dst, i = s.openSigned(dst, kText, "", "", nil, p.ThoughtSignature)
			}
			dst = s.delta(dst, i, dText, p.Text)
		}
	}
	if c.FinishReason != "" {
		dst = s.stopWith(dst, geminiStop(c.FinishReason, s.rd.calls > 0), nil)
	}
	return dst
}
