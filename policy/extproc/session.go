package extproc

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/relaygate/gateway/policy"
)

// session is one request's stream to the service. The request phase opens
// it; the response phase and the body streams use it after; its last user
// closes it (reference-counted: the request's policy.Ctx holds one
// reference, each body stream in flight another).
type session struct {
	p      *ExtProc
	ctx    context.Context
	cancel context.CancelFunc
	stream procv3.ExternalProcessor_ProcessClient

	sendMu   sync.Mutex
	lastSend atomic.Int64 // monotonic-ish: UnixNano of the last message sent

	// The receiving goroutine hands answers to the phase that waits for
	// them: request-side answers on reqCh, response-side ones on respCh,
	// and only answers the service owes (answered); any other ends the
	// stream (outOfTurn). An immediate response ends both; it is kept in
	// immediate and imm is closed. dead is closed when the stream ends,
	// err saying why.
	reqCh, respCh chan *procv3.ProcessingResponse
	imm           chan struct{}
	immediate     *procv3.ImmediateResponse
	dead          chan struct{}
	err           error
	// outOfTurn: receive stopped at an answer the service did not owe
	// (err says which); the stream is broken for every phase after.
	outOfTurn bool
	// owed is what the service is to answer: the messages sent and not
	// yet answered (owe, answered).
	owedMu sync.Mutex
	owed   [2]owedAnswers // by direction: request, response

	refs   atomic.Int32
	opened bool

	// What is sent, as configured or as the service's mode override
	// changed it.
	reqBody, respBody bodyMode
	respHeaders       bool

	// The stream's span (a traced request's): it ends once the stream has
	// ended (receive returned) and the session is done with it (end), the
	// later of the two, with the failure the policy met, if any.
	call     policy.Call
	callRefs atomic.Int32
	ending   atomic.Bool // end was called
	// recvErr is what ended receive (nil: it stopped on its own), and
	// recvLate whether end had been called by then (a stream the gateway
	// cancelled has not failed for it).
	recvErr  error
	recvLate bool
	failure  atomic.Pointer[error] // the first failure of the stream

	metadata    *corev3.Metadata
	configSent  bool // the protocol configuration went with a message
	reqAttrSent bool
	skipResp    bool // the response side is not processed (failed open, answered)
	reqPump     *pump
}

// errService is a failure of the service or of its stream: the failure mode
// decides what happens to the request.
type errService struct{ msg string }

func (e *errService) Error() string { return e.msg }

var (
	errTimeout    = &errService{"the external processing service did not answer in time"}
	errStreamEnd  = &errService{"the external processing service ended the stream"}
	errOpenFailed = &errService{"cannot open a stream to the external processing service"}
	errEnded      = &errService{"the external processing stream was ended"}
)

func newSession(p *ExtProc) *session {
	s := &session{p: p, reqBody: p.reqBody, respBody: p.respBody, respHeaders: p.respHeaders}
	s.refs.Store(1)
	return s
}

// open starts the stream, bounded by the policy's timeout; tr is the
// request's trace, the parent of the stream's span.
func (s *session) open(tr policy.Trace, md metadata.MD) error {
	ctx, cancel := context.WithCancel(context.Background())
	if len(md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	ctx, s.call = tr.StartGRPC(ctx, policy.KindExtProc, procv3.ExternalProcessor_Process_FullMethodName, s.p.addr)
	s.ctx, s.cancel = ctx, cancel
	s.reqCh = make(chan *procv3.ProcessingResponse, 4)
	s.respCh = make(chan *procv3.ProcessingResponse, 4)
	s.imm = make(chan struct{})
	s.dead = make(chan struct{})
	s.opened = true
	// Opening a stream waits for a connection; the timer bounds that wait.
	timer := time.AfterFunc(s.p.timeout, cancel)
	stream, err := s.p.conn.client.Process(ctx)
	if !timer.Stop() || err != nil {
		cancel()
		s.err = errOpenFailed
		close(s.dead)
		code := status.Code(err)
		if err == nil {
			err, code = errTimeout, codes.DeadlineExceeded
		}
		err = errors.Join(errOpenFailed, err)
		s.call.EndGRPCStatus(code, err)
		return err
	}
	s.stream = stream
	if s.call.Recording() {
		s.callRefs.Store(2) // receive's and end's
	}
	s.lastSend.Store(time.Now().UnixNano())
	go s.receive()
	return nil
}

// receive hands the service's answers to their waiters until the stream
// ends.
func (s *session) receive() {
	defer s.callDone()
	defer close(s.dead)
	immediate := false
	for {
		m, err := s.stream.Recv()
		if err != nil {
			s.recvErr, s.recvLate = err, s.ending.Load()
			if err == io.EOF {
				s.err = errStreamEnd
			} else {
				s.err = errors.Join(&errService{"the external processing stream failed"}, err)
			}
			return
		}
		if r, ok := m.Response.(*procv3.ProcessingResponse_ImmediateResponse); ok {
			// Valid in any phase (Envoy's protocol): it ends both.
			if !immediate {
				immediate = true
				s.immediate = r.ImmediateResponse
				close(s.imm)
			}
			continue
		}
		dir, err := s.answered(m)
		if err != nil {
			// Not the answer the gateway waits for: the stream is broken
			// now, for the phase in progress (its wait returns err) and
			// for every later one, never left queued for a phase it was
			// not meant for, nor waited on until the timeout.
			s.err, s.outOfTurn = err, true
			s.failed(err)
			s.cancel()
			return
		}
		ch := s.reqCh
		if dir == respDir {
			ch = s.respCh
		}
		select {
		case ch <- m:
		case <-s.ctx.Done():
			s.err = errEnded
			return
		}
	}
}

// send sends m, safe for concurrent use (the request body's pump and the
// phases share the stream): a headers message, or a buffered body's, each
// owed one answer.
func (s *session) send(m *procv3.ProcessingRequest) error { return s.transmit(m, false) }

// sendChunk sends a chunk of a full-duplex body, whose answers come as the
// service chooses until one ends the body.
func (s *session) sendChunk(m *procv3.ProcessingRequest) error { return s.transmit(m, true) }

func (s *session) transmit(m *procv3.ProcessingRequest, streamed bool) error {
	// Owed before it goes: the answer may come before Send returns.
	s.owe(m, streamed)
	if m.MetadataContext == nil {
		m.MetadataContext = s.metadata
	}
	s.sendMu.Lock()
	if !s.configSent {
		s.configSent = true
		m.ProtocolConfig = &procv3.ProtocolConfiguration{
			RequestBodyMode:  s.reqBody.proto(),
			ResponseBodyMode: s.respBody.proto(),
		}
	}
	err := s.stream.Send(m)
	s.sendMu.Unlock()
	s.lastSend.Store(time.Now().UnixNano())
	if err != nil {
		// When the stream has ended, its end says why (io.EOF from Send
		// means "see Recv").
		select {
		case <-s.dead:
			return s.err
		default:
			return errors.Join(&errService{"sending to the external processing service failed"}, err)
		}
	}
	return nil
}

// errImmediate is returned by wait when the service answered the request
// itself (session.immediate).
var errImmediate = errors.New("immediate response")

// wait returns the next answer on ch. It fails when the stream ends, when
// stop is closed (a body pump failed), or when the service has been silent
// for the policy's timeout since the last message was sent to it while it
// owed an answer (not while, caught up on a full-duplex body, it waits for
// more of it: caughtUp); it returns errImmediate once the service answered
// with an immediate response.
func (s *session) wait(ch chan *procv3.ProcessingResponse, stop <-chan struct{}) (*procv3.ProcessingResponse, error) {
	dir := reqDir
	if ch == s.respCh {
		dir = respDir
	}
	timer := time.NewTimer(s.p.timeout)
	defer timer.Stop()
	for {
		select {
		case <-s.imm:
			return nil, errImmediate
		default:
		}
		if err := s.brokenOutOfTurn(); err != nil {
			return nil, err
		}
		select {
		case m := <-ch:
			return m, nil
		case <-s.imm:
			return nil, errImmediate
		case <-s.dead:
			if s.outOfTurn {
				// Answers queued before it are not taken either: the
				// service has broken the protocol.
				return nil, s.err
			}
			select {
			case m := <-ch:
				return m, nil
			default:
			}
			select {
			case <-s.imm:
				return nil, errImmediate
			default:
			}
			return nil, s.err
		case <-stop:
			return nil, errPumpStopped
		case <-timer.C:
			idle := time.Duration(time.Now().UnixNano() - s.lastSend.Load())
			switch {
			case s.caughtUp(dir):
				timer.Reset(s.p.timeout)
			case idle >= s.p.timeout:
				return nil, errTimeout
			default:
				timer.Reset(s.p.timeout - idle)
			}
		}
	}
}

var errPumpStopped = errors.New("the body being processed failed")

// brokenOutOfTurn is the failure of a stream the service broke with an
// answer out of turn, nil while it has not (or has not been opened).
func (s *session) brokenOutOfTurn() error {
	if s.dead == nil {
		return nil
	}
	select {
	case <-s.dead:
		if s.outOfTurn {
			return s.err
		}
	default:
	}
	return nil
}

// The directions of the exchange, indexing session.owed.
const (
	reqDir = iota
	respDir
)

// owedAnswers is what the service owes the gateway in one direction.
type owedAnswers struct {
	headers  bool // the headers message awaits its answer
	buffered int  // buffered body messages awaiting their answers
	// streaming: full-duplex chunks were sent, and no answer has ended
	// the body yet (ended); until then the service answers as it likes.
	streaming, ended bool
	// chunkSent and chunkAnswered are when (UnixNano) the last chunk of a
	// full-duplex body went to the service and when its last answer on
	// that body came: a service that answered after the last chunk is
	// waiting for more of the body, not owing an answer (caughtUp).
	chunkSent, chunkAnswered int64
}

// owe records the answer m calls for, before it is sent.
func (s *session) owe(m *procv3.ProcessingRequest, streamed bool) {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	switch m.Request.(type) {
	case *procv3.ProcessingRequest_RequestHeaders:
		s.owed[reqDir].headers = true
	case *procv3.ProcessingRequest_ResponseHeaders:
		s.owed[respDir].headers = true
	case *procv3.ProcessingRequest_RequestBody:
		s.owed[reqDir].oweBody(streamed)
	case *procv3.ProcessingRequest_ResponseBody:
		s.owed[respDir].oweBody(streamed)
	}
}

func (o *owedAnswers) oweBody(streamed bool) {
	if streamed {
		o.streaming = true
		o.chunkSent = time.Now().UnixNano()
	} else {
		o.buffered++
	}
}

// caughtUp reports whether the service owes nothing in direction dir but
// more of a full-duplex body: its headers and buffered bodies answered,
// and an answer on the body came after its last chunk was sent. Waiting
// then is waiting for the body's source (an upstream's stream idle
// between events, a client sending slowly), which bounds it itself; the
// service's timeout is not counted (wait).
func (s *session) caughtUp(dir int) bool {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	o := &s.owed[dir]
	return o.streaming && !o.ended && !o.headers && o.buffered == 0 && o.chunkAnswered >= o.chunkSent
}

// answered checks that m is an answer the service owes, in its order (a
// direction's headers before its body), and settles that debt; it returns
// m's direction, or why m is out of turn: an answer to a message not sent
// (the other direction's, early or late, a second answer to headers,
// trailers, which are never sent), or a body's before its headers'. An
// immediate response is never out of turn; receive takes it first.
func (s *session) answered(m *procv3.ProcessingResponse) (int, error) {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	var dir int
	var headers bool
	var cr *procv3.CommonResponse
	switch r := m.Response.(type) {
	case *procv3.ProcessingResponse_RequestHeaders:
		dir, headers, cr = reqDir, true, r.RequestHeaders.GetResponse()
	case *procv3.ProcessingResponse_ResponseHeaders:
		dir, headers, cr = respDir, true, r.ResponseHeaders.GetResponse()
	case *procv3.ProcessingResponse_RequestBody:
		dir, cr = reqDir, r.RequestBody.GetResponse()
	case *procv3.ProcessingResponse_ResponseBody:
		dir, cr = respDir, r.ResponseBody.GetResponse()
	case *procv3.ProcessingResponse_RequestTrailers, *procv3.ProcessingResponse_ResponseTrailers:
		return 0, errOutOfTurn(m, "no trailers are sent to the service")
	default:
		return 0, &errService{"the external processing service sent an answer this gateway does not take"}
	}
	o := &s.owed[dir]
	switch {
	case headers && !o.headers:
		return 0, errOutOfTurn(m, "its headers were not sent, or were answered already")
	case headers:
		o.headers = false
		// In full-duplex mode the answer to the headers may carry the
		// whole body (duplexBody.take).
		if sr := cr.GetBodyMutation().GetStreamedResponse(); sr != nil && sr.GetEndOfStream() {
			o.ended = true
		}
	case o.headers:
		return 0, errOutOfTurn(m, "its headers are not answered yet")
	case o.buffered > 0:
		o.buffered--
	case o.streaming && !o.ended:
		o.chunkAnswered = time.Now().UnixNano()
		if _, eos := streamedChunk(cr.GetBodyMutation()); eos {
			o.ended = true
		}
	default:
		return 0, errOutOfTurn(m, "no body of that direction awaits an answer")
	}
	return dir, nil
}

// errOutOfTurn is an answer the service did not owe.
func errOutOfTurn(m *procv3.ProcessingResponse, why string) error {
	kind := "an unknown"
	switch m.Response.(type) {
	case *procv3.ProcessingResponse_RequestHeaders:
		kind = "request_headers"
	case *procv3.ProcessingResponse_ResponseHeaders:
		kind = "response_headers"
	case *procv3.ProcessingResponse_RequestBody:
		kind = "request_body"
	case *procv3.ProcessingResponse_ResponseBody:
		kind = "response_body"
	case *procv3.ProcessingResponse_RequestTrailers:
		kind = "request_trailers"
	case *procv3.ProcessingResponse_ResponseTrailers:
		kind = "response_trailers"
	}
	return &errService{"the external processing service answered out of turn: a " + kind + " answer, but " + why}
}

// hold takes a reference for a body stream.
func (s *session) hold() { s.refs.Add(1) }

// Close drops a reference; the last one ends the stream.
func (s *session) Close() error {
	if s.refs.Add(-1) == 0 {
		s.end()
	}
	return nil
}

// end closes the stream now, whoever still holds it.
func (s *session) end() {
	if s.stream == nil {
		if s.cancel != nil {
			s.cancel()
		}
		return
	}
	first := s.ending.CompareAndSwap(false, true)
	if s.sendMu.TryLock() {
		// No send in progress: the service sees the stream's end in
		// order before it is cancelled.
		_ = s.stream.CloseSend()
		s.sendMu.Unlock()
		s.cancel()
	} else {
		// A send holds the stream, and may wait on flow control for a
		// service that waits in turn for the gateway to read its answers
		// (which the request this ends no longer does): cancelling first
		// ends that send, instead of waiting for it forever.
		s.cancel()
		s.sendMu.Lock()
		_ = s.stream.CloseSend()
		s.sendMu.Unlock()
	}
	if first {
		s.callDone()
	}
}

// failed notes err as the stream's failure, for its span, when it is one
// (not the client's body breaking off, nor a body or answer the gateway
// cannot take to the service): the first one counts.
func (s *session) failed(err error) {
	if !s.call.Recording() || err == errTooLarge || err == errNotDetachable {
		return
	}
	var es *errService
	if errors.As(err, &es) {
		s.failure.CompareAndSwap(nil, &err)
	}
}

// callDone drops one of the two holds on the stream's span (receive's,
// end's); the last ends it: with the status the stream ended with (OK when
// the service closed it, CANCELLED when the gateway did), and the failure
// the policy met, or else the stream's own failure.
func (s *session) callDone() {
	if !s.call.Recording() || s.callRefs.Add(-1) != 0 {
		return
	}
	code := codes.OK
	var failure error
	switch err := s.recvErr; {
	case err == nil:
		code = codes.Canceled // receive stopped before the stream ended; end cancelled it
	case err == io.EOF:
	default:
		code = status.Code(err)
		if !s.recvLate {
			failure = err
		}
	}
	if f := s.failure.Load(); f != nil {
		failure = *f
	}
	s.call.EndGRPCStatus(code, failure)
}
