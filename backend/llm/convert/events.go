package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// The events a provider's stream is read into and a client's stream is
// written from. Readers keep them well formed whatever the provider sent:
// one start first; blocks numbered 0, 1, ... in order, each started, given
// deltas and stopped, at most one open at a time; then stop, usage and end.

type evKind uint8

const (
	evStart evKind = iota
	evBlockStart
	evDelta
	evBlockStop
	evStop
	evEnd
	evError
)

type deltaKind uint8

const (
	dText deltaKind = iota
	dArgs
	dThinking
	dSignature
)

type event struct {
	kind  evKind
	index int
	block kind
	delta deltaKind
	// text: a delta's string token; a redacted block's data token.
	text llm.Raw
	// id and name of a tool use block; id and model of a start.
	id, name, model string
	// sig is the Gemini signature of a text or tool use block, at its
	// start (thoughtsig.go).
	sig     llm.Raw
	stop    stopReason
	stopSeq llm.Raw

	status  int
	errType string
	errMsg  []byte // plain text
}

// readState is a reader's view of the stream so far.
type readState struct {
	started, stopped, ended bool
	open                    int // the open block, -1 when none
	openKind                kind
	next                    int
	calls                   int
	// index maps the provider's block (or Chat tool call) index to ours;
	// -1: ignored.
	index []int
	// bigLast: the last event was too large to read (bigevent.go).
	bigLast bool
}

func (r *readState) reset() {
	*r = readState{open: -1, index: r.index[:0]}
}

// mapped is our index of the provider's index i (-1 when unknown).
func (r *readState) mapped(i int) int {
	if i < 0 || i >= len(r.index) {
		return -1
	}
	return r.index[i]
}

func (r *readState) setMapped(i, ours int) {
	if i < 0 || i > 1<<16 {
		return
	}
	for len(r.index) <= i {
		r.index = append(r.index, -1)
	}
	r.index[i] = ours
}

// emit passes s.ev to the client's writer, and keeps the usage.
func (s *Stream) emit(dst []byte) []byte {
	ev := &s.ev
	if s.pass {
		if ev.kind == evError {
			s.rd.ended = true // the provider's error went through as it was
		}
		return dst
	}
	if s.err != nil {
		// The stream failed (its error event is written) while reading
		// the provider's event: what the event goes on to say is dropped.
		return dst
	}
	return s.write(dst, ev)
}

// write writes ev as the client's event(s).
func (s *Stream) write(dst []byte, ev *event) []byte {
	switch s.info.Client {
	case Chat:
		return s.chatWrite(dst, ev)
	case Messages:
		return s.anthropicWrite(dst, ev)
	case Responses:
		if ev.kind == evBlockStart && ev.block == kToolUse && hasSig(ev.sig) {
			// The signature rides in the call's id (thoughtsig.go).
			s.sigID = appendThoughtID(s.sigID[:0], ev.id, ev.sig)
			e := *ev
			e.id = stringOf(s.sigID)
			return s.responsesWrite(dst, &e)
		}
		return s.responsesWrite(dst, ev)
	}
	return dst
}

func errorFromEvent(ev *event) error {
	return &Error{Status: ev.status, Message: string(ev.errMsg)}
}

func (s *Stream) start(dst []byte, id, model string) []byte {
	s.noteModel(model)
	if s.rd.started {
		return dst
	}
	s.rd.started = true
	s.ev = event{kind: evStart, id: id, model: model}
	return s.emit(dst)
}

// openBlock closes the open block and starts a new one; it returns our
// index of it.
func (s *Stream) openBlock(dst []byte, k kind, id, name string, text llm.Raw) ([]byte, int) {
	return s.openSigned(dst, k, id, name, text, nil)
}

// openSigned is openBlock for a block with a Gemini signature.
func (s *Stream) openSigned(dst []byte, k kind, id, name string, text, sig llm.Raw) ([]byte, int) {
	dst = s.start(dst, "", "")
	dst = s.closeBlock(dst)
	i := s.rd.next
	s.rd.next++
	s.rd.open, s.rd.openKind = i, k
	if k == kToolUse {
		s.rd.calls++
	}
	s.ev = event{kind: evBlockStart, index: i, block: k, id: id, name: name, text: text, sig: sig}
	return s.emit(dst), i
}

// ensureOpen returns the open block when it is of kind k, else opens one.
func (s *Stream) ensureOpen(dst []byte, k kind) ([]byte, int) {
	if s.rd.open >= 0 && s.rd.openKind == k {
		return dst, s.rd.open
	}
	return s.openBlock(dst, k, "", "", nil)
}

func (s *Stream) closeBlock(dst []byte) []byte {
	if s.rd.open < 0 {
		return dst
	}
	dst = s.flushText(dst)
	s.ev = event{kind: evBlockStop, index: s.rd.open}
	s.rd.open = -1
	return s.emit(dst)
}

func (s *Stream) delta(dst []byte, i int, d deltaKind, tok llm.Raw) []byte {
	if !tok.IsString() || len(tok) == 2 {
		return dst
	}
	if d != dSignature {
		s.countDelta(tok)
	}
	if s.mk.g != nil && !s.pass {
		if d == dSignature {
			// The thinking's text ends before its signature.
			dst = s.flushText(dst)
		} else {
			var ok bool
			if tok, ok = s.maskDelta(i, d, tok); !ok {
				return s.maskFailed(dst)
			}
			if tok == nil {
				return dst // all held back for now
			}
		}
	}
	s.ev = event{kind: evDelta, index: i, delta: d, text: tok}
	return s.emit(dst)
}

func (s *Stream) stopWith(dst []byte, reason stopReason, seq llm.Raw) []byte {
	dst = s.flushCalls(dst)
	dst = s.start(dst, "", "")
	dst = s.closeBlock(dst)
	s.rd.stopped = true
	s.ev = event{kind: evStop, stop: reason, stopSeq: seq}
	return s.emit(dst)
}

func (s *Stream) addUsage(u Usage) { s.usage.merge(u) }

func (s *Stream) end(dst []byte) []byte {
	if s.rd.ended {
		return dst
	}
	dst = s.flushCalls(dst)
	dst = s.start(dst, "", "")
	dst = s.closeBlock(dst)
	s.rd.ended = true
	s.ev = event{kind: evEnd}
	dst = s.emit(dst)
	s.complete = s.err == nil
	return dst
}

// providerError ends the stream with the provider's error.
func (s *Stream) providerError(dst []byte, status int, typ string, msg []byte) []byte {
	if len(msg) == 0 {
		msg = []byte("provider error")
	}
	if s.failed.Status == 0 {
		s.failMsg = append(s.failMsg[:0], msg...)
		s.failed = StreamFailure{Status: status, Type: typ, Message: s.failMsg}
	}
	if typ == "" || !knownType(typ, s.info.Client) {
		typ = statusErrorType(status, s.info.Client)
	}
	dst = s.flushText(dst)
	s.ev = event{kind: evError, status: status, errType: typ, errMsg: msg}
	dst = s.emit(dst)
	if s.err == nil && !s.pass {
		s.err = errorFromEvent(&s.ev)
	}
	return dst
}

// invalid ends the stream on an event the provider should not have sent.
func (s *Stream) invalid(dst []byte, err error) []byte {
	dst, _ = s.fail(dst, 502, "api_error", "invalid event from provider: "+err.Error())
	return dst
}
