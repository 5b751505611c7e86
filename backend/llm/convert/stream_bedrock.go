package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// Bedrock ConverseStream: an AWS event stream whose messages name their
// payload in the :event-type header (messageStart, contentBlockStart,
// contentBlockDelta, contentBlockStop, messageStop, metadata) or are
// exceptions (:message-type exception, :exception-type). Text and reasoning
// blocks have no contentBlockStart: their first delta starts them.

func (s *Stream) bedrockMessage(dst []byte, m *llm.EventMessage) []byte {
	if m.MessageType == "exception" || m.MessageType == "error" {
		typ, msg := m.ExceptionType, []byte(m.ErrorMessage)
		if typ == "" {
			typ = m.ErrorCode
		}
		var e llm.BedrockErrorBody
		if len(m.Payload) > 0 && s.dec.Decode(m.Payload, &e) == nil && e.Text() != "" {
			msg = bytesOf(e.Text())
		}
		first := s.failed.Status == 0
		dst = s.providerError(dst, bedrockExceptionStatus(typ), typ, msg)
		if first {
			// AWS documents it as retryable: an error while the model
			// streamed, not the request's.
			s.failed.Retryable = typ == "modelStreamErrorException"
		}
		return dst
	}
	e := &s.bd
	if len(m.Payload) > 0 {
		if err := e.Decode(&s.dec, m.Payload); err != nil {
			return s.invalid(dst, err)
		}
	} else {
		e.Reset()
	}
	switch m.EventType {
	case "messageStart":
		return s.start(dst, "", "")
	case "contentBlockStart":
		if tu := &e.Start.ToolUse; tu.Name != "" {
			var i int
			dst, i = s.openBlock(dst, kToolUse, tu.ToolUseID, tu.Name, nil)
			s.rd.setMapped(e.ContentBlockIndex, i)
		}
	case "contentBlockDelta":
		d := &e.Delta
		i := s.rd.mapped(e.ContentBlockIndex)
		var k kind
		switch {
		case d.Text.IsString():
			k = kText
		case d.ToolUse.Input.IsString():
			k = kToolUse
		case d.ReasoningContent.Text.IsString() || d.ReasoningContent.Signature.IsString():
			k = kThinking
		case d.ReasoningContent.RedactedContent.IsString():
			k = kRedacted
		default:
			return dst
		}
		if i < 0 {
			if k == kText && len(d.Text) == 2 {
				return dst // an empty text delta starts no block
			}
			dst, i = s.openBlock(dst, k, "", "", d.ReasoningContent.RedactedContent)
			s.rd.setMapped(e.ContentBlockIndex, i)
		}
		switch k {
		case kText:
			return s.delta(dst, i, dText, d.Text)
		case kToolUse:
			return s.delta(dst, i, dArgs, d.ToolUse.Input)
		case kThinking:
			dst = s.delta(dst, i, dThinking, d.ReasoningContent.Text)
			return s.delta(dst, i, dSignature, d.ReasoningContent.Signature)
		}
	case "contentBlockStop":
		if i := s.rd.mapped(e.ContentBlockIndex); i >= 0 && i == s.rd.open {
			return s.closeBlock(dst)
		}
	case "messageStop":
		return s.stopWith(dst, bedrockStop(e.StopReason), nil)
	case "metadata":
		s.addUsage(bedrockUsage(&e.Usage))
		return s.end(dst)
	}
	return dst
}
