package convert

import (
	"errors"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/sse"
)

// Tapping a streamed answer's text (TapText, TakeText), and ending a stream
// with an error of the caller's (Abort): what a server needs to have remote
// guards judge the answer while it streams, holding back the events of a
// window of text until the guards passed it.
//
// The tap collects the answer text the client is sent, in order:
//
//   - masked streams (RequestInfo.Mask): what the maskers release, so the
//     text as masked (stream_mask.go's write and flush);
//   - other streams: the text of each provider event read: every Chat
//     choice's content, Messages text blocks (message_start's, a block's
//     first text, text_delta), every Gemini candidate's text parts that
//     are not thinking, Bedrock text deltas, Responses output_text deltas.
//
// Thinking, tool call arguments and refusals are not collected (a masked
// stream masks the first two, stream_mask.go). A translated stream reads Chat's first choice and Gemini's
// first candidate only: the tap collecting the others too judges text the
// client never gets, never less than it gets.
//
// A tapped stream's output ends on event boundaries, so that a caller
// holding it back never releases part of an event whose text the tap has
// not collected yet. Translated and masked streams are written event by
// event anyway; a tapped same-format stream that is not masked is too (our
// SSE framing, as for a masked one, stream_mask.go), not copied as the
// provider's pieces came. An event it cannot read ends it with an error
// event, as a translated stream does, instead of passing the rest of the
// provider's bytes unread. A same-format Bedrock stream (no client's
// format) cannot be tapped and fails.

// textTap is a Stream's collected text.
type textTap struct {
	on   bool
	text []byte // plain text, since the last TakeText
}

// ErrAborted is what Feed and Close return once Abort ended the stream.
var ErrAborted = errors.New("convert: stream aborted")

var errTapFormat = errors.New("convert: a same-format bedrock stream cannot be tapped")

// TapText makes s collect the answer text it sends (see TakeText). Call it
// after AcquireStream or Reset, before the first Feed; Reset turns it off.
func (s *Stream) TapText() {
	s.tap.on = true
	s.sse.skipBig = false // every event's text is read
	if s.mk.g != nil {
		s.mk.tap = &s.tap.text
	}
	if s.pass && s.info.Provider == Bedrock && s.err == nil {
		s.err = errTapFormat
	}
}

// TakeText appends the text collected since the last call to dst and
// forgets it. It holds the text of the events Feed and Close returned so
// far, and nothing of an event not returned yet.
func (s *Stream) TakeText(dst []byte) []byte {
	dst = append(dst, s.tap.text...)
	s.tap.text = s.tap.text[:0]
	return dst
}

// resetTap turns the tap off for a new stream.
func (s *Stream) resetTap() {
	s.tap.on = false
	s.tap.text = keepScratch(s.tap.text)
	s.mk.tap = nil
}

// tapEvent follows the SSE event ev that s just read: an unmasked
// stream's text is collected from the event's decoded form, and a
// same-format stream copied as it is writes the event out (only now that
// it was read; see above).
func (s *Stream) tapEvent(dst []byte, ev sseEvent) []byte {
	if s.mk.g == nil {
		s.tapRead(ev.data)
	}
	if s.pass && !s.mk.pass && !s.strip {
		// (strip: chatEvent wrote the event already, or dropped it)
		dst = appendEventAs(dst, ev.typ, ev.data)
	}
	return dst
}

// tapRead collects the text of the provider event just decoded from data.
func (s *Stream) tapRead(data []byte) {
	switch s.info.Provider {
	case Chat:
		if string(data) == "[DONE]" {
			return // s.chunk is the event before
		}
		for i := range s.chunk.Choices {
			s.tapToken(s.chunk.Choices[i].Delta.Content)
		}
	case Messages:
		e := &s.an
		switch e.Type {
		case "message_start":
			for i := range e.Message.Content {
				if b := &e.Message.Content[i]; b.Type == "text" {
					s.tapToken(b.Text)
				}
			}
		case "content_block_start":
			if e.ContentBlock.Type == "text" {
				s.tapToken(e.ContentBlock.Text)
			}
		case "content_block_delta":
			if e.Delta.Type == "text_delta" {
				s.tapToken(e.Delta.Text)
			}
		}
	case Gemini:
		for i := range s.gm.Candidates {
			parts := s.gm.Candidates[i].Content.Parts
			for j := range parts {
				if !parts[j].Thought {
					s.tapToken(parts[j].Text)
				}
			}
		}
	case Responses:
		if s.rs.Type == "response.output_text.delta" {
			s.tapToken(s.rs.Delta)
		}
		// An error event of ours follows the provider's last number
		// (numberOurs).
		s.mk.lastSeq = max(s.mk.lastSeq, s.rs.SequenceNumber)
	}
}

// tapBedrock collects the text of the Bedrock message m just read.
func (s *Stream) tapBedrock(m *llm.EventMessage) {
	if s.mk.g == nil && m.MessageType != "exception" && m.MessageType != "error" && m.EventType == "contentBlockDelta" {
		s.tapToken(s.bd.Delta.Text)
	}
}

// tapToken collects the text of tok when it is a JSON string.
func (s *Stream) tapToken(tok llm.Raw) {
	if !tok.IsString() || len(tok) == 2 {
		return
	}
	n := len(s.tap.text)
	var err error
	if s.tap.text, err = llm.AppendUnquoted(s.tap.text, tok); err != nil {
		s.tap.text = s.tap.text[:n]
	}
}

// appendEventAs writes an SSE event of type typ with data, as a masked
// same-format stream writes its events.
func appendEventAs(dst, typ, data []byte) []byte {
	if len(typ) > 0 && string(typ) != "message" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	return sse.AppendEvent(dst, sse.Event{Data: data})
}

// Abort ends the stream with an error event of the caller's, in the
// client's format, appended to dst: typ is the error's type ("guardrail_blocked"),
// code its code where the format has one (Chat's error.code, Responses'
// code; typ when empty), msg its message (plain text). It replaces what
// the stream would still send: text a masker holds back is dropped, the
// tap emptied, and later Feed and Close calls return ErrAborted with
// nothing more. Abort may follow the stream's end or an error of its own
// (a caller that held their output back sends this event instead).
func (s *Stream) Abort(dst []byte, typ, code string, msg []byte) []byte {
	s.mk.closeAll()
	s.tap.text = s.tap.text[:0]
	s.rd.ended = true
	s.err = ErrAborted
	if code == "" {
		code = typ
	}
	switch s.info.Client {
	case Messages:
		dst = appendNamedEvent(dst, "error")
		dst = appendError(dst, Messages, 0, typ, msg)
		return append(dst, "\n\n"...)
	case Responses:
		if s.pass {
			s.mk.numberOurs(&s.rsW)
		}
		dst = s.rsW.begin(dst, "error")
		dst = append(dst, `,"code":`...)
		dst = llm.AppendString(dst, code)
		dst = append(dst, `,"message":`...)
		dst = llm.AppendString(dst, msg)
		return append(dst, `,"param":null}`+"\n\n"...)
	}
	// Chat's shape, with the code its error object has room for.
	dst = append(dst, `data: {"error":{"message":`...)
	dst = llm.AppendString(dst, msg)
	dst = append(dst, `,"type":`...)
	dst = llm.AppendString(dst, typ)
	dst = append(dst, `,"param":null,"code":`...)
	dst = llm.AppendString(dst, code)
	return append(dst, "}}\n\n"...)
}
