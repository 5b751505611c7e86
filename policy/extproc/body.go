package extproc

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/relaygate/gateway/policy"
)

// pumpChunk is the most one body message carries when streaming.
const pumpChunk = 32 << 10

// pump streams a body to the service (full-duplex mode), one message per
// read, while the phase waits for the service's answers. Until the body's
// first processed bytes go on, it keeps what it sent (up to the buffer
// limit), so that a service failing early (on the headers, or on the body
// before any of it went on) can be failed open with the body whole.
type pump struct {
	s        *session
	src      io.Reader
	response bool
	length   int // the body's declared length, -1 unknown
	attrs    map[string]*structpb.Struct
	// interrupt makes a read of src blocked on the client return (a
	// request's pump: the client connection's read deadline); nil when
	// there is nothing to interrupt.
	interrupt func()

	done chan struct{} // closed when run returns
	fail chan struct{} // closed when src failed; err says how
	err  error
	eof  bool
	quit atomic.Bool
	// cut: a request's pump was halted because the body stopped going
	// upstream before its end (finished is false).
	cut atomic.Bool
	// read: a read of src returned its end; the pump reads no more of it.
	read atomic.Bool

	mu       sync.Mutex
	tee      []byte
	teeMax   int
	overflow bool // tee dropped: more than teeMax, or no longer needed

	// A gated pump's source writes the request's header with the read
	// that ends it (EndWritesHeader): fasthttp's decoder of a chunked body
	// reads the trailer section into it. The request's goroutine lends
	// the header to the pump while it does not use it (lend), and takes it
	// back before it does (reclaim): the pump starts a read only while the
	// header is lent, and taking it back waits for a read in progress.
	gated   bool
	lease   sync.Mutex
	leased  sync.Cond // signalled when lent, reading or quit change
	lent    bool
	reading bool
}

// EndWritesHeader is a request body stream that tells whether the read
// that ends it writes the request's header h (the server's guard of the
// client's body: fasthttp reads a chunked body's trailer section into h,
// an HTTP/2 stream's trailer fields join h). A request's pump reads a
// stream that does only while the request's goroutine leaves h alone, and
// takes a stream that does not say for one that does.
type EndWritesHeader interface {
	EndWritesHeader(h *fasthttp.RequestHeader) bool
}

// writesHeader reports whether reading src to its end may write the
// request's header h.
func writesHeader(src io.Reader, h *fasthttp.RequestHeader) bool {
	switch r := src.(type) {
	case *bytes.Reader:
		return false
	case *duplexBody:
		// Another policy's processed body: it reads the client's through
		// its own pump.
		return r.pm.gated
	case EndWritesHeader:
		return r.EndWritesHeader(h)
	}
	return true
}

// newPump is a pump of src; start runs it.
func newPump(s *session, src io.Reader, response bool, length, max int, attrs map[string]*structpb.Struct) *pump {
	p := &pump{s: s, src: src, response: response, length: length, attrs: attrs, teeMax: max,
		done: make(chan struct{}), fail: make(chan struct{})}
	p.leased.L = &p.lease
	return p
}

func (p *pump) start() { go p.run() }

func startPump(s *session, src io.Reader, response bool, length, max int, attrs map[string]*structpb.Struct) *pump {
	p := newPump(s, src, response, length, max, attrs)
	p.start()
	return p
}

// lend lets a gated pump read its source: the request's goroutine leaves
// the header alone until it reclaims it.
func (p *pump) lend() {
	if p == nil || !p.gated {
		return
	}
	p.lease.Lock()
	p.lent = true
	p.leased.Broadcast()
	p.lease.Unlock()
}

// reclaim takes the request's header back from a gated pump: no read
// starts from now on, and one in progress (which may be the last, writing
// the trailer fields into the header) has returned when reclaim does. That
// read waits for the client; the body's read deadline bounds it.
func (p *pump) reclaim() {
	if p == nil || !p.gated {
		return
	}
	p.lease.Lock()
	p.lent = false
	for p.reading {
		p.leased.Wait()
	}
	p.lease.Unlock()
}

// acquire waits until a gated pump may read its source; false when it is
// to stop instead.
func (p *pump) acquire() bool {
	if !p.gated {
		return true
	}
	p.lease.Lock()
	for !p.lent && !p.quit.Load() {
		p.leased.Wait()
	}
	p.reading = !p.quit.Load()
	p.lease.Unlock()
	return p.reading
}

// release ends a read acquire allowed.
func (p *pump) release() {
	if !p.gated {
		return
	}
	p.lease.Lock()
	p.reading = false
	p.leased.Broadcast()
	p.lease.Unlock()
}

// finished reports whether the pump is done with a body that went all the
// way: it read and sent it to its end, or its own or the service's failure
// ended it. A pump cut short (the exchange stopped taking the body) is
// not.
func (p *pump) finished() bool {
	select {
	case <-p.done:
		return !p.cut.Load()
	default:
		return false
	}
}

// stopped is closed when the body's source failed (nil for no pump).
func (p *pump) stopped() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.fail
}

func (p *pump) run() {
	defer close(p.done)
	buf := make([]byte, pumpChunk)
	for {
		if !p.acquire() {
			return
		}
		n, err := p.src.Read(buf)
		if err == io.EOF {
			p.read.Store(true)
		}
		p.release()
		if n > 0 {
			p.mu.Lock()
			if !p.overflow {
				if len(p.tee)+n <= p.teeMax {
					p.tee = append(p.tee, buf[:n]...)
				} else {
					p.overflow, p.tee = true, nil
				}
			}
			p.mu.Unlock()
		}
		if err != nil && err != io.EOF {
			p.err = err
			close(p.fail)
			return
		}
		if p.quit.Load() {
			p.eof = err == io.EOF
			return
		}
		if n == 0 && err == nil {
			continue
		}
		eos := err == io.EOF
		body := &procv3.HttpBody{Body: buf[:n], EndOfStream: eos}
		m := &procv3.ProcessingRequest{Attributes: p.attrs}
		p.attrs = nil
		if p.response {
			m.Request = &procv3.ProcessingRequest_ResponseBody{ResponseBody: body}
		} else {
			m.Request = &procv3.ProcessingRequest_RequestBody{RequestBody: body}
		}
		// Send encodes the message before it returns, so buf is free again.
		if p.s.sendChunk(m) != nil {
			p.eof = eos
			return
		}
		if eos {
			p.eof = true
			return
		}
	}
}

// stop makes the pump stop after its current read (a gated pump waiting
// for the header stops at once).
func (p *pump) stop() {
	p.quit.Store(true)
	if p.gated {
		p.lease.Lock()
		p.leased.Broadcast()
		p.lease.Unlock()
	}
}

// halt stops the pump now, interrupting a read it is blocked in, and waits
// for it: what it shares with the request (the server's count of the
// client's body, its error) is settled once halt returns. A request whose
// body was cut short this way must not keep its connection: nor one whose
// pump had stopped short of the body's end already (its send failed, or
// it was stopped), which the interrupt says too. A pump that has read its
// source to the end (and may still be sending the last of it) is not
// interrupted: the body is whole, and the connection stays.
func (p *pump) halt() {
	p.stop()
	select {
	case <-p.done:
		if p.interrupt != nil && !p.read.Load() && p.err == nil {
			p.interrupt()
		}
		return
	default:
	}
	if p.interrupt != nil && !p.read.Load() {
		p.interrupt()
	}
	<-p.done
}

// dropTee ends the keeping of what was sent: the body has begun to go on
// processed, so it can no longer go on unprocessed.
func (p *pump) dropTee() {
	p.mu.Lock()
	p.overflow, p.tee = true, nil
	p.mu.Unlock()
}

// unsent stops the pump (its session ended) and returns the whole body
// again: what it sent and what it had not read yet. ok is false when that
// cannot be done (more was sent than kept, or the source failed).
func (p *pump) unsent() (r io.Reader, whole []byte, ok bool) {
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overflow || p.err != nil {
		return nil, nil, false
	}
	if p.eof {
		return nil, p.tee, true
	}
	return io.MultiReader(bytes.NewReader(p.tee), p.src), nil, true
}

// replay puts the request's body back whole after a failure; false when it
// cannot.
func (p *pump) replay(req *fasthttp.Request) bool {
	r, whole, ok := p.unsent()
	switch {
	case !ok:
		return false
	case r == nil:
		req.SetBody(whole)
	default:
		req.SetBodyStream(r, p.length)
	}
	return true
}

// replayResponse puts the response's body back whole after a failure;
// false when it cannot (the body is then closed).
func (p *pump) replayResponse(resp *fasthttp.Response) bool {
	r, whole, ok := p.unsent()
	switch {
	case !ok:
		closeReader(p.src)
		return false
	case r == nil:
		resp.SetBody(whole)
		closeReader(p.src)
	default:
		resp.SetBodyStream(&joined{Reader: r, src: p.src}, p.length)
	}
	return true
}

// joined is a body put back together in front of the stream it came from,
// which closing it closes; the stream's kind stays visible (Unwrap) so the
// server can observe its end.
type joined struct {
	io.Reader
	src io.Reader
}

func (j *joined) Close() error      { closeReader(j.src); return nil }
func (j *joined) Unwrap() io.Reader { return j.src }

// duplexBody is the body that goes on in full-duplex mode: what the service
// answers, chunk by chunk, for the body the pump streams to it. A service
// that fails before any processed byte went on, under failOpen, leaves the
// body to go on whole and unprocessed (raw), as Envoy's
// failure_mode_allow; after, the body fails with a policy.BodyFailure, the
// service's failure, whatever the mode.
type duplexBody struct {
	s       *session
	ch      chan *procv3.ProcessingResponse
	pm      *pump
	pending []byte
	eos     bool
	err     error
	closed  bool
	// went: processed bytes went on, so the body can no longer go on
	// unprocessed.
	went bool
	// raw is the unprocessed body, read on from here once failed open.
	raw io.Reader
	// sending: WriteTo is sending the body on, and holds the request's
	// header for the pump until the body ends.
	sending bool
	// A response's body tells the request's record how it ended
	// (policy.ObservedBody): n bytes given, done when read to its end.
	// obs is told once (told), through the stream the body wraps when
	// that one is observed, else by Close.
	n    int
	done bool
	obs  policy.StreamObserver
	told bool
}

// newDuplexBody is the body that goes on for pm's. A response's holds a
// reference to the session until it is closed; a request's needs none: the
// request's own reference outlives its body.
func newDuplexBody(s *session, ch chan *procv3.ProcessingResponse, pm *pump) *duplexBody {
	if pm.response {
		s.hold()
	}
	if !s.p.failOpen {
		pm.dropTee() // nothing will go on unprocessed
	}
	return &duplexBody{s: s, ch: ch, pm: pm}
}

// take queues the body chunk an answer to the headers message carried.
func (d *duplexBody) take(m *procv3.BodyMutation) {
	if sr := m.GetStreamedResponse(); sr != nil {
		d.pending = append(d.pending, sr.GetBody()...)
		d.eos = sr.GetEndOfStream()
	}
}

func (d *duplexBody) Read(p []byte) (int, error) {
	if err := d.fill(); err != nil {
		if d.raw != nil {
			n, err := d.raw.Read(p)
			d.n += n
			d.done = err == io.EOF
			return n, err
		}
		d.done = err == io.EOF
		return 0, err
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	d.n += n
	d.goneOn()
	return n, nil
}

// goneOn notes that processed bytes went on: what the pump kept to fail
// open with is let go.
func (d *duplexBody) goneOn() {
	if !d.went {
		d.went = true
		d.pm.dropTee()
	}
}

// WriteTo sends the body on to w. fasthttp writes a request's chunked body
// with it (SupportsBodyWriteTo), and uses nothing of the request until it
// returns: the pump may read the client's body all along while the
// service's answers go on as they come, as in Read with the header lent
// for good. The body's end, a failure, or a write error halts a request's
// pump before WriteTo returns, which orders its last read (and the trailer
// fields it read into the header) before what the caller does next:
// fasthttp writes the trailer section.
func (d *duplexBody) WriteTo(w io.Writer) (int64, error) {
	if !d.pm.response && !d.sending {
		d.sending = true
		d.pm.lend()
	}
	var n int64
	for {
		if err := d.fill(); err != nil {
			if d.raw != nil {
				m, err := io.Copy(w, d.raw)
				return n + m, err
			}
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		m, err := w.Write(d.pending)
		n += int64(m)
		d.pending = d.pending[m:]
		if m > 0 {
			d.goneOn()
		}
		if err != nil {
			if !d.pm.response {
				// The body will not go on: the pump ends now, its read in
				// progress interrupted, as when the exchange ends first.
				d.pm.cut.Store(true)
				d.pm.halt()
			}
			return n, err
		}
	}
}

// SupportsBodyWriteTo has fasthttp send a request's body with WriteTo
// (fasthttp.BodyWriterTo).
func (d *duplexBody) SupportsBodyWriteTo() bool { return !d.pm.response }

// fill makes pending hold the body's next bytes: io.EOF at the body's end,
// or the error that ended it (then raw, when set, is the body to read on).
func (d *duplexBody) fill() error {
	if d.raw != nil {
		return errFailedOpen
	}
	for len(d.pending) == 0 {
		if d.eos {
			if !d.pm.response {
				// A request's pump is done once the service has the body's
				// end (or is stopped, if the service ended the body first):
				// halting it orders its last read of the client's body
				// before whoever reads on.
				d.pm.halt()
			}
			return io.EOF
		}
		if d.err != nil {
			return d.err
		}
		if d.raw != nil {
			return errFailedOpen
		}
		ans, err := d.await()
		if err != nil {
			d.fail(err)
			continue
		}
		var cr *procv3.CommonResponse
		switch r := ans.Response.(type) {
		case *procv3.ProcessingResponse_RequestBody:
			if d.pm.response {
				d.fail(errOutOfOrder("response body"))
				continue
			}
			cr = r.RequestBody.GetResponse()
		case *procv3.ProcessingResponse_ResponseBody:
			if !d.pm.response {
				d.fail(errOutOfOrder("request body"))
				continue
			}
			cr = r.ResponseBody.GetResponse()
		default:
			d.fail(errOutOfOrder("body"))
			continue
		}
		if cr.GetBodyMutation().GetMutation() == nil {
			d.fail(errNotStreamed)
			continue
		}
		d.pending, d.eos = streamedChunk(cr.GetBodyMutation())
	}
	return nil
}

// errNotStreamed is an answer to a full-duplex body chunk that does not
// say what goes on (a plain CONTINUE). The answers to chunks are not one
// per chunk (a service may hold chunks and answer several in one, or one
// in several), so no chunk can be told to go on unchanged: the body fails
// by the failure mode, as Envoy refuses such an answer ("spurious
// message"), rather than end where it stands as agentgateway's reading of
// it did, which cut the body short without a word.
var errNotStreamed = &errService{"the external processing service answered a full-duplex body chunk without a streamed_response (a body mutation is needed to say what goes on)"}

// streamedChunk is what an answer's body mutation makes of a full-duplex
// body: the bytes to send on, and whether the answer ends the body.
// session.answered reads it too, to know when the service's answers on a
// body end.
func streamedChunk(m *procv3.BodyMutation) (chunk []byte, eos bool) {
	switch x := m.GetMutation().(type) {
	case *procv3.BodyMutation_StreamedResponse:
		return x.StreamedResponse.GetBody(), x.StreamedResponse.GetEndOfStream()
	case *procv3.BodyMutation_Body:
		// A chunk replaced whole (streamed mode's way).
		return x.Body, false
	case *procv3.BodyMutation_ClearBody:
		// This chunk is dropped.
		return nil, false
	}
	// No mutation: not the body's end (fill fails the body at it:
	// errNotStreamed).
	return nil, false
}

// await waits for the service's next answer on the body. Read's caller
// may use the request's header between reads (a policy reading the body
// whole, which may stop short of its end), so a gated pump reads the
// client's body only while Read waits: an answer already there is taken
// without lending it the header; else the header is lent for the wait and
// taken back after, once a read in progress has returned.
func (d *duplexBody) await() (*procv3.ProcessingResponse, error) {
	if !d.pm.gated || d.sending {
		return d.s.wait(d.ch, d.pm.fail)
	}
	if err := d.s.brokenOutOfTurn(); err != nil {
		return nil, err
	}
	select {
	case <-d.s.imm:
	default:
		select {
		case m := <-d.ch:
			return m, nil
		default:
		}
	}
	d.pm.lend()
	ans, err := d.s.wait(d.ch, d.pm.fail)
	d.pm.reclaim()
	return ans, err
}

// errFailedOpen is fill's word that the body goes on unprocessed (raw).
var errFailedOpen = errors.New("extProc failed open")

// fail ends the body with err: for a failure of the body's own source its
// error (so a client's broken body stays the client's fault), else the
// service's, a policy.BodyFailure answered as the request phase answers
// it. Under failOpen, a service's failure before any processed byte went
// on lets the body go on unprocessed instead, when the pump kept all it
// sent; not an immediate response, which is the service's answer, not its
// failure: its BodyFailure answers with it (immediateFailure).
func (d *duplexBody) fail(err error) {
	if err == errPumpStopped {
		err = d.pm.err
	} else {
		d.s.failed(err)
		var pf *policy.BodyFailure
		if err == errImmediate {
			pf = immediateFailure(d.s.immediate)
		} else if d.s.p.failOpen && !d.went {
			// The stream ends first: the pump may be blocked sending to
			// the service.
			d.s.end()
			if d.failOpen() {
				d.s.p.warnBodyFailed("extProc: the external processing service failed on a body before any of it went on; the body goes on unprocessed (failureMode failOpen)",
					d.pm.response, err)
				if !d.pm.response {
					d.s.skipResp = true
				}
				return
			}
		}
		if pf == nil {
			pf = &policy.BodyFailure{Kind: policy.KindExtProc, Status: http.StatusInternalServerError, Body: bodyFailed, Err: err}
		}
		err = pf
	}
	d.s.p.warnBodyFailed("extProc: a body being processed failed", d.pm.response, err)
	d.err = err
	d.s.end()
	if !d.pm.response {
		// The request fails with err (the server answers for it); its
		// response has no stream to be processed on.
		d.s.skipResp = true
		d.pm.halt()
	}
}

// errAnsweredWhileStreaming is the failure of a body the service answered
// the request itself in the middle of (its immediate response).
var errAnsweredWhileStreaming = &errService{"the external processing service answered the request itself (an immediate response) while a body was streaming"}

// immediateFailure is the failure of a body the service answered with an
// immediate response in the middle of: whoever answers it (the exchange
// that read a request's body, the response phase before a response's head
// went out: nothing reached the client yet) answers the client with ir,
// as the immediate response before the body would have been; a body
// already going out to the client is cut short with it.
func immediateFailure(ir *procv3.ImmediateResponse) *policy.BodyFailure {
	// respondImmediate's answer, made aside: the body's reader may run
	// while the request's response is not its to write (an HTTP/2
	// upstream's transport reading the request body).
	answer := &policy.Ctx{Fast: new(fasthttp.RequestCtx)}
	respondImmediate(answer, ir)
	made := &answer.Fast.Response
	return &policy.BodyFailure{Kind: policy.KindExtProc, Status: made.StatusCode(), Err: errAnsweredWhileStreaming,
		Answer: func(resp *fasthttp.Response) { made.CopyTo(resp) }}
}

// failOpen stops the pump and makes raw the body whole, unprocessed: what
// the pump sent, then what it had not read; false when it kept too little
// (more went to the service than maxBufferSize) or its source failed.
func (d *duplexBody) failOpen() bool {
	r, whole, ok := d.pm.unsent()
	switch {
	case !ok:
		return false
	case r == nil:
		d.raw = bytes.NewReader(whole)
	default:
		d.raw = r
	}
	d.pending = nil
	return true
}

// Close ends a response's body: the pump stops, the source is closed once
// the pump is done with it (then the request's record is told how the
// body ended, if the source did not tell it), and the session loses this
// reference. It does nothing for a request's (whose streams are
// re-wrapped, and closed, by the server on their way upstream).
func (d *duplexBody) Close() error {
	if d.closed || !d.pm.response {
		return nil
	}
	d.closed = true
	if !d.eos {
		d.s.end()
	}
	d.pm.stop()
	select {
	case <-d.pm.done:
		d.closeSource()
	default:
		go func() {
			<-d.pm.done
			d.closeSource()
		}()
	}
	return d.s.Close()
}

// closeSource closes the stream the response's body came from, which
// tells the request's record how the body ended when the record observes
// it (StreamClosed); else the body tells it now.
func (d *duplexBody) closeSource() {
	closeReader(d.pm.src)
	if d.obs != nil && !d.told {
		d.told = true
		d.obs.StreamClosed(d.n, d.outcome(nil))
	}
}

// Observe has the request's record o told how the response's body ended,
// once it is closed (policy.ObservedBody): the bytes it gave and its own
// failure, through the stream it wraps when the server observes that one
// (the observer it returns is the body itself), else by Close.
func (d *duplexBody) Observe(o policy.StreamObserver) policy.StreamObserver {
	d.obs = o
	return d
}

// StreamClosed is the stream the body wraps telling how it ended, which
// the body tells the request's record in its own words (outcome).
func (d *duplexBody) StreamClosed(_ int, err error) {
	if d.obs != nil && !d.told {
		d.told = true
		d.obs.StreamClosed(d.n, d.outcome(err))
	}
}

// outcome is how the response's body ended, given how the stream it came
// from did (src, nil when not known): the service's failure when that
// ended it; else nil when the body was read to its end (whatever was left
// of a source the service ended the body before); else src's failure, the
// body's own, or an abandoned body (the client went away).
func (d *duplexBody) outcome(src error) error {
	var pf *policy.BodyFailure
	switch {
	case errors.As(d.err, &pf):
		return d.err
	case d.done:
		return nil
	case src != nil:
		return src
	case d.err != nil:
		return d.err
	}
	return errBodyAbandoned
}

// errBodyAbandoned is outcome's error for a processed body closed before
// its end without a failure of its own (as backend.ErrStreamAbandoned is
// the exchange's; policies do not import backend).
var errBodyAbandoned = errors.New("processed body not read to its end: the client went away, or the response was replaced")

// streamResponse makes d the response's body once the service has
// answered its first bytes (or ended it, or the body failed open, or its
// source failed). Until then the response's head is held, so that a
// service failing first has the client get, as in the buffered modes, the
// failure mode's answer (500 external processing failed) or the service's
// own (its immediate response) instead of a head cut short; once the head
// has gone out, a failure can only cut the body short, as the request's
// record then says (Observe). The wait is the one the body's first read
// would have had (the service's timeout bounds it).
func (p *ExtProc) streamResponse(c *policy.Ctx, d *duplexBody) {
	resp := &c.Fast.Response
	var pf *policy.BodyFailure
	if err := d.fill(); errors.As(err, &pf) {
		// (fill logged the failure.)
		_ = d.Close()
		pf.Respond(resp)
		return
	}
	resp.Header.Del("Content-Length")
	resp.SetBodyStream(d, -1)
}

// Unwrap is the stream the body comes from (policy.Unwrapper), so that the
// server observes a response's upstream body through it.
func (d *duplexBody) Unwrap() io.Reader {
	if d.pm.response {
		return d.pm.src
	}
	return nil
}

// requestHasBody reports whether the request has a body, going by what the
// client declared.
func requestHasBody(req *fasthttp.Request) bool {
	if req.IsBodyStream() {
		return req.Header.ContentLength() != 0
	}
	return len(req.Body()) > 0
}

// requestBodyReader is the request's body as a stream.
func requestBodyReader(req *fasthttp.Request) io.Reader {
	if req.IsBodyStream() {
		return req.BodyStream()
	}
	return bytes.NewReader(bytes.Clone(req.Body()))
}

// responseHasBody reports whether the response to c's request carries a
// body.
func responseHasBody(c *policy.Ctx) bool {
	resp := &c.Fast.Response
	code := resp.StatusCode()
	if c.Fast.Request.Header.IsHead() || code < 200 || code == 204 || code == 304 {
		return false
	}
	if resp.IsBodyStream() {
		return resp.Header.ContentLength() != 0
	}
	return len(resp.Body()) > 0
}

// errTooLarge is a body larger than a buffered mode may read.
var errTooLarge = &errService{"the body is larger than maxBufferSize, which buffered external processing needs whole"}

// readBody reads a body for a buffered mode, from stream (or buffered when
// stream is nil): whole when it is at most max bytes; else, when partial,
// its first max bytes with rest the remainder (rest is nil when body is all
// of it). It fails with errTooLarge for a larger body (not partial), or
// with the source's error.
func readBody(buffered []byte, stream io.Reader, declared, max int, partial bool) (body []byte, rest io.Reader, err error) {
	if stream == nil {
		body = bytes.Clone(buffered)
		if len(body) <= max {
			return body, nil, nil
		}
		if !partial {
			return nil, nil, errTooLarge
		}
		return body[:max:max], bytes.NewReader(body[max:]), nil
	}
	if declared > max && !partial {
		return nil, nil, errTooLarge
	}
	buf, err := io.ReadAll(io.LimitReader(stream, int64(max)+1))
	if err != nil {
		return nil, nil, err
	}
	if len(buf) <= max {
		return buf, nil, nil
	}
	if !partial {
		return nil, nil, errTooLarge
	}
	return buf[:max:max], io.MultiReader(bytes.NewReader(buf[max:]), stream), nil
}

// setRequestBody makes body, followed by rest when there is one, the
// request's body.
func setRequestBody(req *fasthttp.Request, body []byte, rest io.Reader) {
	if rest == nil {
		req.SetBody(body)
		return
	}
	req.SetBodyStream(io.MultiReader(bytes.NewReader(body), rest), -1)
}

// setResponseBody makes body, followed by rest when there is one, the
// response's body; src is the stream they were read from, closed with it.
func setResponseBody(resp *fasthttp.Response, body []byte, rest, src io.Reader) {
	if rest == nil {
		resp.SetBody(body)
		closeReader(src)
		return
	}
	resp.SetBodyStream(&joined{Reader: io.MultiReader(bytes.NewReader(body), rest), src: src}, -1)
}

// takeResponseBody takes the response's body off it to be processed: a
// stream the gateway can detach, or the bytes of a buffered body; ok is
// false for a stream that cannot be taken.
func takeResponseBody(resp *fasthttp.Response) (io.Reader, bool) {
	if resp.IsBodyStream() {
		return policy.TakeBodyStream(resp)
	}
	body := bytes.Clone(resp.Body())
	resp.ResetBody()
	return bytes.NewReader(body), true
}
