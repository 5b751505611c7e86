package convert

import (
	"unsafe"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/sse"
)

// Chat Completions streams: chunks as "data: {...}" events, ending with
// "data: [DONE]".

func (s *Stream) chatEvent(dst, data []byte) []byte {
	if string(data) == "[DONE]" {
		if s.strip {
			dst = sse.AppendEvent(dst, sse.Event{Data: data})
		}
		return s.end(dst)
	}
	c := &s.chunk
	if err := c.Decode(&s.dec, data); err != nil {
		return s.invalid(dst, err)
	}
	if s.strip && !(len(c.Choices) == 0 && c.Usage.Present()) {
		dst = sse.AppendEvent(dst, sse.Event{Data: data})
	}
	if c.Error.Present() {
		var e llm.ErrorBody
		if err := s.dec.DecodeTrusted(data, &e); err != nil {
			return s.invalid(dst, err)
		}
		return s.providerError(dst, 500, e.Error.Type, bytesOf(e.Error.Message))
	}
	dst = s.start(dst, c.ID, c.Model)
	if len(c.Choices) > 0 {
		ch := &c.Choices[0]
		d := &ch.Delta
		if len(d.ReasoningContent.Inner()) > 0 {
			dst = s.flushCalls(dst)
			var i int
			dst, i = s.ensureOpen(dst, kThinking)
			dst = s.delta(dst, i, dThinking, d.ReasoningContent)
		}
		if len(d.Content.Inner()) > 0 {
			dst = s.flushCalls(dst)
			var i int
			dst, i = s.ensureOpen(dst, kText)
			dst = s.delta(dst, i, dText, d.Content)
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			i := s.rd.mapped(tc.Index)
			if i >= 0 {
				dst = s.delta(dst, i, dArgs, tc.Function.Arguments)
				continue
			}
			if p := s.pendingCall(tc.Index); p != nil {
				if !p.add(s, tc.Function.Arguments) {
					return s.keptTooMuch(dst)
				}
				continue
			}
			id := tc.ID
			if id == "" {
				start := len(s.scratch)
				s.scratch = appendID(s.scratch, "call_")
				id = string(s.scratch[start:])
				s.scratch = s.scratch[:start] // id is a copy: a long stream's scratch stays small
			}
			if s.rd.open >= 0 && s.rd.openKind == kToolUse {
				// Another call is under way, and a provider may interleave
				// their arguments (0, 1, 0, 1): a block once stopped takes
				// no more, so this one waits until the calls end.
				if !s.holdCall(tc.Index, id, tc.Function.Name, tc.Function.Arguments) {
					return s.keptTooMuch(dst)
				}
				continue
			}
			dst, i = s.openBlock(dst, kToolUse, id, tc.Function.Name, nil)
			s.rd.setMapped(tc.Index, i)
			dst = s.delta(dst, i, dArgs, tc.Function.Arguments)
		}
		if ch.FinishReason != "" {
			dst = s.stopWith(dst, chatStop(ch.FinishReason), nil)
		}
	}
	if c.Usage.Present() {
		s.cu = llm.ChatUsage{}
		if err := s.dec.DecodeTrusted(c.Usage, &s.cu); err != nil {
			return s.invalid(dst, err)
		}
		s.addUsage(chatUsage(&s.cu))
	}
	return dst
}

// heldCall is a Chat provider's tool call begun while another one's block
// was open: its name and arguments so far (a string token without its
// closing quote), until the calls end (flushCalls).
type heldCall struct {
	index    int
	id, name []byte
	args     []byte
}

// pendingCall is the held call of the provider's tool call index, or nil.
func (s *Stream) pendingCall(index int) *heldCall {
	for k := range s.held {
		if s.held[k].index == index {
			return &s.held[k]
		}
	}
	return nil
}

// heldCallBytes is what a held call costs kept, its id, name and
// arguments aside (Stream.keep).
const heldCallBytes = int(unsafe.Sizeof(heldCall{}))

// holdCall holds a tool call back (chatEvent), reusing a former one's
// buffers. It reports false when the stream may keep no more (keep).
func (s *Stream) holdCall(index int, id, name string, args llm.Raw) bool {
	if !s.keepHeld(heldCallBytes + len(id) + len(name)) {
		return false
	}
	n := len(s.held)
	if n < cap(s.held) {
		s.held = s.held[:n+1]
	} else {
		s.held = append(s.held, heldCall{})
	}
	p := &s.held[n]
	p.index = index
	p.id = append(p.id[:0], id...)
	p.name = append(p.name[:0], name...)
	p.args = append(p.args[:0], '"')
	return p.add(s, args)
}

// add appends a piece of the call's arguments (a string token), counted
// for OutputEstimate now. It reports false when the stream may keep no
// more (keep).
func (p *heldCall) add(s *Stream, args llm.Raw) bool {
	if !args.IsString() || len(args) == 2 {
		return true
	}
	if !s.keepHeld(len(args) - 2) {
		return false
	}
	s.countDelta(args)
	p.args = append(p.args, args.Inner()...)
	return true
}

// keepHeld is keep for the held calls, whose bytes are no longer kept
// once they are written (flushHeld).
func (s *Stream) keepHeld(n int) bool {
	if !s.keep(n) {
		return false
	}
	s.heldKept += int64(n)
	return true
}

// flushCalls ends the open call and writes the held ones, each a block
// with its arguments whole: the calls ended (text follows, the answer
// stops or ends). (Inlined: a text chunk costs a length check.)
func (s *Stream) flushCalls(dst []byte) []byte {
	if len(s.held) == 0 {
		return dst
	}
	return s.flushHeld(dst)
}

func (s *Stream) flushHeld(dst []byte) []byte {
	held := s.held
	s.held = s.held[:0] // (openBlock's closing flushes nothing more)
	s.kept -= s.heldKept
	s.heldKept = 0
	for k := range held {
		p := &held[k]
		var i int
		// Views of p's buffers: the writers copy what they keep.
		dst, i = s.openBlock(dst, kToolUse, stringOf(p.id), stringOf(p.name), nil)
		s.rd.setMapped(p.index, i)
		if len(p.args) > 1 {
			p.args = append(p.args, '"')
			args := llm.Raw(p.args)
			if s.mk.g != nil {
				if masked, ok := s.mk.argsToken(s.mk.tok[:0], args); ok {
					s.mk.tok, args = masked, masked
				}
			}
			s.ev = event{kind: evDelta, index: i, delta: dArgs, text: args}
			dst = s.emit(dst)
		}
	}
	return dst
}

type chatWriter struct {
	prefix []byte // data: {"id":...,"choices":[{"index":0,"delta":
	head   []byte // {"id":...,"model":...
	tool   []int  // block index -> tool call index (-1: not a tool call)
	tools  int
	// bare is the open tool call's block while it has no arguments yet
	// (-1: none): one that ends so gets "{}", as a whole answer does.
	bare int
}

func (w *chatWriter) reset() {
	*w = chatWriter{prefix: w.prefix[:0], head: w.head[:0], tool: w.tool[:0], bare: -1}
}

const chatChunkEnd = ",\"finish_reason\":null}]}\n\n"

func (s *Stream) chatWrite(dst []byte, ev *event) []byte {
	w := &s.chatW
	switch ev.kind {
	case evStart:
		h := append(w.head[:0], `{"id":`...)
		if ev.id != "" {
			h = llm.AppendString(h, ev.id)
		} else {
			h = append(h, '"')
			h = appendID(h, "chatcmpl-")
			h = append(h, '"')
		}
		h = append(h, `,"object":"chat.completion.chunk","created":`...)
		h = appendInt(h, nowUnix())
		h = append(h, `,"model":`...)
		if ev.model != "" {
			h = llm.AppendString(h, ev.model)
		} else {
			h = llm.AppendString(h, s.model)
		}
		w.head = h
		w.prefix = append(append(append(w.prefix[:0], "data: "...), h...), `,"choices":[{"index":0,"delta":`...)
		dst = append(dst, w.prefix...)
		dst = append(dst, `{"role":"assistant","content":""}`...)
		return append(dst, chatChunkEnd...)
	case evBlockStart:
		for len(w.tool) <= ev.index {
			w.tool = append(w.tool, -1)
		}
		if ev.block != kToolUse {
			return dst
		}
		w.tool[ev.index] = w.tools
		w.tools++
		w.bare = ev.index
		dst = append(dst, w.prefix...)
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = appendInt(dst, int64(w.tool[ev.index]))
		dst = append(dst, `,"id":`...)
		dst = llm.AppendString(dst, ev.id)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = llm.AppendString(dst, ev.name)
		dst = append(dst, `,"arguments":""}`...)
		if hasSig(ev.sig) {
			dst = appendChatExtraContent(dst, ev.sig)
		}
		dst = append(dst, `}]}`...)
		return append(dst, chatChunkEnd...)
	case evDelta:
		switch ev.delta {
		case dText:
			dst = append(dst, w.prefix...)
			dst = append(dst, `{"content":`...)
		case dThinking:
			dst = append(dst, w.prefix...)
			dst = append(dst, `{"reasoning_content":`...)
		case dArgs:
			if ev.index >= len(w.tool) || w.tool[ev.index] < 0 {
				return dst
			}
			if ev.index == w.bare {
				w.bare = -1
			}
			return w.appendArgs(dst, w.tool[ev.index], ev.text)
		default:
			return dst
		}
		dst = append(dst, ev.text...)
		dst = append(dst, '}')
		return append(dst, chatChunkEnd...)
	case evBlockStop:
		if ev.index == w.bare {
			// A call without arguments (Anthropic's empty partial_json,
			// Bedrock's none) has the empty object.
			w.bare = -1
			return w.appendArgs(dst, w.tool[ev.index], llm.Raw(`"{}"`))
		}
	case evStop:
		dst = append(dst, w.prefix...)
		dst = append(dst, `{},"finish_reason":`...)
		dst = append(dst, chatFinish(ev.stop)...)
		return append(dst, "}]}\n\n"...)
	case evEnd:
		if s.info.IncludeUsage {
			dst = append(dst, "data: "...)
			dst = append(dst, w.head...)
			dst = append(dst, `,"choices":[],"usage":`...)
			dst = appendChatUsage(dst, s.usage)
			dst = append(dst, "}\n\n"...)
		}
		return append(dst, "data: [DONE]\n\n"...)
	case evError:
		dst = append(dst, "data: "...)
		dst = appendError(dst, Chat, ev.status, ev.errType, ev.errMsg)
		return append(dst, "\n\n"...)
	}
	return dst
}

// appendArgs writes a chunk with a piece of tool call call's arguments
// (a string token).
func (w *chatWriter) appendArgs(dst []byte, call int, args llm.Raw) []byte {
	dst = append(dst, w.prefix...)
	dst = append(dst, `{"tool_calls":[{"index":`...)
	dst = appendInt(dst, int64(call))
	dst = append(dst, `,"function":{"arguments":`...)
	dst = append(dst, args...)
	dst = append(dst, `}}]}`...)
	return append(dst, chatChunkEnd...)
}
