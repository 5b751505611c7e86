package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/balance"
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/cost"
	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/backend/llm/promptcache"
	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/codec/coding"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/llm/tokens"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/policy/credential"
	"github.com/relaygate/gateway/policy/ratelimit"
	"github.com/relaygate/gateway/server/telemetry"
)

// llmTarget is an ai backend: LLM providers in priority groups, balanced
// by health (backend/llm/balance). A request is read whole, edited by the
// ai policy, translated into each provider's format and sent; a failed
// attempt that sent nothing to the client moves to the next provider.
type llmTarget struct {
	name     string
	set      *balance.Set[*llmProvider]
	routes   []llmRoute         // longest suffix first
	fallback provider.RouteType // for paths no route names; 0: refused
	metrics  *telemetry.LLMMetrics
	catalog  *cost.Catalog // config.modelCatalog, nil when none
	// targetModel names, for a failover virtual model of the llm section,
	// the model each provider's attempt asks for (its target's name, as
	// agentgateway rewrites the body's model); nil elsewhere.
	targetModel map[*llmProvider]string
	// targetAuthz is, for such a failover, the authorization of each
	// provider's model: a provider whose model refuses the request is
	// skipped (nil: none has any).
	targetAuthz map[*llmProvider]*celrules.RuleSet
}

// llmProvider is one compiled provider of an ai backend.
type llmProvider struct {
	p        *provider.Provider
	up       *backend.Upstream
	upTLS    backend.UpstreamTLS // up's TLS, for the ai backend's key (its files' digest)
	host     []byte              // the Host header it gets
	policy   *aipolicy.Policy
	mask     *guard.Guard        // the response guard, nil for none
	cache    *promptcache.Policy // promptCaching, nil for none
	tokenize bool
	// passthrough is the provider's backendAuth passthrough.
	passthrough   bool
	passthroughAt credential.Location
	// requestHeaders are the llm section model's requestHeaders, applied
	// after the credentials as agentgateway does (before them when they
	// sign the request); nil for none.
	requestHeaders *policy.HeaderModifier
	// shownHealthy is set while the health gauge is known to show it
	// healthy, so that a success does not look its series up again.
	shownHealthy atomic.Bool
}

// The ai backend applies every backend policy: the header modifiers and
// the redirect around it (proceed, prepareRequest), http's requestTimeout
// per attempt, tcp to its providers' connections.
func (t *llmTarget) honors(string) bool { return true }

func (t *llmTarget) exchange(b *bind, rs *requestState, r *route, rb *routeBackend) int {
	return b.serveLLM(rs, r, rb, t)
}

// routeType resolves the kind of request a path carries.
func (t *llmTarget) routeType(path []byte) provider.RouteType {
	return llmRouteType(t.routes, t.fallback, path)
}

// llmRouteType is the route type of the longest suffix in routes that path
// ends with, else fallback.
func llmRouteType(routes []llmRoute, fallback provider.RouteType, path []byte) provider.RouteType {
	for i := range routes {
		if bytes.HasSuffix(path, []byte(routes[i].suffix)) {
			return routes[i].rt
		}
	}
	return fallback
}

// clientFormat is the wire format the client speaks on a chat route type.
func clientFormat(rt provider.RouteType) convert.Format {
	switch rt {
	case provider.Completions:
		return convert.Chat
	case provider.Messages:
		return convert.Messages
	case provider.Responses:
		return convert.Responses
	}
	return convert.FormatUnknown
}

// operationName is the GenAI operation a route type performs.
func operationName(rt provider.RouteType) string {
	switch rt {
	case provider.Completions, provider.Messages, provider.Responses:
		return "chat"
	case provider.Embeddings:
		return "embeddings"
	case provider.AnthropicTokenCount:
		return "count_tokens"
	case provider.Models:
		return "models"
	}
	return "passthrough"
}

// llmMaxResponse bounds a provider's answer read whole (not streamed).
const llmMaxResponse = 32 << 20

// llmExchange is the pooled per-request state of an LLM request.
type llmExchange struct {
	client   []byte            // the client's body as received
	edited   []byte            // ... after the ai policy
	members  []aipolicy.Member // the top-level members of the ai policy's last output
	sent     []byte            // ... in the provider's format
	scratch  []byte
	cached   []byte // the provider body with cache points
	guarded  []byte // the answer as the remote response guards masked it
	retarget []byte // the client's body naming another model (retarget)
	decoded  []byte // the provider's answer decoded from its Content-Encoding
	out      []byte
	saved    *fasthttp.RequestHeader // the upstream request head before provider-specific changes
	upResp   *fasthttp.Response
	info     convert.RequestInfo
	head     convert.Head // what convert.ReadHead read of the body an attempt sends
	rt       provider.RouteType
	prov     *llmProvider
	target   *llmTarget
	model    []byte // the model asked of the provider
	reqModel []byte // the model the client asked for
	uri      []byte // the client's request target (path and query)
	// path is the client's path (rs.pc.Path), kept here: the request's
	// target, which pc.Path pointed into, becomes the provider's.
	path     []byte
	usage    convert.Usage
	hasUsage bool // the provider reported it (convert.Usage.Reported)
	// answered: an answer came, whole or streamed, so it is charged
	// (chargedTokens: its usage, or an estimate without one).
	answered bool
	// cut says the answer's stream ended before its end (the client
	// left, the stream broke, a guard stopped it), or the client left
	// before a whole answer came: the provider's usage may be missing.
	// outEstimate estimates the output streamed or answered, for an answer
	// without the provider's usage (chargedTokens).
	cut         bool
	outEstimate int64
	start       time.Duration
	ttft        time.Duration
	guard       string // "masked", "rejected", "failed_open", "failed" or ""
	errType     string
	// prime has llmRespond read a stream up to its answer's first delta
	// before the client's head goes out, and take a whole answer that
	// breaks as the provider's failure, so that another provider can
	// answer (llmStream.prime, failEarly); early is why the last one
	// failed.
	prime     bool
	early     earlyFailure
	cost      float64
	costKnown bool
	// end is when the exchange ended (llmComplete), and observe says its
	// metrics wait for the request's record (observeLLM).
	end     time.Duration
	observe bool
	fctx    *fasthttp.RequestCtx

	// respModel is the model the provider says answered (its answer's
	// model, Gemini's modelVersion), empty when it named none
	// (responseModel).
	respModel []byte
}

var llmExchanges = sync.Pool{New: func() any { return new(llmExchange) }}

func (x *llmExchange) release() {
	if x.upResp != nil {
		fasthttp.ReleaseResponse(x.upResp)
	}
	if x.saved != nil {
		x.saved.Reset()
	}
	// The buffers an answer fills (read whole, decoded, masked,
	// translated) are dropped when large (keepLLMBuf); the request's own
	// are bounded by maxBufferSize.
	*x = llmExchange{
		client: x.client[:0], edited: x.edited[:0], members: x.members[:0], sent: x.sent[:0], scratch: keepLLMBuf(x.scratch), cached: x.cached[:0],
		out: keepLLMBuf(x.out), guarded: keepLLMBuf(x.guarded), retarget: x.retarget[:0], decoded: keepLLMBuf(x.decoded), model: x.model[:0], respModel: x.respModel[:0], reqModel: x.reqModel[:0], uri: x.uri[:0], path: x.path[:0], saved: x.saved,
		early: earlyFailure{msg: x.early.msg[:0]},
	}
	llmExchanges.Put(x)
}

// serveLLM answers a request whose backend is an ai backend.
func (b *bind) serveLLM(rs *requestState, r *route, rb *routeBackend, t *llmTarget) int {
	rt := t.routeType(rs.pc.Path)
	if rt == rtRealtime {
		return b.serveRealtime(rs, r, rb, t)
	}
	x, status, ok := b.llmBegin(rs, rt)
	if !ok {
		return status
	}
	if rs.h2 == nil {
		// A provider stops working on (and billing) an answer whose
		// client hung up (clientWatch). As for nginx and hyper's default,
		// a FIN is a hang-up here: an LLM client that half-closes after
		// its request is not worth a generation nobody may read.
		rs.hangup = sock.Hangups(rs.pc.Fast.Conn(), 0)
	}
	return b.llmAttempts(rs, r, rb, t, x)
}

// llmBegin starts an LLM request of route type rt (0: none for its path):
// its state, and its body read whole (it is edited and translated, and sent
// again on failover). ok is false when the request was answered, with
// status.
func (b *bind) llmBegin(rs *requestState, rt provider.RouteType) (x *llmExchange, status int, ok bool) {
	fctx := rs.pc.Fast
	req := &fctx.Request
	x = llmExchanges.Get().(*llmExchange)
	rs.llm = x
	x.start, x.fctx, x.rt = rs.start, fctx, rt
	if x.rt == 0 {
		return x, b.llmClientError(x, fasthttp.StatusNotFound, "no LLM route type for this path"), false
	}
	if clientFormat(x.rt) != convert.FormatUnknown && !req.Header.IsPost() {
		status := b.llmClientError(x, fasthttp.StatusMethodNotAllowed, "method not allowed")
		fctx.Response.Header.Set("Allow", "POST")
		return x, status, false
	}
	if status, ok := b.readLLMBody(rs, x); !ok {
		return x, x.inClientFormat(status), false
	}
	if len(req.Header.ContentEncoding()) > 0 {
		if status, ok := decodeLLMBody(rs, x); !ok {
			return x, x.inClientFormat(status), false
		}
	}
	return x, 0, true
}

// inClientFormat rewrites the text error the shared body reading answered
// (413, 415, 400, 408, 500) as an error in the client's format (errorFormat),
// as llmClientError writes them, keeping its status and headers (a
// Connection: close among them). It returns status.
func (x *llmExchange) inClientFormat(status int) int {
	resp := &x.fctx.Response
	if status < 400 || !bytes.HasPrefix(resp.Header.ContentType(), []byte("text/plain")) {
		return status
	}
	msg := bytes.TrimSuffix(resp.Body(), []byte("\n"))
	x.out = convert.AppendError(x.out[:0], errorFormat(x.rt, &x.fctx.Request.Header), status, string(msg))
	resp.Header.SetContentType("application/json")
	resp.SetBody(x.out) // a copy, as in llmClientError
	return status
}

// decodeLLMBody decodes a request body sent with a Content-Encoding (some
// clients compress large prompts), within the buffer limit the encoded
// body was held to: the gateway reads and edits the text, and the provider
// gets it as text (llmAttempts drops the field). An unknown or stacked
// coding is 415, a body past the limit once decoded 413, one that does not
// decode 400.
func decodeLLMBody(rs *requestState, x *llmExchange) (int, bool) {
	fctx := rs.pc.Fast
	c, err := coding.Parse(fctx.Request.Header.ContentEncoding())
	if err != nil {
		return respondErrorClose(fctx, fasthttp.StatusUnsupportedMediaType, "unsupported content encoding"), false
	}
	if c == coding.Identity {
		return 0, true
	}
	out, err := coding.Decode(x.retarget[:0], x.client, c, rs.bind.frontend.maxBufferSize)
	switch {
	case errors.Is(err, coding.ErrTooLarge):
		return respondErrorClose(fctx, fasthttp.StatusRequestEntityTooLarge, "request body too large"), false
	case err != nil:
		return respondError(fctx, fasthttp.StatusBadRequest, "request body is not valid "+c.String()), false
	}
	x.client, x.retarget = out, x.client[:0]
	return 0, true
}

// llmAttempts sends a begun LLM request to t's providers in turn, until one
// answers or none is left.
func (b *bind) llmAttempts(rs *requestState, r *route, rb *routeBackend, t *llmTarget, x *llmExchange) int {
	fctx := rs.pc.Fast
	req := &fctx.Request
	x.target = t
	cf := clientFormat(x.rt)
	fields := requestFields(&req.Header)
	if fields&fieldBadName != 0 {
		return respondErrorClose(fctx, fasthttp.StatusBadRequest, "invalid header field name")
	}
	if fields&fieldExpect != 0 && !onlyContinueExpected(&req.Header) {
		return respondErrorClose(fctx, fasthttp.StatusExpectationFailed, "unsupported expectation")
	}
	// The route's part of the upstream head, once: hop-by-hop fields go,
	// X-Forwarded-* and the backend's header policies apply. Each attempt
	// starts again from this head, so one provider's credentials never
	// reach another.
	// (It fails only on backendAuth secrets: an ai backend's are its
	// providers', each attempt's.)
	_ = b.prepareRequest(rs, rb, nil, false, fields, false)
	policy.DelRequestHeader(&req.Header, headerAcceptEncoding) // the gateway reads the answer
	// Content-Encoding is almost never there: a look first costs nothing,
	// a Del normalises its name and walks every header.
	if len(req.Header.ContentEncoding()) > 0 {
		policy.DelRequestHeader(&req.Header, headerContentEncoding)
	}
	if t.set.Len() > 1 {
		// Only a second attempt needs the head back as it is now.
		if x.saved == nil {
			x.saved = new(fasthttp.RequestHeader)
		}
		req.Header.CopyTo(x.saved)
	}
	x.uri = append(x.uri[:0], req.Header.RequestURI()...)
	x.path = append(x.path[:0], rs.pc.Path...)
	rs.pc.Path = x.path

	var deadline time.Time
	if r.timeout > 0 {
		deadline = time.Now().Add(r.timeout - (monoNow() - rs.start))
	}
	perAttempt := r.backendTimeout
	if rb.requestTimeout > 0 && (perAttempt == 0 || rb.requestTimeout < perAttempt) {
		perAttempt = rb.requestTimeout
	}

	var in *celrules.Input
	// localRateLimit admitted the request in its place among the route's
	// policies (runChain), by its requests buckets; its tokens buckets are
	// checked here, once the prompt (and its estimate) is known.
	admitted := !rs.limited || !r.limiter.HasTokenBuckets()
	// jsonBody: the body is a JSON request the ai policy edits (chat
	// formats, embeddings, token counts); passthrough and models go as
	// they came.
	jsonBody := cf != convert.FormatUnknown || x.rt == provider.Embeddings || x.rt == provider.AnthropicTokenCount
	it := t.set.Attempts(rand.Uint64())
	lastStatus := 0
	var lastErr error
	haveResp := false // x.upResp holds a provider's error answer
	early := false    // x.early holds why a provider's stream failed before its answer
	var lastPolicy *aipolicy.Policy
	var lastBody []byte
	denied := false // a provider was skipped: its model's authorization refused
	sent := 0       // requests sent to providers
	for attempt := 0; ; attempt++ {
		prov, member, ok := it.Next()
		if !ok {
			break
		}
		if attempt > 0 {
			// The head as before the last attempt's credentials: the
			// expressions read it again.
			x.saved.CopyTo(&req.Header)
			rs.pc.ExprHead = nil
			if x.upResp != nil {
				x.upResp.Reset()
			}
			haveResp = false
		}
		x.prov = prov
		if rules := t.targetAuthz[prov]; rules != nil {
			if in == nil {
				v := celrules.LiveInput(&rs.pc)
				in = &v
			}
			if !rules.Allowed(in) {
				denied = true
				continue
			}
		}

		// The ai policy edits the client's body; a guard may refuse it.
		// Providers that share the policy share its result: the remote
		// guards are asked once per client request, not per attempt.
		cur := x.client
		if m, ok := t.targetModel[prov]; ok {
			cur = x.retarget1(m)
		}
		validated := false // cur is the ai policy's output: valid JSON
		if prov.policy != nil && prov.policy == lastPolicy && len(t.targetModel) == 0 {
			cur, validated = lastBody, jsonBody
		} else if prov.policy != nil {
			if prov.policy.NeedsCEL() && in == nil {
				v := celrules.LiveInput(&rs.pc)
				in = &v
			}
			if jsonBody {
				// (a non-chat body, FormatUnknown, gets the field edits only)
				out, status, done := b.llmPolicyRequest(rs, x, prov.policy, cur, cf, &in, deadline)
				if done {
					// Refused before the model was read: the log
					// still names the model asked for, and the
					// metrics count the refusal.
					x.reqModel = append(x.reqModel[:0], aipolicy.Model(cur)...)
					if x.errType == "" {
						x.errType = "invalid_request"
					}
					b.llmComplete(rs, x)
					return status
				}
				if len(out) > 0 && (len(cur) == 0 || &out[0] != &cur[0]) {
					x.edited = out
				}
				cur, validated = out, true
			}
			lastPolicy, lastBody = prov.policy, cur
		}

		// The model: the provider's fixed one, else the client's through
		// the aliases.
		model := ""
		var head *convert.Head
		if jsonBody {
			// One walk over the body's top level serves the model here
			// and the head convert.Request needs (none when the ai
			// policy wrote the body: it reports the members it wrote);
			// a body it refuses (a member of the wrong type) is left for
			// Request to answer, its model read leniently.
			var h convert.Head
			var err error
			if validated {
				h, err = headOfMembers(cur, x.members)
			} else {
				h, err = convert.ReadHead(cur)
			}
			if err == nil {
				x.head = h
				head = &x.head
				model = h.Model()
			} else {
				model = aipolicy.Model(cur)
			}
			x.reqModel = append(x.reqModel[:0], model...)
			if prov.policy != nil {
				if m, ok := prov.policy.Alias(model); ok {
					model = m
				}
			}
		}
		if m := prov.p.Model(); m != "" {
			model = m
		}

		if !admitted {
			var estimate int64
			if prov.tokenize && cf != convert.FormatUnknown {
				var n int
				n, x.scratch = aipolicy.PromptTokens(x.scratch, cur, cf, tokens.EncodingFor(model))
				estimate = int64(n)
			}
			r.limiter.AdmitTokens(&rs.limit, estimate)
			admitted = true
			if !rs.limit.Allowed {
				x.errType = "rate_limited"
				b.llmComplete(rs, x) // in the metrics as a failure
				return x.rateLimited(&rs.limit)
			}
		}

		pf, served := prov.p.Format(x.rt, model)
		if !served {
			lastStatus = fasthttp.StatusNotFound
			lastErr = errors.New(prov.p.Kind() + " does not serve " + x.rt.String() + " requests")
			continue
		}
		body := cur
		x.respModel = x.respModel[:0] // (an attempt before may have answered)
		if cf != convert.FormatUnknown && pf != convert.FormatUnknown {
			sent, info, err := convert.Request(x.sent[:0], cf, pf, cur, &convert.Options{Model: model, StreamUsage: true, Head: head})
			if err != nil {
				var ce *convert.Error
				if errors.As(err, &ce) {
					return b.llmClientError(x, ce.Status, ce.Message)
				}
				return b.llmClientError(x, fasthttp.StatusBadRequest, err.Error())
			}
			x.sent, x.info = sent, info
			x.info.Mask = prov.mask
			body = sent
			if prov.policy != nil {
				out, err := prov.policy.Final(x.scratch[:0], body, in)
				if err != nil {
					return b.llmClientError(x, fasthttp.StatusBadRequest, err.Error())
				}
				if len(out) > 0 && (len(body) == 0 || &out[0] != &body[0]) {
					x.scratch = out
				}
				body = out
			}
			if prov.cache != nil && promptcache.Supports(pf, model) {
				out, err := prov.cache.Apply(x.cached[:0], body, pf)
				if err != nil {
					return b.llmClientError(x, fasthttp.StatusBadRequest, err.Error())
				}
				if len(out) > 0 && (len(body) == 0 || &out[0] != &body[0]) {
					x.cached = out
				}
				body = out
			}
			x.model = append(x.model[:0], x.info.Model...)
		} else {
			x.info = convert.RequestInfo{Client: cf, Provider: pf, Model: model}
			x.model = append(x.model[:0], model...)
			if jsonBody && model != "" && (model != string(x.reqModel) || head != nil && head.RepeatsModel()) {
				// An alias or the provider's model, in a body that is
				// not translated; or the model, once, in a body that
				// repeats it (convert.Request's rule).
				x.scratch = llm.AppendString(x.scratch[:0], model)
				out, err := llm.SetMember(x.sent[:0], body, "model", x.scratch)
				if err != nil {
					return b.llmClientError(x, fasthttp.StatusBadRequest, aipolicy.ErrNotObject.Error())
				}
				x.sent, body = out, out
			}
		}
		if len(body) > 0 {
			body = prov.p.PrepareBody(x.out[:0], body, x.rt)
		}

		// The upstream request: the provider's target, host, body and
		// credentials.
		uri := prov.p.AppendPath(rs.pc.Scratch(), x.rt, string(x.model), x.info.Stream, x.uri)
		req.SetRequestURIBytes(uri)
		rs.pc.KeepScratch(uri)
		req.Header.SetHostBytes(prov.host)
		req.UseHostHeader = true
		if len(body) > 0 || req.Header.IsPost() {
			req.SetBodyRaw(body)
			if jsonBody {
				// (a passthrough body keeps the client's type: a
				// multipart upload is not JSON)
				req.Header.SetContentType("application/json")
			}
		}
		if prov.passthrough && len(rs.pc.Token) > 0 {
			rs.pc.KeepScratch(prov.passthroughAt.Insert(req, rs.pc.Token, rs.pc.Scratch()))
		}
		// The provider's credentials go upstream alone.
		rs.hideCredentials()
		attemptDeadline := deadline
		if perAttempt > 0 {
			if d := time.Now().Add(perAttempt); attemptDeadline.IsZero() || d.Before(attemptDeadline) {
				attemptDeadline = d
			}
		}
		signs := prov.requestHeaders != nil && prov.p.SignsRequest()
		if signs {
			rs.applyRequestHeaders(prov.requestHeaders)
		}
		var err error
		if prov.p.AuthorizeFetches() {
			ctx, cancel := rs.llmAuthContext(attemptDeadline)
			err = prov.p.Authorize(ctx, req)
			cancel()
		} else {
			err = prov.p.Authorize(context.Background(), req)
		}
		if err != nil {
			rs.upstreamErr = err
			lastStatus, lastErr = fasthttp.StatusBadGateway, fmt.Errorf("%w: %w", errBackendCredentials, err)
			if rs.clientGone() {
				// It stopped waiting for a token: nobody waits for an
				// answer, and the provider is not to blame.
				x.errType = "client_gone"
				break
			}
			t.reportHealth(prov, member, balance.ServerError, 0)
			continue
		}
		if prov.requestHeaders != nil && !signs {
			rs.applyRequestHeaders(prov.requestHeaders)
		}

		if x.upResp == nil {
			x.upResp = fasthttp.AcquireResponse()
		}
		sent++
		early = false // the answer is this provider's now
		span := rs.attempt(req, prov.up.Addr, sent)
		err = prov.up.ExchangeWatched(rs.clientWatch(), req, x.upResp, attemptDeadline)
		if span != nil {
			endAttempt(span, x.upResp.StatusCode(), err)
		}
		failure := backend.Classify(err)
		if err != nil && rs.clientGone() {
			// Nobody waits for an answer: no other provider is asked, and
			// this one's health is not the client's doing.
			rs.upstreamErr = err
			lastStatus, lastErr = failure.Status(), err
			x.errType = "client_gone"
			x.cut = true // the provider had the prompt (chargedTokens)
			break
		}
		status := x.upResp.StatusCode()
		outcome := balance.OutcomeOf(status, failure == backend.FailureConnect, failure == backend.FailureTimeout)
		if failure == backend.FailureProtocol {
			outcome = balance.ServerError
		}
		// An answer another provider could still take over counts as a
		// success only once it is known to be one: a stream read up to
		// its answer's start (providers report overload and their own
		// failures as an error event after a 200 head), a whole answer
		// read and translated.
		x.prime = outcome == balance.Success && it.More() &&
			(deadline.IsZero() || time.Now().Before(deadline))
		if !x.prime {
			t.reportHealth(prov, member, outcome, retryAfter(x.upResp, failure))
		}
		if failure == backend.FailureConnect {
			rb.connectFailed(b.gw.log, err)
		}
		if failure != backend.FailureNone {
			rs.upstreamErr = err
			lastStatus, lastErr = failure.Status(), err
			x.errType = failureType(failure)
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				break
			}
			continue
		}
		if outcome == balance.RateLimited || outcome == balance.ServerError {
			// Another provider may answer; this one's error is the answer
			// only when none does.
			lastStatus, lastErr, haveResp = status, nil, true
			x.errType = strconv.Itoa(status)
			if deadline.IsZero() || time.Now().Before(deadline) {
				continue
			}
			break
		}
		x.errType = ""
		st := b.llmRespond(rs, x)
		if !x.prime {
			return st
		}
		if st != 0 {
			t.reportHealth(prov, member, outcome, 0)
			return st
		}
		// The answer failed before anything of it reached the client (a
		// stream before its first delta, a whole answer that broke): the
		// next provider is asked, unless the failure is the request's own
		// (a 4xx error event).
		x.prime = false
		outcome = balance.OutcomeOf(x.early.status, false, x.early.status == fasthttp.StatusGatewayTimeout)
		if x.early.retryable && outcome == balance.ClientError {
			outcome = balance.ServerError // the provider's failure, not the request's
		}
		t.reportHealth(prov, member, outcome, 0)
		x.errType = x.early.errType
		if outcome == balance.ClientError || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			return b.llmEarlyFailed(rs, x)
		}
		early = true
	}
	if haveResp {
		return b.llmRespond(rs, x)
	}
	if early {
		return b.llmEarlyFailed(rs, x)
	}
	if denied && lastStatus == 0 {
		// No provider was tried: each one's model refused the request.
		return x.routerError(fasthttp.StatusForbidden, "Model authorization denied", "model_authorization_denied")
	}
	{
		msg := "no LLM provider available"
		if lastErr != nil {
			msg = errorMessage(lastErr)
			if lastStatus == fasthttp.StatusNotFound {
				msg = lastErr.Error()
			} else if errors.Is(lastErr, errBackendCredentials) {
				msg = errBackendCredentials.Error() // (the reason is logged)
			}
		}
		if lastStatus == 0 {
			lastStatus = fasthttp.StatusServiceUnavailable
		}
		if x.prov != nil && x.errType == "" {
			x.errType = "unavailable"
		}
		return b.llmFailed(rs, x, lastStatus, msg)
	}
}

// llmPolicyRequest applies pol to the client's body cur (format cf), its
// remote guards bounded by deadline. done reports that the request was
// answered (a rejection, a failed guard, a bad body), with status.
func (b *bind) llmPolicyRequest(rs *requestState, x *llmExchange, pol *aipolicy.Policy, cur []byte, cf convert.Format, in **celrules.Input, deadline time.Time) (out []byte, status int, done bool) {
	var remote *aipolicy.RemoteInput
	if pol.HasRemoteRequestGuards() {
		ctx, cancel := guardContext(deadline)
		defer cancel()
		remote = remoteInput(rs, in, &x.fctx.Request.Header, ctx)
	}
	out, rej, err := pol.RequestMembers(x.edited[:0], cur, cf, *in, remote, &x.members)
	if err != nil {
		if st, ok := b.guardFailure(rs, x, err); ok {
			return nil, st, true
		}
		return nil, b.llmClientError(x, fasthttp.StatusBadRequest, err.Error()), true
	}
	if rej != nil {
		x.guard, x.errType = "rejected", "guardrail_rejected"
		return nil, rej.Write(&x.fctx.Response), true
	}
	if remote != nil {
		x.noteGuard(remote)
	}
	return out, 0, false
}

// headOfMembers reads the head of body from its top-level members as the
// ai policy reported them (aipolicy.RequestMembers).
func headOfMembers(body []byte, members []aipolicy.Member) (convert.Head, error) {
	h := convert.NewHead(body)
	for _, m := range members {
		if err := h.AddMember(body[m.NameStart:m.NameEnd], body[m.ValueStart:m.ValueEnd], m.ValueEnd); err != nil {
			return h, err
		}
	}
	return h, nil
}

// reportHealth reports an attempt's outcome to its provider's health
// (member, backend/llm/balance: a failure evicts it for at least
// retryAfter, an answer brings it back) and shows it in the metrics.
func (t *llmTarget) reportHealth(p *llmProvider, member *balance.Member, o balance.Outcome, retryAfter time.Duration) {
	member.Report(o, retryAfter)
	switch o {
	case balance.Success, balance.ClientError:
		if !p.shownHealthy.Load() {
			t.metrics.SetProviderHealth(t.name, p.p.Name(), true)
			p.shownHealthy.Store(true)
		}
	default:
		p.shownHealthy.Store(false)
		t.metrics.SetProviderHealth(t.name, p.p.Name(), false)
		t.metrics.ProviderEvicted(t.name, p.p.Name())
	}
}

// llmAuthContext bounds the wait for the provider's credentials (a token
// being fetched) by the attempt's deadline, or by a minute, and ends it
// when the client goes away (clientWatch): an HTTP/2 stream reset, an
// HTTP/1.x hang-up for the requests that watch for one. The fetch itself
// is the provider's, bounded on its own, and goes on for other requests.
func (rs *requestState) llmAuthContext(deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		deadline = time.Now().Add(time.Minute)
	}
	if rs.h2 != nil {
		return context.WithDeadline(rs.h2.context(), deadline)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	h := rs.hangup
	if h == nil {
		return ctx, cancel
	}
	h.OnGone(cancel)
	return ctx, func() {
		h.OnGone(nil)
		cancel()
	}
}

// retryAfter reads a provider's Retry-After (seconds) on a 429 or 503.
func retryAfter(resp *fasthttp.Response, f backend.Failure) time.Duration {
	if f != backend.FailureNone || resp.StatusCode() < 400 {
		return 0 // no answer, or one that is not a refusal: no backoff to read
	}
	v := resp.Header.Peek(fasthttp.HeaderRetryAfter)
	if len(v) == 0 {
		return 0
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

func failureType(f backend.Failure) string {
	switch f {
	case backend.FailureConnect:
		return "connect"
	case backend.FailureTimeout:
		return "timeout"
	}
	return "protocol"
}

// llmClientError answers with an error of the gateway's own, in the
// client's format (errorFormat).
func (b *bind) llmClientError(x *llmExchange, status int, msg string) int {
	resp := &x.fctx.Response
	resp.Reset()
	resp.SetStatusCode(status)
	resp.Header.SetContentType("application/json")
	x.out = convert.AppendError(x.out[:0], errorFormat(x.rt, &x.fctx.Request.Header), status, msg)
	// A copy: x goes back to its pool when the request is recorded, before
	// fasthttp writes the response.
	resp.SetBody(x.out)
	return status
}

// rateLimited answers a request the route's rate limit refused (d): its
// 429 and x-ratelimit-*/Retry-After headers (Reject), with the body in the
// client's format, so that its SDK reads a rate-limit error (a text body
// left it with an empty message and type).
func (x *llmExchange) rateLimited(d *ratelimit.Decision) int {
	resp := &x.fctx.Response
	status := d.Reject(resp)
	resp.Header.SetContentType("application/json")
	x.out = convert.AppendRateLimitError(x.out[:0], errorFormat(x.rt, &x.fctx.Request.Header), "tokens", rateLimitMessage(d))
	resp.SetBody(x.out) // a copy, as in llmClientError
	return status
}

// rateLimitMessage is the message of a refusal by decision d.
func rateLimitMessage(d *ratelimit.Decision) string {
	if d.Exceeds {
		return "request exceeds the rate limit's capacity"
	}
	return "rate limit exceeded"
}

// llmRateLimitBody rewrites the body of the refusal localRateLimit answered
// (rs.limit), before an LLM exchange began, as a rate-limit error in the
// client's format for route type rt: the requests buckets refuse on the
// route, ahead of the ai backend (runChain), and a realtime session's
// tokens buckets before it opens (serveRealtime); unit is what the refusing
// buckets count.
func llmRateLimitBody(rs *requestState, rt provider.RouteType, unit string) {
	fctx := rs.pc.Fast
	buf := convert.AppendRateLimitError(rs.pc.Scratch(), errorFormat(rt, &fctx.Request.Header), unit, rateLimitMessage(&rs.limit))
	fctx.Response.Header.SetContentType("application/json")
	fctx.Response.SetBody(buf) // a copy
	rs.pc.KeepScratch(buf)
}

// errorFormat is the format of the gateway's own errors on route type rt
// (0: none for the path): a chat route's client format; OpenAI's for
// embeddings, Anthropic's for its token count; for the rest (models,
// passthrough, no route type), Anthropic's when the client sends
// anthropic-version, as its SDKs always do, else OpenAI's. Clients get
// JSON their SDK reads as a typed error, never text.
func errorFormat(rt provider.RouteType, h *fasthttp.RequestHeader) convert.Format {
	if f := clientFormat(rt); f != convert.FormatUnknown {
		return f
	}
	switch rt {
	case provider.Embeddings:
		return convert.Chat
	case provider.AnthropicTokenCount:
		return convert.Messages
	}
	if len(h.PeekBytes(hdrAnthropicVersion)) > 0 {
		return convert.Messages
	}
	return convert.Chat
}

var hdrAnthropicVersion = []byte("anthropic-version")

// readLLMBody reads the request body whole into x.client, up to
// maxBufferSize (413 beyond).
func (b *bind) readLLMBody(rs *requestState, x *llmExchange) (int, bool) {
	buf, status, ok := readBodyWhole(rs, x.client[:0])
	x.client = buf
	return status, ok
}

// readBodyWhole reads the request body whole, appended to dst, up to
// maxBufferSize: beyond it the request is answered 413 (ok false, with the
// status); a body the client fails to send is answered as clientBodyStatus
// does. The body stays on the request as it was (read: a stream no
// longer); the caller sets what it sends.
func readBodyWhole(rs *requestState, dst []byte) (buf []byte, status int, ok bool) {
	fctx := rs.pc.Fast
	req := &fctx.Request
	max := rs.bind.frontend.maxBufferSize
	if !req.IsBodyStream() {
		if len(req.Body()) > max {
			return dst, respondErrorClose(fctx, fasthttp.StatusRequestEntityTooLarge, "request body too large"), false
		}
		return append(dst, req.Body()...), 0, true
	}
	if n := req.Header.ContentLength(); n > max {
		return dst, respondErrorClose(fctx, fasthttp.StatusRequestEntityTooLarge, "request body too large"), false
	}
	rs.guardBody()
	// The client's body, or what a policy (extProc) made of it.
	src := req.BodyStream()
	buf = dst
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if len(buf) > max {
			return buf[:0], respondErrorClose(fctx, fasthttp.StatusRequestEntityTooLarge, "request body too large"), false
		}
		if err == io.EOF {
			return buf, 0, true
		}
		if err != nil {
			rs.upstreamErr = err
			if rs.body.err == nil {
				// Not the client's failure: a policy's processing of the body.
				return buf[:0], respondErrorClose(fctx, fasthttp.StatusInternalServerError, "request body processing failed"), false
			}
			return buf[:0], clientBodyStatus(fctx, err), false
		}
	}
}

// costUnknown marks an observation without a price.
var costUnknown = math.NaN()

// retarget1 returns the client's body naming model instead (in
// x.retarget), or the body as it is when it names no model or is not an
// object.
func (x *llmExchange) retarget1(model string) []byte {
	x.scratch = llm.AppendString(x.scratch[:0], model)
	out, err := llm.SetMember(x.retarget[:0], x.client, "model", x.scratch)
	if err != nil {
		return x.client
	}
	x.retarget = out
	return out
}

// retargetClient has the client's body name model from now on.
func (x *llmExchange) retargetClient(model string) {
	out := x.retarget1(model)
	if len(out) > 0 && len(x.client) > 0 && &out[0] != &x.client[0] {
		x.client, x.retarget = out, x.client[:0]
	}
}
