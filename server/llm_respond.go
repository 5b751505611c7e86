package server

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/cost"
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
	h.Del(fasthttp.HeaderContentEncoding)
	if x.limited {
		x.limit.WriteHeaders(h)
	}

	if !translate {
		// Not a chat request (models, embeddings, passthrough): the
		// provider's answer as it is.
		if up.IsBodyStream() {
			h.SetContentLength(-1)
			resp.SetBodyStream(acquireLLMStream(x, nil, up.BodyStream()), -1)
			finishResponse(resp)
			return status
		}
		resp.SetBody(up.Body())
		finishResponse(resp)
		b.llmComplete(rs, x)
		return status
	}

	if status >= 200 && status < 300 && x.info.Stream && isEventStream(up.Header.ContentType()) && up.IsBodyStream() {
		s := convert.AcquireStream(x.info)
		h.SetContentType(convert.StreamContentType(x.info.Client))
		resp.SetBodyStream(acquireLLMStream(x, s, up.BodyStream()), -1)
		finishResponse(resp)
		return status
	}

	body, err := readWhole(up, &x.scratch)
	if err != nil {
		rs.upstreamErr = err
		x.errType = "protocol"
		return b.llmClientError(x, fasthttp.StatusBadGateway, "bad upstream response")
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
		rs.upstreamErr = err
		x.errType = "protocol"
		return b.llmClientError(x, fasthttp.StatusBadGateway, "bad upstream response")
	}
	x.out, x.usage, x.hasUsage = out, usage, true
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
// one into buf, up to llmMaxResponse.
func readWhole(resp *fasthttp.Response, buf *[]byte) ([]byte, error) {
	if !resp.IsBodyStream() {
		return resp.Body(), nil
	}
	b := (*buf)[:0]
	r := resp.BodyStream()
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > llmMaxResponse {
			*buf = b[:0]
			return nil, errResponseTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			*buf = b[:0]
			return nil, err
		}
	}
	*buf = b
	return b, nil
}

var errResponseTooLarge = errors.New("provider response larger than 32 MiB")

// llmComplete accounts a finished exchange: tokens to the rate limits and
// the metrics.
func (b *bind) llmComplete(rs *requestState, x *llmExchange) {
	if x.limited && x.hasUsage && rs.route != nil && rs.route.limiter != nil {
		rs.route.limiter.Charge(&x.limit, x.usage.TotalTokens())
	}
	if x.prov == nil {
		return
	}
	o := telemetry.LLMObservation{
		Operation:     operationName(x.rt),
		Provider:      x.prov.p.System(),
		RequestModel:  string(x.reqModel),
		ResponseModel: string(x.model),
		Backend:       x.prov.p.Name(),
		Duration:      monoNow() - x.start,
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
	if x.hasUsage && x.target.catalog != nil {
		if c, ok := x.target.catalog.Cost(o.Provider, string(x.model), costUsage(x.usage)); ok {
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
// response. Closing it returns the upstream connection, accounts the
// exchange and tells the request's observer.
type llmStream struct {
	b        *bind
	rs       *requestState
	x        *llmExchange
	s        *convert.Stream
	src      io.Reader
	in, out  []byte
	off      int
	done     bool
	err      error // what Read returns once out is sent
	failed   error // why a translated stream ended with an error event
	n        int
	obs      backend.StreamObserver
	observed bool
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
		ls.out, ls.off = ls.out[:0], 0
		n, err := ls.src.Read(ls.in)
		if n > 0 {
			var ferr error
			ls.out, ferr = ls.s.Feed(ls.out, ls.in[:n])
			if ferr != nil {
				// The client's error event is in out: the stream ends
				// after it, cleanly (a cut would lose the event's chunk).
				ls.done, ls.err, ls.failed = true, io.EOF, ferr
				continue
			}
		}
		if err != nil {
			// The provider's stream ended: its last events, or an error
			// event when it ended early or the read failed.
			var cerr error
			ls.out, cerr = ls.s.Close(ls.out)
			ls.done, ls.err = true, io.EOF
			if err != io.EOF {
				ls.failed = err
			} else if cerr != nil {
				ls.failed = cerr
			}
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

// Close ends the exchange: the upstream body is closed (its connection
// pooled when read to its end), the usage accounted, the request recorded.
func (ls *llmStream) Close() error {
	x := ls.x
	_ = x.upResp.CloseBodyStream()
	var err error
	switch {
	case ls.failed != nil:
		err = ls.failed
		x.errType = "stream"
	case ls.err != nil && ls.err != io.EOF:
		err = ls.err
		x.errType = "stream"
	case !ls.done || ls.off < len(ls.out):
		err = backend.ErrStreamAbandoned
	}
	if ls.s != nil {
		x.usage, x.hasUsage = ls.s.Usage(), true
		convert.ReleaseStream(ls.s)
	}
	n, obs, observed, b, rs := ls.n, ls.obs, ls.observed, ls.b, ls.rs
	in, out := ls.in, ls.out[:0]
	*ls = llmStream{in: in, out: out}
	llmStreams.Put(ls)
	if observed {
		b.llmComplete(rs, x)
		obs.StreamClosed(n, err)
	}
	return nil
}

// appendLLMFields adds an LLM exchange's access log fields.
func appendLLMFields(fields []zap.Field, x *llmExchange) []zap.Field {
	fields = append(fields,
		zap.String("llm.provider", x.prov.p.Name()),
		zap.String("llm.request_model", string(x.reqModel)),
		zap.String("llm.model", string(x.model)),
	)
	if x.hasUsage {
		fields = append(fields,
			zap.Int64("llm.input_tokens", x.usage.InputTokens),
			zap.Int64("llm.output_tokens", x.usage.OutputTokens),
		)
		if x.usage.CachedInputTokens > 0 {
			fields = append(fields, zap.Int64("llm.cached_input_tokens", x.usage.CachedInputTokens))
		}
	}
	if x.costKnown {
		fields = append(fields, zap.Float64("llm.cost", x.cost))
	}
	if x.guard != "" {
		fields = append(fields, zap.String("llm.guard", x.guard))
	}
	if x.errType != "" {
		fields = append(fields, zap.String("llm.error", x.errType))
	}
	return fields
}
