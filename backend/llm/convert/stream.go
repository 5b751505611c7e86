package convert

import (
	"errors"
	"io"
	"sync"

	"github.com/relaygate/gateway/codec/llm"
)

// Stream translates a streamed response from the provider's format into the
// client's, chunk by chunk:
//
//	s := convert.AcquireStream(info)
//	defer convert.ReleaseStream(s)
//	for each piece p of the provider's body {
//		out, err = s.Feed(out[:0], p)   // send out (may be empty), stop on err
//	}
//	out, err = s.Close(out[:0])         // send out
//	usage := s.Usage()
//
// Pieces may split the provider's events anywhere (SSE lines, event stream
// messages); the Stream keeps what it needs across them, such as a tool
// call's arguments arriving in parts. It is not safe for concurrent use.
type Stream struct {
	info  RequestInfo
	model []byte

	pass  bool // same formats: bytes pass through, events are only read
	blind bool // ... and reading them failed: bytes only
	strip bool // ... except the usage chunk the client did not ask for

	sse sseFramer
	es  llm.EventStream
	dec llm.Decoder
	err error

	chunk llm.ChatChunk
	an    llm.AnthropicStreamEvent
	gm    llm.GeminiResponse
	bd    llm.BedrockStreamEvent
	rs    llm.ResponsesStreamEvent
	cu    llm.ChatUsage

	rd      readState
	ev      event
	usage   Usage
	scratch []byte
	sigID   []byte // a Responses call id carrying a signature (write)

	// deltas and deltaBytes count the answer's text and argument deltas
	// so far, and their bytes (OutputEstimate).
	deltas, deltaBytes int64

	// respModel is the model the provider's stream says answered (Model).
	respModel []byte

	// complete: the stream's last events are written (end), no error
	// before them (Ended).
	complete bool

	// failed is the provider's own error event, when its stream ended
	// with one (ProviderFailure); failMsg holds its message.
	failed  StreamFailure
	failMsg []byte

	// held are a Chat provider's tool calls held back (stream_chat.go).
	held []heldCall

	// kept counts the bytes of the answer the Stream keeps until a later
	// event (a Responses client's items, a Chat provider's held calls),
	// up to keptMax (MaxKeptBytes): keep; heldKept is the held calls' part
	// of it. overKept: the stream is failing for it.
	kept, keptMax, heldKept int64
	overKept                bool

	chatW chatWriter
	anW   anthropicWriter
	rsW   responsesWriter

	mk  streamMask // masking the answer's text (stream_mask.go)
	tap textTap    // collecting the answer's text (stream_tap.go)
}

// MaxEventBytes bounds one provider event (an SSE event's data, an event
// stream message) that a Stream reads; a larger one fails the stream,
// unless the stream passes the provider's SSE events on as they came:
// then it is passed on unread, only its usage and type followed
// (bigevent.go).
const MaxEventBytes = 1 << 20

// MaxKeptBytes bounds what a Stream keeps of the answer for the events
// that repeat it: a Responses client's done events and its
// response.completed carry each item's text and the whole output (as
// OpenAI's do, and its SDKs read them), and a Chat provider's tool call
// begun while another is open is held until the calls end. An answer that
// needs more fails the stream with an error event, as a whole answer
// larger than the server's 32 MiB bound fails (no provider's output comes
// near it: an endless stream is what reaches it).
const MaxKeptBytes = 32 << 20

// ErrTruncated is returned by Close when the provider's stream ended before
// its last event.
var ErrTruncated = errors.New("convert: provider stream ended early")

var streams = sync.Pool{New: func() any { return new(Stream) }}

// AcquireStream returns a Stream for a response to the request info
// describes (info.Provider's stream in, info.Client's out). Release it with
// ReleaseStream.
func AcquireStream(info RequestInfo) *Stream {
	s := streams.Get().(*Stream)
	s.Reset(info)
	return s
}

// ReleaseStream returns s to the pool; s must not be used afterwards.
func ReleaseStream(s *Stream) {
	// Drop references to the last bytes fed.
	s.chunk.Reset()
	s.an.Reset()
	s.gm.Reset()
	s.bd.Reset()
	s.rs.Reset()
	s.ev = event{}
	s.mk.release()
	streams.Put(s)
}

// NewStream is AcquireStream without the pool.
func NewStream(info RequestInfo) *Stream {
	s := new(Stream)
	s.Reset(info)
	return s
}

// Reset prepares s for a new response, keeping its buffers.
func (s *Stream) Reset(info RequestInfo) {
	s.info = info
	s.model = append(s.model[:0], info.Model...)
	s.info.Model = ""
	s.pass = info.Client == info.Provider
	s.mk.reset(info.Mask, s.pass)
	// A masked same-format stream is written event by event, and drops the
	// usage chunk there (chatPass).
	s.strip = s.pass && info.Client == Chat && !info.IncludeUsage && !s.mk.pass
	s.sse.reset(MaxEventBytes)
	// A stream sent as it came, or event by event, passes an event too
	// large to hold on unread (bigevent.go); a masked or tapped one must
	// read every event, and fails instead.
	s.sse.skipBig = s.pass && !s.mk.pass
	s.es.Reset()
	s.es.Max = MaxEventBytes
	s.err, s.blind, s.complete = nil, false, false
	s.respModel = s.respModel[:0]
	s.rd.reset()
	s.usage = Usage{}
	s.deltas, s.deltaBytes = 0, 0
	s.failed, s.failMsg = StreamFailure{}, s.failMsg[:0]
	s.held = s.held[:0]
	s.kept, s.keptMax, s.heldKept, s.overKept = 0, MaxKeptBytes, 0, false
	s.scratch = s.scratch[:0]
	s.chatW.reset()
	s.anW.reset()
	s.rsW.reset()
	s.resetTap()
	if s.mk.pass && info.Client != Chat && info.Client != Messages && info.Client != Responses {
		// Fail closed: the provider's bytes would reach the client unmasked.
		s.err = errMaskFormat(info.Client)
	}
}

// Usage is the usage the provider reported so far (all of it once the
// stream ended).
func (s *Stream) Usage() Usage { return s.usage }

// OutputEstimate estimates the output tokens of the answer streamed so far,
// for a stream cut before the provider reported them (most report usage
// last): a token for each text, reasoning or argument delta (providers
// send about one a token), or for each four bytes of their text, whichever
// is more. A delta too large to read counts as one; bytes passed on
// unread (a same-format stream after an event it could not read) count
// for nothing: their events' JSON and whatever else they carry (images in
// base64) are no measure of the answer's tokens.
func (s *Stream) OutputEstimate() int64 { return max(s.deltas, (s.deltaBytes+3)/4) }

// Answered reports whether the answer has begun: a text, reasoning or
// argument delta was read. A stream that fails before that has given the
// client no part of an answer, so another provider may be asked instead.
func (s *Stream) Answered() bool { return s.deltas > 0 }

// Model is the model the provider's stream says answered (OpenAI's and
// Anthropic's model, Gemini's modelVersion, the Responses API's
// response.model: the first it names), or nil when it named none (Bedrock
// never does) or one longer than MaxModelBytes. It is valid until the
// Stream is reset or released.
func (s *Stream) Model() []byte {
	if len(s.respModel) == 0 {
		return nil
	}
	return s.respModel
}

// noteModel keeps the first model the provider's stream names (Model).
func (s *Stream) noteModel(model string) {
	if len(s.respModel) == 0 && model != "" && len(model) <= MaxModelBytes {
		s.respModel = append(s.respModel, model...)
	}
}

// Ended reports whether the client's stream has ended whole: its last
// event ([DONE], message_stop, response.completed; passed through, the
// provider's) is in what Feed or Close returned, and no error came before
// it. The provider's body may still have bytes to come (the end of its
// framing), which the client needs no more.
func (s *Stream) Ended() bool {
	return s.complete && s.err == nil && s.failed.Status == 0
}

// StreamFailure is the provider's own error event that ended a stream:
// its status (derived from its type where it carries none), its type name
// in the provider's format, and its message.
type StreamFailure struct {
	Status  int
	Type    string
	Message []byte // valid until the Stream is reset or released
	// Retryable marks a failure the provider documents as worth trying
	// again although its status is a 4xx (Bedrock's
	// modelStreamErrorException, 424): another provider may answer.
	Retryable bool
}

// ProviderFailure returns the error event the provider's stream ended
// with, in every mode (a same-format stream passes it on as it came).
func (s *Stream) ProviderFailure() (StreamFailure, bool) {
	return s.failed, s.failed.Status != 0
}

// Err is the failure as the error a translated stream's Feed returns for
// it.
func (f StreamFailure) Err() error {
	return &Error{Status: f.Status, Message: string(f.Message)}
}

// keep reports whether n more bytes of the answer may be kept (MaxKeptBytes),
// and counts them when they may.
func (s *Stream) keep(n int) bool {
	if s.kept+int64(n) > s.keptMax {
		return false
	}
	s.kept += int64(n)
	return true
}

// keptTooMuch fails the stream whose answer is more than it may keep (a
// masker's tail written on the way out is dropped).
func (s *Stream) keptTooMuch(dst []byte) []byte {
	if s.overKept {
		return dst
	}
	s.overKept = true
	dst, _ = s.fail(dst, 502, "api_error", errKeptTooMuch)
	return dst
}

const errKeptTooMuch = "the answer is larger than the 32 MiB the gateway keeps of a streamed answer"

// countDelta counts a delta's string token for OutputEstimate.
func (s *Stream) countDelta(tok llm.Raw) {
	s.deltas++
	s.deltaBytes += int64(len(tok) - 2)
}

// ContentType is the Content-Type of the client's stream.
func (s *Stream) ContentType() string { return StreamContentType(s.info.Client) }

// Feed translates p, the next bytes of the provider's stream, appending
// what the client is to receive to dst (possibly nothing). An error ends
// the stream: dst then holds the client-format error event to send last,
// and later calls return the same error.
func (s *Stream) Feed(dst, p []byte) ([]byte, error) {
	if s.err != nil {
		return dst, s.err
	}
	if s.blind {
		return append(dst, p...), nil
	}
	if s.info.Provider == Bedrock {
		if s.pass {
			dst = append(dst, p...)
		}
		_, _ = s.es.Write(p)
		for {
			m, ok, err := s.es.Next()
			if err != nil {
				return s.fail(dst, 502, "api_error", "invalid event stream from provider: "+err.Error())
			}
			if !ok {
				return dst, s.err
			}
			dst = s.bedrockMessage(dst, &m)
			if s.err != nil {
				return dst, s.err
			}
			if s.tap.on {
				s.tapBedrock(&m)
			}
		}
	}
	raw := s.pass && !s.strip && !s.mk.pass && !s.tap.on
	if raw {
		dst = append(dst, p...)
	}
	for len(p) > 0 {
		skipping := s.sse.big.on
		ev, rest, ok, err := s.sse.next(p)
		if err != nil {
			return s.fail(dst, 502, "api_error", "invalid event stream from provider: "+err.Error())
		}
		if skipping && s.strip {
			// An event too large to hold goes out as it comes.
			dst = append(dst, p[:len(p)-len(rest)]...)
		}
		if !ok {
			break
		}
		p = rest
		if ev.begun {
			if s.strip {
				dst = s.sse.prefix(dst)
			}
			continue
		}
		if ev.big {
			if s.strip && s.sse.skipLF {
				// Its blank line ended with a CR: the LF that may follow
				// is skipped as part of it (a CRLF is one line end, as
				// is a CR), so it goes out now.
				dst = append(dst, '\n')
			}
			dst = s.bigEvent(dst, ev.typ)
			if s.err != nil {
				return dst, s.err
			}
			continue
		}
		if ev.comment {
			// A provider's keep-alive reaches the client in any format:
			// a comment is one in every SSE stream (a client behind an
			// idle timeout stays connected while the model thinks).
			if !raw {
				dst = append(append(dst, ev.data...), "\n\n"...)
			}
			continue
		}
		s.rd.bigLast = false
		dst = s.sseEvent(dst, ev)
		if s.err != nil {
			return dst, s.err
		}
		if s.tap.on {
			dst = s.tapEvent(dst, ev)
		}
		if s.blind {
			if s.strip {
				dst = append(dst, p...)
			}
			return dst, nil
		}
	}
	return dst, nil
}

func (s *Stream) sseEvent(dst []byte, ev sseEvent) []byte {
	if s.mk.pass {
		return s.maskedPassEvent(dst, ev)
	}
	switch s.info.Provider {
	case Chat:
		return s.chatEvent(dst, ev.data)
	case Messages:
		return s.anthropicEvent(dst, ev.data)
	case Gemini:
		return s.geminiEvent(dst, ev.data)
	case Responses:
		return s.responsesEvent(dst, ev.data)
	}
	dst, _ = s.fail(dst, 500, "api_error", "no stream translation from "+s.info.Provider.String())
	return dst
}

// Close ends the provider's stream, appending the client's last events.
// It returns ErrTruncated (with an error event in dst) when the provider
// stopped before its last event.
func (s *Stream) Close(dst []byte) ([]byte, error) {
	if s.err != nil {
		return dst, s.err
	}
	if s.rd.ended {
		return dst, nil
	}
	cut := s.sse.pending() || s.es.Pending()
	if s.sse.pending() && !s.blind {
		// The stream ended inside an event: no blank line after it, or not
		// even the end of its line. The SSE spec drops such an event, but
		// a provider that sends its end marker ([DONE]) or its last event
		// whole and stops without that blank line has sent its answer
		// whole: an event whose data is whole is taken, and counts when it
		// ends the stream (or stops it: below). One cut inside its data
		// is no event, and the stream is cut.
		var ok bool
		dst, ok = s.lastEvent(dst)
		if s.err != nil {
			return dst, s.err
		}
		cut = !ok || s.blind
		if s.rd.ended && !cut {
			return dst, nil
		}
	}
	if (s.rd.stopped || s.rd.bigLast) && !cut {
		// Gemini's stream has no last event: a finish reason and the end
		// of the body are its end. Others may end without their marker.
		// A last event too large to read may have held the finish
		// reason: the stream ended as it would have (the client has its
		// bytes).
		dst = s.passFlushAll(dst)
		dst = s.end(dst)
		return dst, nil
	}
	if s.pass && !s.mk.pass && !s.tap.on {
		// Passed through, the stream is cut as the provider's was: no
		// event of ours ends it (the server cuts the client's body).
		s.blind, s.rd.ended = true, true
	} else {
		dst, _ = s.fail(dst, 502, "api_error", "provider stream ended early")
	}
	s.err = ErrTruncated
	return dst, ErrTruncated
}

// lastEvent reads the event the provider's stream ended inside
// (sseFramer.last) when its data is whole, [DONE] or a JSON value, as Feed
// reads an event, and reports whether it did. The client given the
// provider's bytes as they are gets the blank line that ends it.
func (s *Stream) lastEvent(dst []byte) ([]byte, bool) {
	ev, ok := s.sse.last()
	if ok && ev.big {
		// Passed on unread: its bytes went out as they came.
		dst = append(dst, "\n\n"...)
		return s.bigEvent(dst, ev.typ), true
	}
	if !ok || !(string(ev.data) == "[DONE]" || llm.Valid(ev.data)) {
		return dst, false
	}
	if s.pass && !s.strip && !s.mk.pass && !s.tap.on {
		// Feed sent its bytes as they came (raw): "\n\n" ends its line
		// if that is open, and the event (after a CR, the first LF only
		// completes the CRLF; after a whole line, the second is a blank
		// line more, which ends nothing).
		dst = append(dst, "\n\n"...)
	}
	dst = s.sseEvent(dst, ev)
	if s.err == nil && s.tap.on {
		dst = s.tapEvent(dst, ev)
	}
	return dst, true
}

// fail ends the stream with an error event for the client.
func (s *Stream) fail(dst []byte, status int, typ, msg string) ([]byte, error) {
	if s.err != nil {
		return dst, s.err
	}
	if s.pass && !s.strip && !s.mk.pass && !s.tap.on {
		// The client gets the provider's bytes as they are; only the usage
		// is lost. (Not when tapped: the text would go uncollected; nor
		// when the usage chunk is stripped: the stream is written event by
		// event, and the failed event's start is gone.)
		s.blind, s.rd.ended = true, true
		return dst, nil
	}
	// What a masker held back goes out (masked) before the error. A masked
	// same-format stream never falls back to the provider's bytes, whose
	// text would reach the client unmasked: it ends as a translated one.
	dst = s.flushText(dst)
	dst = s.passFlushAll(dst)
	s.ev = event{kind: evError, status: status, errType: typ, errMsg: bytesOf(msg)}
	if s.pass {
		s.rd.ended = true
		s.mk.numberOurs(&s.rsW)
		dst = s.write(dst, &s.ev)
	} else {
		dst = s.emit(dst)
	}
	if s.err == nil {
		s.err = errors.New("convert: " + msg)
	}
	return dst, s.err
}

// Reader returns an io.Reader of the client's stream translated from
// provider (the provider's body): for servers that copy bodies from
// readers. The Stream must not be fed otherwise meanwhile.
func (s *Stream) Reader(provider io.Reader) io.Reader {
	return &streamReader{s: s, r: provider, in: make([]byte, 16<<10)}
}

type streamReader struct {
	s       *Stream
	r       io.Reader
	in, out []byte
	off     int
	done    bool
	err     error
}

func (sr *streamReader) Read(p []byte) (int, error) {
	for sr.off == len(sr.out) {
		if sr.done {
			return 0, sr.err
		}
		sr.out, sr.off = sr.out[:0], 0
		n, err := sr.r.Read(sr.in)
		if n > 0 {
			var ferr error
			sr.out, ferr = sr.s.Feed(sr.out, sr.in[:n])
			if ferr != nil {
				sr.done, sr.err = true, ferr
				continue
			}
		}
		if err == io.EOF {
			var cerr error
			sr.out, cerr = sr.s.Close(sr.out)
			sr.done, sr.err = true, io.EOF
			if cerr != nil {
				sr.err = cerr
			}
		} else if err != nil {
			sr.done, sr.err = true, err
		}
	}
	n := copy(p, sr.out[sr.off:])
	sr.off += n
	return n, nil
}
