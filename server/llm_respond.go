package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/cost"
	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/codec/coding"
	"github.com/relaygate/gateway/codec/llm/tokens"
	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/server/telemetry"
)

// llmRespond turns the provider's answer in x.upResp into the client's:
// translated (whole, or event by event for a stream), errors in the
// client's error shape, usage counted.
func (b *bind) llmRespond(rs *requestState, x *llmExchange) int {
	resp := &x.fctx.Response
	up := x.upResp
	status := up.StatusCode()
	translate := x.info.Client != convert.FormatUnknown && x.info.Provider != convert.FormatUnknown
	resp.Reset()
	up.Header.CopyTo(&resp.Header)
	h := &resp.Header
	// The gateway asks for no coding (llmAttempts drops Accept-Encoding),
	// but a provider or a proxy before it may send one anyway: the answer
	// is decoded, since the gateway reads it and the client was promised
	// none.
	enc := coding.Identity
	if ce := up.Header.ContentEncoding(); len(ce) > 0 { // a look without Del's normalising
		h.Del(fasthttp.HeaderContentEncoding)
		c, err := coding.Parse(ce)
		if err != nil {
			rs.upstreamErr = err
			if x.failEarly(err) {
				return 0 // llmAttempts asks the next provider
			}
			x.errType = "protocol"
			return b.llmFailed(rs, x, fasthttp.StatusBadGateway, "bad upstream response")
		}
		enc = c
	}
	rs.limitHeaders()

	if !translate {
		// Not a chat request (models, embeddings, passthrough): the
		// provider's answer as it is.
		if up.IsBodyStream() {
			h.SetContentLength(-1)
			backend.WatchStream(up, rs.clientWatch())
			ls := acquireDecodedStream(x, nil, up, enc)
			ls.b, ls.rs = b, rs
			resp.SetBodyStream(ls, -1)
			finishResponse(resp)
			return status
		}
		body := up.Body()
		if enc != coding.Identity {
			var err error
			if body, err = x.decode(body, enc); err != nil {
				rs.upstreamErr = err
				x.errType = "protocol"
				return b.llmFailed(rs, x, fasthttp.StatusBadGateway, "bad upstream response")
			}
		}
		if x.rt == provider.Embeddings && status >= 200 && status < 300 {
			// Embeddings are billed by their input: read as a chat
			// answer's usage is, for the token budgets, metrics and log.
			x.usage, x.answered = convert.EmbeddingsUsage(body).Clamped(), true
			x.hasUsage = x.usage.Reported()
			x.respModel = convert.AppendResponseModel(x.respModel[:0], body, convert.Chat)
		}
		resp.SetBody(body)
		finishResponse(resp)
		b.llmComplete(rs, x)
		return status
	}

	// A streamed answer: event by event, also when it was short enough to
	// come whole (a provider that sends its events with a Content-Length).
	if status >= 200 && status < 300 && x.info.Stream && isEventStream(up.Header.ContentType()) {
		// A provider often sends the head at once and thinks before its
		// first token: a client hanging up meanwhile ends the wait too.
		backend.WatchStream(up, rs.clientWatch())
		s := convert.AcquireStream(x.info)
		ls := acquireDecodedStream(x, s, up, enc)
		ls.b, ls.rs = b, rs
		if pol := x.prov.guardPolicy(); pol != nil && pol.GuardsStreams() && pol.HasRemoteResponseGuards() {
			var in *celrules.Input
			ctx, cancel := guardContext(requestDeadline(rs))
			ls.guardWith(pol, remoteInput(rs, &in, &up.Header, ctx), cancel, b.gw.log)
		}
		if x.prime && ls.prime() {
			ls.abandon()
			return 0 // llmAttempts asks the next provider
		}
		h.SetContentType(convert.StreamContentType(x.info.Client))
		resp.SetBodyStream(ls, -1)
		finishResponse(resp)
		return status
	}

	// A long answer's body is still on its way (the head came first): a
	// client that hangs up meanwhile ends the provider's work on it too.
	backend.WatchStream(up, rs.clientWatch())
	body, err := readWhole(up, &x.scratch)
	if err == nil && enc != coding.Identity {
		body, err = x.decode(body, enc)
	}
	if err != nil {
		rs.upstreamErr = err
		if x.failEarly(err) {
			return 0 // llmAttempts asks the next provider
		}
		x.errType = "protocol"
		if errors.Is(err, backend.ErrClientGone) {
			x.errType = "client_gone"
			x.cut = true // the provider had the prompt (chargedTokens)
		}
		return b.llmFailed(rs, x, fasthttp.StatusBadGateway, "bad upstream response")
	}
	h.SetContentType("application/json")
	if status < 200 || status >= 300 {
		out, st := convert.ProviderError(x.out[:0], x.info, status, body)
		x.out = out
		resp.SetStatusCode(st)
		resp.SetBody(out)
		if x.errType == "" {
			x.errType = "provider_" + itoa3(st)
		}
		finishResponse(resp)
		b.llmComplete(rs, x)
		return st
	}
	out, usage, err := convert.Response(x.out[:0], body, x.info)
	if err != nil {
		// (declared here: the target errors.As takes escapes)
		var ae *convert.AnswerError
		if errors.As(err, &ae) {
			return b.llmAnswerError(rs, x, ae)
		}
		rs.upstreamErr = err
		if x.failEarly(err) {
			return 0 // llmAttempts asks the next provider
		}
		x.errType = "protocol"
		return b.llmFailed(rs, x, fasthttp.StatusBadGateway, "bad upstream response")
	}
	x.out, x.usage, x.answered = out, usage.Clamped(), true
	x.hasUsage = x.usage.Reported()
	x.respModel = convert.AppendResponseModel(x.respModel[:0], body, x.info.Provider)
	// An answer is about four bytes a token, its JSON included: what it
	// is charged when its provider reports no usage (chargedTokens).
	x.outEstimate = int64(len(body)+3) / 4
	out, st, ok := b.guardAnswer(rs, x, out)
	if !ok {
		b.llmComplete(rs, x)
		return st
	}
	resp.SetBody(out)
	finishResponse(resp)
	b.llmComplete(rs, x)
	return status
}

// llmAnswerError answers an exchange whose provider sent an error (or no
// answer at all) with a success status as it answers a provider's error
// status: another provider is asked when one is left (an early failure,
// as for a stream's error event before its answer), else the client gets
// the error in its shape with the status the error names (else 502).
func (b *bind) llmAnswerError(rs *requestState, x *llmExchange, ae *convert.AnswerError) int {
	if x.prime {
		e := &x.early
		e.status, e.typ, e.msg = ae.Status, ae.Type, append(e.msg[:0], ae.Message...)
		e.retryable = false
		e.errType = strconv.Itoa(ae.Status)
		return 0 // llmAttempts asks the next provider
	}
	resp := &x.fctx.Response
	x.out = convert.AppendProviderError(x.out[:0], x.info.Client, ae.Status, ae.Type, ae.Message)
	resp.SetStatusCode(ae.Status)
	resp.SetBody(x.out)
	x.errType = "provider_" + itoa3(ae.Status)
	finishResponse(resp)
	b.llmComplete(rs, x)
	return ae.Status
}

// itoa3 writes a three-digit status.
func itoa3(n int) string {
	return string([]byte{byte('0' + n/100%10), byte('0' + n/10%10), byte('0' + n%10)})
}

var (
	ctEventStream    = []byte("text/event-stream")
	ctAWSEventStream = []byte("application/vnd.amazon.eventstream")
)

func isEventStream(ct []byte) bool {
	return bytes.HasPrefix(ct, ctEventStream) || bytes.HasPrefix(ct, ctAWSEventStream)
}

// readWhole reads a response body whole: the buffered body, or a streamed
// one into buf, up to llmMaxResponse. A body whose Content-Length is over
// the limit is refused unread; one of known length is read into a buffer
// of its size; one of unknown length into a buffer that doubles, but never
// past the limit (and a byte, to see a body go over it), so an answer near
// the limit costs about the limit and a half at its peak, not three times
// it. A buffer larger than maxKeptLLMBuf is not kept after a failure
// (nor in the pool, llmExchange.release).
func readWhole(resp *fasthttp.Response, buf *[]byte) ([]byte, error) {
	if !resp.IsBodyStream() {
		return resp.Body(), nil
	}
	cl := resp.Header.ContentLength()
	if cl > llmMaxResponse {
		return nil, errResponseTooLarge
	}
	b := (*buf)[:0]
	if cl >= 0 && cap(b) < cl+1 {
		b = make([]byte, 0, cl+1) // (+1: EOF is seen without growing)
	}
	r := resp.BodyStream()
	for {
		if len(b) == cap(b) {
			n := max(2*cap(b), 16<<10)
			if n >= llmMaxResponse {
				n = llmMaxResponse + 1
			}
			nb := make([]byte, len(b), n)
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > llmMaxResponse {
			*buf = keepLLMBuf(b)
			return nil, errResponseTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			*buf = keepLLMBuf(b)
			return nil, err
		}
	}
	*buf = b
	return b, nil
}

// maxKeptLLMBuf bounds a buffer a pooled llmExchange keeps between
// requests: one large answer does not pin its size in the pool.
const maxKeptLLMBuf = 1 << 20

// keepLLMBuf returns b emptied, or nil when it is too large to keep.
func keepLLMBuf(b []byte) []byte {
	if cap(b) > maxKeptLLMBuf {
		return nil
	}
	return b[:0]
}

var errResponseTooLarge = errors.New("provider response larger than 32 MiB")

// decode decodes a whole answer from enc into x.decoded, up to
// llmMaxResponse.
func (x *llmExchange) decode(body []byte, enc coding.Coding) ([]byte, error) {
	out, err := coding.Decode(x.decoded[:0], body, enc, llmMaxResponse)
	if errors.Is(err, coding.ErrTooLarge) {
		return nil, errResponseTooLarge
	}
	x.decoded = out
	return out, err
}

// acquireDecodedStream is acquireLLMStream for up's body (streamed, or
// read whole) decoded from enc. The stream closes the decoder when it
// closes (the body itself is closed through up).
func acquireDecodedStream(x *llmExchange, s *convert.Stream, up *fasthttp.Response, enc coding.Coding) *llmStream {
	src := up.BodyStream()
	if src == nil { // read whole (backend.ResponseStreamThreshold)
		src = bytes.NewReader(up.Body())
	}
	if enc == coding.Identity {
		return acquireLLMStream(x, s, src)
	}
	dec := coding.NewReader(src, enc)
	ls := acquireLLMStream(x, s, dec)
	ls.dec = dec
	return ls
}

// failEarly records err, a provider's answer that broke before anything of
// it reached the client (its body cut or malformed), as an early failure
// when another provider may answer instead (x.prime), and reports whether
// it did. A client that left is no provider's failure.
func (x *llmExchange) failEarly(err error) bool {
	if !x.prime || errors.Is(err, backend.ErrClientGone) {
		return false
	}
	failure := backend.Classify(err) // err is not nil: never FailureNone
	e := &x.early
	e.status, e.typ, e.retryable = failure.Status(), "", false
	e.msg = append(e.msg[:0], failureMessage(failure)...)
	e.errType = failureType(failure)
	return true
}

// earlyFailure is why a provider's stream failed before its answer began
// (llmStream.prime): the provider's error event (status, type in its
// format, message), or a stream that broke or was cut.
type earlyFailure struct {
	status  int
	typ     string
	msg     []byte
	errType string
	// retryable: another provider may answer although the status is a
	// 4xx (convert.StreamFailure.Retryable).
	retryable bool
}

// llmEarlyFailed answers an exchange whose last provider's stream failed
// before its answer began with that failure as an error of the client's
// format (no event of the stream reached the client), and records it.
func (b *bind) llmEarlyFailed(rs *requestState, x *llmExchange) int {
	b.llmComplete(rs, x)
	e := &x.early
	resp := &x.fctx.Response
	resp.Reset()
	resp.SetStatusCode(e.status)
	resp.Header.SetContentType("application/json")
	x.out = convert.AppendProviderError(x.out[:0], clientFormat(x.rt), e.status, e.typ, e.msg)
	resp.SetBody(x.out)
	return e.status
}

// llmFailed answers an exchange that got no usable answer from a provider
// (none could be reached, the answer was broken, the client went away)
// with the client's error, and records it: the GenAI metrics count failed
// operations too, by error type.
func (b *bind) llmFailed(rs *requestState, x *llmExchange, status int, msg string) int {
	b.llmComplete(rs, x)
	return b.llmClientError(x, status, msg)
}

// llmComplete accounts a finished exchange: tokens to the rate limits now,
// before the client has its answer, and the metrics with the request's
// record (observeLLM), which may come once the answer is out (deferRecord).
func (b *bind) llmComplete(rs *requestState, x *llmExchange) {
	if (x.answered || x.cut) && (rs.limited || len(rs.pc.TokenCharges) > 0) {
		charged := x.chargedTokens()
		if rs.limited && rs.route != nil && rs.route.limiter != nil {
			rs.route.limiter.Charge(&rs.limit, charged)
		}
		if len(rs.pc.TokenCharges) > 0 {
			u := policy.TokenUsage{Total: charged, LLM: func() map[string]any {
				if x.prov == nil {
					return map[string]any{"inputTokens": x.usage.InputTokens, "outputTokens": x.usage.OutputTokens, "totalTokens": x.usage.TotalTokens()}
				}
				return x.llmVariable(nil, false, false)
			}}
			for _, charge := range rs.pc.TokenCharges {
				charge(u)
			}
		}
	}
	if x.prov != nil {
		x.end, x.observe = monoNow(), true
	}
}

// observeLLM records the metrics and the cost of the exchange llmComplete
// ended, once: from the request's record (before its access line, which
// carries the cost), or from releaseState for a request never recorded.
func observeLLM(rs *requestState, x *llmExchange) {
	if !x.observe {
		return
	}
	x.observe = false
	o := telemetry.LLMObservation{
		Operation: operationName(x.rt),
		Provider:  x.prov.p.System(),
		// Views of the exchange's buffers, not copies: Observe keeps
		// nothing of them (LLMObservation), nor does the catalog.
		RequestModel:  bytesView(x.reqModel),
		ResponseModel: bytesView(x.responseModel()),
		Backend:       x.prov.p.Name(),
		Duration:      x.end - x.start,
		ErrorType:     x.errType,
		Cost:          costUnknown,
	}
	if rs.route != nil {
		o.Route = rs.route.name
	}
	if x.hasUsage {
		o.InputTokens, o.OutputTokens, o.CachedInputTokens = x.usage.InputTokens, x.usage.OutputTokens, x.usage.CachedInputTokens
	} else {
		o.InputTokens, o.OutputTokens, o.CachedInputTokens = -1, -1, -1
	}
	if x.ttft > 0 {
		o.TimeToFirstToken = x.ttft - x.start
	}
	if cat := x.target.catalog; x.hasUsage && cat != nil {
		// Priced as the model that answered when the catalog lists it,
		// else as the model asked of the provider (agentgateway's rule: a
		// dated version, gpt-4o-2024-08-06 for gpt-4o, is often missing
		// from a catalog that prices its alias).
		model := o.ResponseModel
		if !cat.Lists(o.Provider, model) {
			model = bytesView(x.model)
		}
		if c, ok := cat.Cost(o.Provider, model, costUsage(x.usage)); ok {
			o.Cost, x.cost, x.costKnown = c, c, true
		}
	}
	x.target.metrics.Observe(&o)
}

// costUsage puts usage in the catalog's terms, where each token counts
// once: convert's input counts the cache's tokens and its output the
// reasoning.
func costUsage(u convert.Usage) cost.Usage {
	return cost.Usage{
		Input:      max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0),
		Output:     max(u.OutputTokens-u.ReasoningTokens, 0),
		CacheRead:  u.CachedInputTokens,
		CacheWrite: u.CacheWriteInputTokens,
		Reasoning:  u.ReasoningTokens,
	}
}

// llmStream is the body of a streamed LLM answer: the provider's stream,
// translated (s set) or as it is, read by fasthttp as it writes the
// response, and held back window by window while remote guards judge it
// (guard set, llm_respond.go's streamGuard). Closing it returns the
// upstream connection, accounts the exchange and tells the request's
// observer.
type llmStream struct {
	b        *bind
	rs       *requestState
	x        *llmExchange
	s        *convert.Stream
	guard    *streamGuard
	src      io.Reader
	dec      io.Closer // src's decoder, if the answer came in a coding
	in, out  []byte
	off      int
	done     bool
	err      error // what Read returns once out is sent
	failed   error // why a translated stream ended with an error event
	whole    bool  // the client's stream's last event is written (Read)
	n        int
	obs      backend.StreamObserver
	observed bool
	keepOnce bool // the next Close does nothing (Detach)

	// A read prime waits for at most until its bound (readWithin) runs in
	// a goroutine of its own, reading src into in and sending its result
	// on reads: pending says it is under way (the next read waits for
	// it), ready that it came, as readN and readErr. reads and timer stay
	// with the pooled stream.
	pending, ready bool
	readN          int
	readErr        error
	reads          chan readResult
	timer          *time.Timer
}

// readResult is what a read of the provider's stream returned.
type readResult struct {
	n   int
	err error
}

var llmStreams = sync.Pool{New: func() any { return &llmStream{in: make([]byte, 16<<10)} }}

func acquireLLMStream(x *llmExchange, s *convert.Stream, src io.Reader) *llmStream {
	ls := llmStreams.Get().(*llmStream)
	ls.x, ls.s, ls.src = x, s, src
	return ls
}

// observe has o told when the stream closes (finish).
func (ls *llmStream) observe(b *bind, rs *requestState, o backend.StreamObserver) {
	ls.b, ls.rs, ls.obs, ls.observed = b, rs, o, true
}

func (ls *llmStream) Read(p []byte) (int, error) {
	if ls.s == nil {
		// As it is.
		if ls.done {
			return 0, ls.err
		}
		n, err := ls.src.Read(p)
		if n > 0 && ls.x.ttft == 0 {
			ls.x.ttft = monoNow()
		}
		ls.n += n
		if err != nil {
			ls.done, ls.err = true, err
		}
		return n, err
	}
	for ls.off == len(ls.out) {
		if ls.done {
			return 0, ls.err
		}
		// What Read returned so far is written: the server writes (and
		// flushes) each piece before it reads the next. Once that holds
		// the stream's last event, the client has its whole answer.
		ls.whole = ls.whole || ls.s.Ended() && (ls.guard == nil || len(ls.guard.held) == 0)
		ls.out, ls.off = ls.out[:0], 0
		if ls.guard != nil {
			ls.guardedStep()
		} else {
			ls.out = ls.step(ls.out)
		}
	}
	if ls.x.ttft == 0 {
		ls.x.ttft = monoNow()
	}
	n := copy(p, ls.out[ls.off:])
	ls.off += n
	ls.n += n
	return n, nil
}

// step reads the provider's next bytes and appends what the client is to
// get of them to dst. The stream is done after its end, or after an error
// event.
func (ls *llmStream) step(dst []byte) []byte {
	n, err := ls.read()
	if n > 0 {
		var ferr error
		dst, ferr = ls.s.Feed(dst, ls.in[:n])
		if ferr != nil {
			// The client's error event is in dst: the stream ends after
			// it, cleanly (a cut would lose the event's chunk).
			ls.done, ls.err, ls.failed = true, io.EOF, ferr
			return dst
		}
	}
	if err != nil && ls.whole {
		// The client has had the stream's last event, and the provider's
		// body was only waited for to its end (the end of its framing):
		// a client that hangs up now (the OpenAI SDKs close their
		// connection at [DONE]), or a provider that cuts its connection
		// now, takes nothing from the answer. (A body not read to its end
		// does not pool its connection.)
		ls.done, ls.err = true, io.EOF
		return dst
	}
	if err != nil {
		// The provider's stream ended: its last events, or an error event
		// when it ended early or the read failed.
		var cerr error
		told := len(dst)
		dst, cerr = ls.s.Close(dst)
		ls.done, ls.err = true, io.EOF
		if err != io.EOF {
			ls.failed = err
		} else if cerr != nil {
			ls.failed = cerr
		}
		if ls.failed != nil && len(dst) == told {
			// A stream passed through as it came has no event of ours to
			// end it: the client's is cut as the provider's was (no last
			// chunk, a reset stream), or it would look complete.
			ls.err = ls.failed
		}
	}
	return dst
}

// read reads the provider's next bytes into in: those of the read prime
// left (readWithin), or of a new one.
func (ls *llmStream) read() (int, error) {
	switch {
	case ls.ready:
		ls.ready = false
		n, err := ls.readN, ls.readErr
		ls.readErr = nil
		return n, err
	case ls.pending:
		r := <-ls.reads
		ls.pending = false
		return r.n, r.err
	}
	return ls.src.Read(ls.in)
}

// readWithin starts the provider's next read, in a goroutine of its own,
// and waits for it until t fires. It reports whether the read came in
// time (the next read returns it); if not, the read goes on (the next
// read waits for it), and nothing else may read src or in meanwhile.
func (ls *llmStream) readWithin(t *time.Timer) bool {
	if ls.reads == nil {
		ls.reads = make(chan readResult, 1)
	}
	ls.pending = true
	go ls.readAhead()
	select {
	case r := <-ls.reads:
		ls.pending, ls.ready, ls.readN, ls.readErr = false, true, r.n, r.err
		return true
	case <-t.C:
		return false
	}
}

// readAhead is readWithin's read.
func (ls *llmStream) readAhead() {
	n, err := ls.src.Read(ls.in)
	ls.reads <- readResult{n, err}
}

// Close ends the exchange: the upstream body is closed (its connection
// pooled when read to its end), the usage accounted, the request recorded.
// Detach makes the next Close do nothing, so that a response policy can
// take the stream off its response (policy.TakeBodyStream) and close it
// itself.
func (ls *llmStream) Detach() { ls.keepOnce = true }

func (ls *llmStream) Close() error {
	if ls.keepOnce {
		ls.keepOnce = false
		return nil
	}
	x := ls.x
	ls.closeUpstream()
	var err error
	switch {
	case ls.failed != nil:
		err = ls.failed
		x.errType = "stream"
	case ls.err != nil && ls.err != io.EOF:
		err = ls.err
		x.errType = "stream"
	case (!ls.done || ls.off < len(ls.out)) && !ls.whole:
		// (The client that had the last event and left before the
		// provider's body ended abandoned nothing.)
		err = backend.ErrStreamAbandoned
	}
	if err == nil && ls.s != nil {
		if f, failed := ls.s.ProviderFailure(); failed {
			// A same-format stream passed the provider's error event on
			// and ended cleanly: it failed all the same (a translated
			// one's Feed returned it, ls.failed).
			err = f.Err()
			x.errType = "stream"
		}
	}
	if errors.Is(err, backend.ErrClientGone) {
		x.errType = "client_gone"
	}
	if ls.s != nil {
		x.usage, x.answered = ls.s.Usage().Clamped(), true
		x.hasUsage = x.usage.Reported()
		x.respModel = append(x.respModel[:0], ls.s.Model()...)
		x.outEstimate = ls.s.OutputEstimate()
		if err != nil {
			x.cut = true
		}
	}
	n, obs, observed, b, rs := ls.n, ls.obs, ls.observed, ls.b, ls.rs
	ls.recycle()
	switch {
	case observed:
		b.llmComplete(rs, x)
		obs.StreamClosed(n, err)
	case b != nil:
		// Closed before the server observed it: a response policy read the
		// answer whole (or replaced it) while the request is still being
		// handled. Its tokens still count.
		b.llmComplete(rs, x)
	}
	return nil
}

// chargedTokens is what the exchange costs the token budgets: the usage
// the provider reported; for a stream cut before its end, or an answer
// whose provider reported no usage (one that ignores stream_options, an
// OpenAI-compatible server without usage), at least what the provider
// bills for it: the prompt (estimated by the compiled-in tokenizer when
// the provider had not reported it) and the answer (streamed so far:
// convert.Stream.OutputEstimate; whole: its bytes over four); for a client
// that left before a whole answer came, the prompt. Without the estimate a
// client could take most of an answer, or have long prompts read, and
// leave before the usage came, or use a provider that never tells, billed
// nothing.
func (x *llmExchange) chargedTokens() int64 {
	reported := x.usage.InputTokens > 0 || x.usage.OutputTokens > 0
	if !x.cut && reported {
		return x.usage.TotalTokens()
	}
	in := x.usage.InputTokens
	if in == 0 {
		body := x.edited
		if len(body) == 0 {
			body = x.client
		}
		if cf := clientFormat(x.rt); cf != convert.FormatUnknown {
			var n int
			n, x.scratch = aipolicy.PromptTokens(x.scratch, body, cf, tokens.EncodingFor(string(x.model)))
			in = int64(n)
		} else if x.rt == provider.Embeddings {
			// An embeddings answer without usage: its input at about
			// four bytes a token, the request's JSON included.
			in = int64(len(body)+3) / 4
		}
	}
	return in + max(x.usage.OutputTokens, x.outEstimate)
}

// responseModel is the model that answered (gen_ai.response.model): the
// one the provider's answer names, else (Bedrock's name none, or no answer
// came) the one asked of it.
func (x *llmExchange) responseModel() []byte {
	if len(x.respModel) > 0 {
		return x.respModel
	}
	return x.model
}

// accessFields fills an LLM exchange's part of the access log record.
func (x *llmExchange) accessFields(a *logline.AccessLLM) {
	*a = logline.AccessLLM{
		Provider:     x.prov.p.Name(),
		RequestModel: logline.BoundBytes(x.reqModel),
		Model:        logline.BoundBytes(x.responseModel()),
		HasUsage:     x.hasUsage,
		CostKnown:    x.costKnown,
		Cost:         x.cost,
		Guard:        x.guard,
		Error:        x.errType,
	}
	if x.hasUsage {
		a.InputTokens, a.OutputTokens, a.CachedInputTokens = x.usage.InputTokens, x.usage.OutputTokens, x.usage.CachedInputTokens
	}
}

// bytesView is b as a string without a copy, for a callee that keeps no
// part of it: b must not change while the string is in use.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Guarding a stream with the remote response guards (promptGuard.streaming:
// Enabled; aipolicy's window.go says how): the client's events are held
// back in streamGuard.held while their text (convert.Stream's tap) gathers
// into the next window; when a window is due the guards judge it, and the
// held events go out, or an error event in the client's format replaces
// them and ends the stream. Without streaming: Enabled, remote response
// guards do not judge streams (agentgateway's behaviour).

// guardPolicy is the provider's ai policy (nil: none, or no provider).
func (p *llmProvider) guardPolicy() *aipolicy.Policy {
	if p == nil {
		return nil
	}
	return p.policy
}

// streamGuard is a guarded stream's state.
type streamGuard struct {
	pol    *aipolicy.Policy
	remote *aipolicy.RemoteInput
	cancel context.CancelFunc // the guards' context's
	log    *zap.Logger
	win    aipolicy.StreamWindow
	held   []byte // the client's events since the last window
	text   []byte // the text taken from the stream
}

// maxHeldBytes bounds the events held back: with sparse text (tool calls,
// thinking) a window is judged once they reach it, and when none of their
// text is pending they go out unjudged.
const maxHeldBytes = 64 << 10

// maxKeptHeld bounds the buffer a pooled streamGuard keeps.
const maxKeptHeld = 256 << 10

var streamGuards = sync.Pool{New: func() any { return new(streamGuard) }}

// guardWith has pol's remote response guards judge the stream, their calls
// made with remote (cancel ends its context, once the stream closes). The
// stream's text is tapped from now on.
func (ls *llmStream) guardWith(pol *aipolicy.Policy, remote *aipolicy.RemoteInput, cancel context.CancelFunc, log *zap.Logger) {
	g := streamGuards.Get().(*streamGuard)
	g.pol, g.remote, g.cancel, g.log = pol, remote, cancel, log
	ls.s.TapText()
	ls.guard = g
}

func releaseStreamGuard(g *streamGuard) {
	g.cancel()
	g.win.Reset()
	held, text := g.held[:0], g.text[:0]
	if cap(held) > maxKeptHeld {
		held = nil
	}
	*g = streamGuard{win: g.win, held: held, text: text}
	streamGuards.Put(g)
}

// guardedStep reads the provider's next bytes into the held events. When
// a window's worth of text is pending, too many events are held or the
// stream ended, the pending text is judged: out gets the held events, or
// the error event that replaces them.
func (ls *llmStream) guardedStep() {
	g := ls.guard
	ls.guardedRead()
	if !ls.done && !ls.s.Ended() && g.win.Pending() < aipolicy.StreamWindowText && len(g.held) < maxHeldBytes {
		// (The stream's last events go out once they are read, not when
		// the provider's body ends.)
		return
	}
	ls.guardedFlush()
}

// guardedRead reads the provider's next bytes into the held events, their
// text into the window.
func (ls *llmStream) guardedRead() {
	g := ls.guard
	g.held = ls.step(g.held)
	g.text = ls.s.TakeText(g.text[:0])
	g.win.Add(g.text)
}

// guardedFlush has the pending text judged, and out gets the held events
// or the error event that replaces them.
func (ls *llmStream) guardedFlush() {
	g := ls.guard
	if g.win.Pending() > 0 && ls.blocked() {
		return
	}
	ls.out, g.held = g.held, ls.out[:0]
}

// primeMax bounds the client's events held back while a stream is primed,
// and primeWait the time: a provider that thinks long before its first
// token (a reasoning model) sends keep-alives meanwhile, which then reach
// the client as they come, and one that goes quiet after its head gets
// its head and what it sent so far to the client all the same.
const primeMax = 64 << 10

var primeWait = newAtomicInt64(int64(10 * time.Second)) // atomic so that tests can shorten it

// prime reads a translated stream before the client's head is written,
// holding the client's events back, until the answer begins (its first
// delta), primeMax of events are held, primeWait has passed (by a timer:
// a provider that sends nothing more does not hold the client's head
// forever; the read under way then carries on as the stream's next), or
// the stream ends. It reports a
// stream that failed before its answer began (the provider's error event,
// a stream that broke or was cut), with why in x.early: the client has
// had nothing of it, so another provider may answer instead. A client
// that left is no such failure. Otherwise the held events are the first
// the client reads.
func (ls *llmStream) prime() bool {
	s := ls.s
	wait := time.Duration(primeWait.Load())
	if ls.timer == nil {
		ls.timer = time.NewTimer(wait)
	} else {
		ls.timer.Reset(wait)
	}
	defer ls.timer.Stop()
	for !ls.done && !s.Answered() {
		if _, failed := s.ProviderFailure(); failed {
			break // a same-format stream passes it on and reads on
		}
		if !ls.readWithin(ls.timer) {
			break // primeWait passed: the client's head goes out
		}
		if ls.guard != nil {
			ls.guardedRead()
			if len(ls.guard.held) >= primeMax {
				break
			}
		} else {
			ls.out = ls.step(ls.out)
			if len(ls.out) >= primeMax {
				break
			}
		}
	}
	f, provFailed := s.ProviderFailure()
	if s.Answered() || (!provFailed && ls.failed == nil) || errors.Is(ls.failed, backend.ErrClientGone) {
		if ls.guard != nil && ls.done {
			ls.guardedFlush()
		}
		return false
	}
	e := &ls.x.early
	if provFailed {
		e.status, e.typ, e.msg = f.Status, f.Type, append(e.msg[:0], f.Message...)
		e.retryable = f.Retryable
		e.errType = strconv.Itoa(f.Status)
		return true
	}
	return ls.x.failEarly(ls.failed) // a stream cut or broken
}

// abandon ends a stream that prime found failed, without accounting it:
// another provider answers the request.
func (ls *llmStream) abandon() {
	ls.closeUpstream()
	ls.recycle()
}

// closeUpstream closes the provider's body (its connection pooled when it
// was read to its end) and the decoder over it.
func (ls *llmStream) closeUpstream() {
	if ls.pending {
		// The read prime left under way has the body: it ends when the
		// provider sends, its deadline passes or the client's watch cuts
		// it, as a read of the stream's own would.
		<-ls.reads
		ls.pending = false
	}
	ls.ready, ls.readErr = false, nil
	_ = ls.x.upResp.CloseBodyStream()
	if ls.dec != nil {
		ls.dec.Close()
	}
}

// recycle releases what the stream holds and returns it to its pool,
// keeping its buffers; ls must not be used afterwards.
func (ls *llmStream) recycle() {
	if ls.s != nil {
		convert.ReleaseStream(ls.s)
	}
	if ls.guard != nil {
		releaseStreamGuard(ls.guard)
	}
	in, out, reads, timer := ls.in, ls.out[:0], ls.reads, ls.timer
	*ls = llmStream{in: in, out: out, reads: reads, timer: timer}
	llmStreams.Put(ls)
}

// blocked has the guards judge the pending window. A rejection replaces
// the held events with an error event (agentgateway's type and code, the
// rejection's body as its message) and ends the stream, cleanly.
func (ls *llmStream) blocked() bool {
	g, x := ls.guard, ls.x
	v := g.pol.ResponseWindow(g.win.Next(), g.remote)
	for _, err := range v.FailedOpen {
		g.log.Warn("streaming prompt guard failed: the window passes", zap.Error(err))
		if x.guard == "" {
			x.guard = "failed_open"
		}
	}
	if v.MaskPassed != "" {
		g.log.Debug("a streaming prompt guard masked a window: streams cannot be masked by remote guards, the window passes",
			zap.String("guard", v.MaskPassed))
	}
	if v.Rejection == nil {
		return false
	}
	x.guard, x.errType = "rejected", "guardrail_rejected"
	g.held = g.held[:0]
	ls.out = ls.s.Abort(ls.out[:0], "guardrail_blocked", "guardrail_intervention", v.Rejection.Body())
	ls.done, ls.err = true, io.EOF
	return true
}
