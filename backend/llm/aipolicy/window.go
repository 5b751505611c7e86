package aipolicy

import (
	"errors"
	"unicode/utf8"

	"github.com/relaygate/gateway/backend/llm/guardrail"
)

// Guarding a streamed answer with the remote response guards
// (promptGuard.streaming: Enabled), as agentgateway does
// (llm/policy/streaming_guardrails.rs): the server holds the answer's
// events back while their text gathers in a StreamWindow; once
// StreamWindowText bytes are pending (or the answer ended), every remote
// response guard judges one window, the last StreamWindowOverlap bytes
// already judged followed by the pending text, so that words across the
// cut are seen whole by one window. A window that passes lets its events
// go; one that is rejected ends the stream with the rejection's body. Text
// sent after earlier windows passed cannot be taken back.
//
// Failures follow agentgateway's streaming path: a webhook follows its
// failureMode, every other guard's failure lets the window pass. A webhook
// failing closed rejects with the guard's rejection, as on whole answers
// (agentgateway's streams send a fixed "Content blocked by guardrail
// policy" instead). A mask cannot rewrite text already
// framed in events, so a guard's mask passes the window unchanged
// (agentgateway too); the regex response guard masks streams before the
// windows see the text (convert).

// The window sizes (agentgateway's DEFAULT_EVAL_THRESHOLD and
// OVERLAP_BYTES).
const (
	// StreamWindowText is the pending text that makes a window.
	StreamWindowText = 1024
	// StreamWindowOverlap bounds the text already judged that starts the
	// next window (cut on a UTF-8 boundary).
	StreamWindowOverlap = 256
)

// StreamWindow is the text of a streamed answer between windows: the
// pending text and the overlap the next window starts with. The zero value
// is ready; Reset keeps the buffers.
type StreamWindow struct {
	overlap []byte
	pending []byte
	window  []byte
}

// Add appends text to the pending text.
func (w *StreamWindow) Add(text []byte) { w.pending = append(w.pending, text...) }

// Pending is the length of the text not judged yet.
func (w *StreamWindow) Pending() int { return len(w.pending) }

// Next returns the next window to judge (the overlap, then the pending
// text) and makes its last StreamWindowOverlap bytes the next overlap. The
// window is valid until the next call.
func (w *StreamWindow) Next() []byte {
	w.window = append(append(w.window[:0], w.overlap...), w.pending...)
	w.pending = w.pending[:0]
	w.overlap = append(w.overlap[:0], utf8Tail(w.window, StreamWindowOverlap)...)
	return w.window
}

// Reset forgets the text.
func (w *StreamWindow) Reset() {
	w.overlap, w.pending, w.window = w.overlap[:0], w.pending[:0], w.window[:0]
}

// utf8Tail is the last max bytes of b or fewer, starting on a rune's
// first byte.
func utf8Tail(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	start := len(b) - max
	for start < len(b) && !utf8.RuneStart(b[start]) {
		start++
	}
	return b[start:]
}

// WindowVerdict is what the remote response guards made of one window.
type WindowVerdict struct {
	// Rejection, when set, ends the stream: a guard rejected the window,
	// or a webhook failed closed. Its Body is the error event's message.
	Rejection *Rejection
	// Guard is the kind of the guard that rejected.
	Guard string
	// FailedOpen are the failures that let the window pass (a webhook's
	// failOpen, any other guard's error), for the log.
	FailedOpen []error
	// MaskPassed names a guard that answered with a mask, which a stream
	// cannot take: the window passed as it was.
	MaskPassed string
}

// ResponseWindow runs the remote response guards in order on window, one
// window of a streamed answer, as one assistant message. remote gives the
// calls their context and the exchange's input (nil: none). An empty
// window passes without a call.
func (p *Policy) ResponseWindow(window []byte, remote *RemoteInput) WindowVerdict {
	var v WindowVerdict
	if len(window) == 0 {
		return v
	}
	if remote == nil {
		remote = &RemoteInput{}
	}
	msgs := []guardrail.Message{{Role: "assistant", Content: string(window)}}
	for _, g := range p.remoteResponse {
		gv, err := g.Check(remote.ctx(), msgs, &remote.Input)
		switch {
		case err != nil:
			v.FailedOpen = append(v.FailedOpen, err)
		case gv.Action == guardrail.Reject:
			v.Rejection, v.Guard = &Rejection{remote: gv.Rejection}, g.Kind()
			return v
		case gv.Failed:
			v.FailedOpen = append(v.FailedOpen, errors.New(gv.Reason))
		case gv.Action == guardrail.Mask:
			v.MaskPassed = g.Kind()
		}
	}
	return v
}

// Body is the body of the answer the rejection writes.
func (r *Rejection) Body() []byte {
	if r.remote != nil {
		return r.remote.Body
	}
	return r.body
}
