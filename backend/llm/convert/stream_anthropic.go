package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// Anthropic Messages streams: named SSE events whose data carries the type
// too (message_start, content_block_start/delta/stop, message_delta,
// message_stop, ping, error).

func (s *Stream) anthropicEvent(dst, data []byte) []byte {
	e := &s.an
	if err := e.Decode(&s.dec, data); err != nil {
		return s.invalid(dst, err)
	}
	switch e.Type {
	case "message_start":
		s.addUsage(anthropicUsage(&e.Message.Usage))
		return s.start(dst, e.Message.ID, e.Message.Model)
	case "content_block_start":
		b := &e.ContentBlock
		var i int
		switch b.Type {
		case "text":
			dst, i = s.openBlock(dst, kText, "", "", nil)
			dst = s.delta(dst, i, dText, b.Text)
		case "tool_use":
			dst, i = s.openBlock(dst, kToolUse, b.ID, b.Name, nil)
		case "thinking":
			dst, i = s.openBlock(dst, kThinking, "", "", nil)
			dst = s.delta(dst, i, dThinking, b.Thinking)
		case "redacted_thinking":
			dst, i = s.openBlock(dst, kRedacted, "", "", b.Data)
		default:
			// Server tools' blocks have no counterpart elsewhere.
			s.rd.setMapped(e.Index, -1)
			return dst
		}
		s.rd.setMapped(e.Index, i)
	case "content_block_delta":
		i := s.rd.mapped(e.Index)
		if i < 0 {
			return dst
		}
		d := &e.Delta
		switch d.Type {
		case "text_delta":
			return s.delta(dst, i, dText, d.Text)
		case "input_json_delta":
			return s.delta(dst, i, dArgs, d.PartialJSON)
		case "thinking_delta":
			return s.delta(dst, i, dThinking, d.Thinking)
		case "signature_delta":
			return s.delta(dst, i, dSignature, d.Signature)
		}
	case "content_block_stop":
		if i := s.rd.mapped(e.Index); i >= 0 && i == s.rd.open {
			return s.closeBlock(dst)
		}
	case "message_delta":
		s.addUsage(anthropicUsage(&e.Usage))
		if e.Delta.StopReason != "" {
			return s.stopWith(dst, anthropicStop(e.Delta.StopReason), e.Delta.StopSequence)
		}
	case "message_stop":
		return s.end(dst)
	case "ping":
		// Anthropic's keep-alive, which no other format has: a comment in
		// any of them, as a provider's own comments go (Feed).
		if !s.pass {
			dst = append(dst, ": ping\n\n"...)
		}
		return dst
	case "error":
		return s.providerError(dst, anthropicErrorStatus(e.Error.Type), e.Error.Type, bytesOf(e.Error.Message))
	}
	return dst
}

func anthropicErrorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "overloaded_error":
		return 529
	}
	return 500
}

type anthropicWriter struct {
	stop    stopReason
	stopSeq []byte
	// A Gemini part's signature goes in a thinking block before it
	// (thoughtsig.go): the thought's before it, whose stop is held back
	// (held, its index; -1: none) while it has no signature of its own
	// (signed), else a block of its own, written before the part's; shift
	// counts those, which move the later blocks' indexes.
	shift    int
	held     int
	thinking bool // the open block is a thinking block
	signed   bool // ... and it has a signature
}

func (w *anthropicWriter) reset() { *w = anthropicWriter{stopSeq: w.stopSeq[:0], held: -1} }

// appendBlockStop writes the stop of our block i.
func appendBlockStop(dst []byte, i int) []byte {
	dst = appendNamedEvent(dst, "content_block_stop")
	dst = append(dst, `{"type":"content_block_stop","index":`...)
	dst = appendInt(dst, int64(i))
	return append(dst, "}\n\n"...)
}

// appendSigDelta writes a signature delta of block i with the Gemini
// signature sig, marked.
func appendSigDelta(dst []byte, i int, sig llm.Raw) []byte {
	dst = appendNamedEvent(dst, "content_block_delta")
	dst = append(dst, `{"type":"content_block_delta","index":`...)
	dst = appendInt(dst, int64(i))
	dst = append(dst, `,"delta":{"type":"signature_delta","signature":`...)
	dst = appendMarkedSig(dst, sig)
	return append(dst, "}}\n\n"...)
}

// anthropicSig writes what a Gemini signature at the start of a text or
// tool use block takes before the block's start, and releases a held
// thinking block's stop before any other event.
func (s *Stream) anthropicSig(dst []byte, ev *event) []byte {
	w := &s.anW
	carries := ev.kind == evBlockStart && (ev.block == kText || ev.block == kToolUse) && hasSig(ev.sig)
	if w.held >= 0 {
		if carries {
			dst = appendSigDelta(dst, w.held, ev.sig)
		}
		dst = appendBlockStop(dst, w.held)
		w.held = -1
		return dst
	}
	if carries {
		i := ev.index + w.shift
		w.shift++
		dst = appendNamedEvent(dst, "content_block_start")
		dst = append(dst, `{"type":"content_block_start","index":`...)
		dst = appendInt(dst, int64(i))
		dst = append(dst, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`+"\n\n"...)
		dst = appendSigDelta(dst, i, ev.sig)
		dst = appendBlockStop(dst, i)
	}
	return dst
}

func appendNamedEvent(dst []byte, name string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	return append(dst, "\ndata: "...)
}

func (s *Stream) anthropicWrite(dst []byte, ev *event) []byte {
	w := &s.anW
	if s.info.Provider == Gemini {
		dst = s.anthropicSig(dst, ev)
	}
	index := int64(ev.index + w.shift)
	switch ev.kind {
	case evStart:
		dst = appendNamedEvent(dst, "message_start")
		dst = append(dst, `{"type":"message_start","message":{"id":`...)
		if ev.id != "" {
			dst = llm.AppendString(dst, ev.id)
		} else {
			dst = append(dst, '"')
			dst = appendID(dst, "msg_")
			dst = append(dst, '"')
		}
		dst = append(dst, `,"type":"message","role":"assistant","model":`...)
		if ev.model != "" {
			dst = llm.AppendString(dst, ev.model)
		} else {
			dst = llm.AppendString(dst, s.model)
		}
		dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
		dst = appendAnthropicUsage(dst, s.usage)
		return append(dst, "}}\n\n"...)
	case evBlockStart:
		dst = appendNamedEvent(dst, "content_block_start")
		dst = append(dst, `{"type":"content_block_start","index":`...)
		dst = appendInt(dst, index)
		w.thinking, w.signed = ev.block == kThinking, false
		switch ev.block {
		case kToolUse:
			dst = append(dst, `,"content_block":{"type":"tool_use","id":`...)
			dst = llm.AppendString(dst, ev.id)
			dst = append(dst, `,"name":`...)
			dst = llm.AppendString(dst, ev.name)
			dst = append(dst, `,"input":{}}}`...)
		case kThinking:
			dst = append(dst, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
		case kRedacted:
			dst = append(dst, `,"content_block":{"type":"redacted_thinking","data":`...)
			dst = appendTextOrEmpty(dst, ev.text)
			dst = append(dst, `}}`...)
		default:
			dst = append(dst, `,"content_block":{"type":"text","text":""}}`...)
		}
		return append(dst, "\n\n"...)
	case evDelta:
		dst = appendNamedEvent(dst, "content_block_delta")
		dst = append(dst, `{"type":"content_block_delta","index":`...)
		dst = appendInt(dst, index)
		switch ev.delta {
		case dText:
			dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
		case dArgs:
			dst = append(dst, `,"delta":{"type":"input_json_delta","partial_json":`...)
		case dThinking:
			dst = append(dst, `,"delta":{"type":"thinking_delta","thinking":`...)
		case dSignature:
			w.signed = true
			dst = append(dst, `,"delta":{"type":"signature_delta","signature":`...)
		}
		dst = append(dst, ev.text...)
		return append(dst, "}}\n\n"...)
	case evBlockStop:
		if w.thinking && !w.signed && s.info.Provider == Gemini {
			// The part after it may bring the signature (anthropicSig).
			w.held = int(index)
			return dst
		}
		return appendBlockStop(dst, int(index))
	case evStop:
		w.stop = ev.stop
		w.stopSeq = append(w.stopSeq[:0], ev.stopSeq...)
	case evEnd:
		dst = appendNamedEvent(dst, "message_delta")
		dst = append(dst, `{"type":"message_delta","delta":{"stop_reason":`...)
		dst = append(dst, anthropicStopName(w.stop)...)
		dst = append(dst, `,"stop_sequence":`...)
		if llm.Raw(w.stopSeq).IsString() {
			dst = append(dst, w.stopSeq...)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `},"usage":`...)
		dst = appendAnthropicUsage(dst, s.usage)
		dst = append(dst, "}\n\n"...)
		dst = appendNamedEvent(dst, "message_stop")
		return append(dst, `{"type":"message_stop"}`+"\n\n"...)
	case evError:
		dst = appendNamedEvent(dst, "error")
		dst = appendError(dst, Messages, ev.status, ev.errType, ev.errMsg)
		return append(dst, "\n\n"...)
	}
	return dst
}
