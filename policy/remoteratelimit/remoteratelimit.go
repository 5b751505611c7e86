// Package remoteratelimit owns the remoteRateLimit policy: each request
// asks a rate limit service speaking Envoy's envoy.service.ratelimit.v3
// protocol whether its descriptors are over their limits, so a limit holds
// across every gateway replica that asks the same service. The connection
// is runtime state kept across reloads (pool.Lease).
package remoteratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// DefaultTimeout bounds one question to the service.
const DefaultTimeout = 2 * time.Second

// Options are what New needs beyond the config.
type Options struct {
	Addr    string // the service's "host:port"
	Lease   *pool.Lease
	Logger  *zap.Logger
	Timeout time.Duration // 0 is DefaultTimeout
}

// RemoteRateLimit is the compiled policy; immutable and safe for
// concurrent use. Over the limit: 429 `rate limit exceeded` with the
// service's response headers. A service that cannot answer: 500 (failClosed,
// the default) or the request passes (failOpen).
type RemoteRateLimit struct {
	conn        *conn
	addr        string // the service's host:port, for the calls' spans
	domain      string
	descriptors []descriptor
	failOpen    bool
	timeout     time.Duration
	log         *zap.Logger
	// checkLog and chargeLog throttle the lines about a service that
	// fails questions and token charges, sizeLog those about one whose
	// headers exceed policy.MaxServiceHeaderBytes; now is their clock.
	checkLog, chargeLog, sizeLog logline.Throttle
	now                          func() time.Time
}

type descriptor struct {
	entries []entry
	cost    cel.Program // nil: 1 (requests), llm.totalTokens (tokens)
	limit   cel.Program // limitOverride; nil: the service's own limit
	tokens  bool        // counts LLM tokens, once known
}

type entry struct {
	key  string
	prog cel.Program
}

// conn is a client connection to one service, kept in the lease.
type conn struct {
	cc     *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
}

// Close implements io.Closer for the lease.
func (c *conn) Close() error { return c.cc.Close() }

var (
	contentTypeText = []byte("text/plain; charset=utf-8")
	bodyLimited     = []byte("rate limit exceeded\n")
	bodyFailed      = []byte("rate limit service unavailable\n")
)

// New compiles the policy. Errors are *policy.FieldError naming the field
// below remoteRateLimit.
func New(cfg *config.RemoteRateLimit, o Options) (*RemoteRateLimit, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	p := &RemoteRateLimit{addr: o.Addr, domain: cfg.Domain, failOpen: cfg.FailOpen(), timeout: o.Timeout, log: o.Logger, now: time.Now,
		checkLog: logline.Throttle{Every: logEvery}, chargeLog: logline.Throttle{Every: logEvery}}
	for i, d := range cfg.Descriptors {
		field := "descriptors[" + strconv.Itoa(i) + "]"
		cd := descriptor{tokens: d.Type == "tokens"}
		for j, e := range d.Entries {
			prog, err := config.CompileValueExpression(string(e.Value), false)
			if err != nil {
				return nil, &policy.FieldError{Field: field + ".entries[" + strconv.Itoa(j) + "].value", Msg: err.Error()}
			}
			cd.entries = append(cd.entries, entry{key: e.Key, prog: prog})
		}
		if d.Cost != nil {
			var prog cel.Program
			var err error
			if cd.tokens {
				var tp *config.TelemetryProgram
				if tp, err = config.CompileTelemetryExpression(string(*d.Cost), false); err == nil {
					prog = tp.Program
				}
			} else {
				prog, err = config.CompileValueExpression(string(*d.Cost), false)
			}
			if err != nil {
				return nil, &policy.FieldError{Field: field + ".cost", Msg: err.Error()}
			}
			cd.cost = prog
		}
		if d.LimitOverride != nil {
			prog, err := config.CompileValueExpression(string(*d.LimitOverride), false)
			if err != nil {
				return nil, &policy.FieldError{Field: field + ".limitOverride", Msg: err.Error()}
			}
			cd.limit = prog
		}
		p.descriptors = append(p.descriptors, cd)
	}
	dial := func() (*conn, error) {
		cc, err := grpc.NewClient("passthrough:///"+o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), policy.GRPCReconnect)
		if err != nil {
			return nil, err
		}
		return &conn{cc: cc, client: rlsv3.NewRateLimitServiceClient(cc)}, nil
	}
	var err error
	if o.Lease != nil {
		p.conn, err = pool.LoadOrNew(o.Lease, "ratelimit-grpc\x00"+o.Addr, dial)
	} else {
		p.conn, err = dial()
	}
	if err != nil {
		return nil, &policy.FieldError{Msg: fmt.Sprintf("cannot set up a gRPC client for %s: %v", o.Addr, err)}
	}
	return p, nil
}

// OnRequest asks the service and answers 429 when over the limit.
func (p *RemoteRateLimit) OnRequest(c *policy.Ctx) policy.Result {
	req := &rlsv3.RateLimitRequest{Domain: p.domain}
	in := celrules.LiveInput(c)
	var tokens []tokenDescriptor
	for i := range p.descriptors {
		d := &p.descriptors[i]
		if rd, ok := d.build(&in); ok {
			req.Descriptors = append(req.Descriptors, rd)
			if d.tokens {
				tokens = append(tokens, tokenDescriptor{rd, d.cost})
			}
		}
	}
	if len(tokens) > 0 {
		// The tokens count once the answer is complete: charged then, the
		// costs evaluated then (the request is still there; its trace is
		// copied, the charge's call outliving it).
		tr := c.Trace
		c.TokenCharges = append(c.TokenCharges, func(u policy.TokenUsage) { p.startCharge(c, tr, tokens, u) })
	}
	if len(req.Descriptors) == 0 {
		return policy.Continue // nothing to count this request under
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	ctx, call := c.Trace.StartGRPC(ctx, policy.KindRemoteRateLimit, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, p.addr)
	resp, err := p.conn.client.ShouldRateLimit(ctx, req)
	err = logline.BoundError(err)
	call.EndGRPC(err)
	if err != nil {
		if p.failOpen {
			p.warn(&p.checkLog, "remoteRateLimit: the rate limit service did not answer; allowing (failOpen)", err)
			return policy.Continue
		}
		p.warn(&p.checkLog, "remoteRateLimit: the rate limit service did not answer; refusing (failClosed)", err)
		return p.answer(c, http.StatusInternalServerError, bodyFailed, nil)
	}
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		return p.answer(c, http.StatusTooManyRequests, bodyLimited, resp)
	}
	// What the service wants on the response, and the x-ratelimit-*
	// headers its statuses give, go on whatever answers the request
	// (OnResponse), as agentgateway's apply does.
	for _, e := range p.responseHeaders(resp) {
		c.KeepResponseEdit(p, e)
	}
	var budget policy.HeaderBudget
	for _, h := range resp.GetRequestHeadersToAdd() {
		if key := h.GetKey(); key != "" && key[0] == ':' || strings.EqualFold(key, "host") {
			// The upstream's authority is the route's: Envoy refuses
			// routing header mutations from external services by
			// default.
			p.log.Debug("remoteRateLimit: the service's routing header ignored", zap.String("header", key))
			continue
		}
		if policy.ValidHeader(h.GetKey(), h.GetValue()) && !policy.ReservedHeader(h.GetKey()) && p.fits(&budget, h) {
			// Every value replaced (agentgateway's insert): fasthttp's Set
			// replaces only the first, and the client's second copy of the
			// header would reach the backend beside the service's.
			policy.SetRequestHeader(&c.Fast.Request.Header, h.GetKey(), h.GetValue())
		}
	}
	return policy.Continue
}

// OnResponse adds to the response of an allowed request the headers the
// service asked for (OnRequest).
func (p *RemoteRateLimit) OnResponse(c *policy.Ctx) { c.ApplyResponseEdits(p) }

// tokenDescriptor is a token descriptor a request was admitted under, and
// its cost (nil: the exchange's total tokens).
type tokenDescriptor struct {
	d    *rlcommon.RateLimitDescriptor
	cost cel.Program
}

// startCharge counts an exchange's tokens against the token descriptors
// its request was admitted under, in the background (the answer has gone
// out): each the exchange's total, or its cost over the request and llm.
// The call's span begins now, while the request's is still open, and may
// end after it.
func (p *RemoteRateLimit) startCharge(c *policy.Ctx, tr policy.Trace, descs []tokenDescriptor, u policy.TokenUsage) {
	req := &rlsv3.RateLimitRequest{Domain: p.domain}
	var total int64
	var llm map[string]any
	var in *celrules.Input
	for _, t := range descs {
		n := u.Total
		if t.cost != nil {
			if llm == nil {
				llm = u.LLM()
				v := celrules.LiveInput(c)
				in = &v
			}
			var ok bool
			if n, ok = hits(celrules.EvalTelemetry(t.cost, in, llm)); !ok {
				continue
			}
		}
		if n <= 0 {
			continue
		}
		total += n
		req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{Entries: t.d.Entries, Limit: t.d.Limit, HitsAddend: wrapperspb.UInt64(uint64(n))})
	}
	if len(req.Descriptors) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	ctx, call := tr.StartGRPC(ctx, policy.KindRemoteRateLimit, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, p.addr)
	if call.Recording() {
		call.SetAttributes(attribute.Int64("gateway.ratelimit.tokens", total))
	}
	go func() {
		defer cancel()
		_, err := p.conn.client.ShouldRateLimit(ctx, req)
		err = logline.BoundError(err)
		call.EndGRPC(err)
		if err != nil {
			p.warn(&p.chargeLog, "remoteRateLimit: could not charge tokens to the rate limit service", err)
		}
	}()
}

// logEvery bounds the lines about a service that fails: an outage fails
// every request (each in the access log already, with its 500 or as let
// through by failOpen), and one line per request said nothing more.
const logEvery = 10 * time.Second

// warn logs msg and err, or has t count them if a line went out within
// logEvery.
func (p *RemoteRateLimit) warn(t *logline.Throttle, msg string, err error) {
	if dropped, ok := t.Allow(p.now()); ok {
		p.log.Warn(msg, zap.Error(err), logline.DroppedField(dropped))
	}
}

// hits reads a cost's value: a whole, non-negative number of hits.
func hits(v ref.Val, err error) (int64, bool) {
	if err != nil {
		return 0, false
	}
	var n int64
	switch x := v.(type) {
	case types.Int:
		n = int64(x)
	case types.Uint:
		n = int64(x)
	case types.Double:
		n = int64(x)
	default:
		return 0, false
	}
	return n, n >= 0
}

// build evaluates a descriptor; one whose entry or cost fails is skipped.
// A token descriptor is asked with no hits: is its limit already spent?
func (d *descriptor) build(in *celrules.Input) (*rlcommon.RateLimitDescriptor, bool) {
	out := &rlcommon.RateLimitDescriptor{}
	for _, e := range d.entries {
		v, err := celrules.EvalLLM(e.prog, in, nil)
		if err != nil {
			return nil, false
		}
		// The value may be the client's bytes (a header): made UTF-8, as a
		// protobuf string must be, or grpc-go would refuse to send the
		// request and the service would never be asked.
		out.Entries = append(out.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: e.key, Value: policy.ProtoString(celrules.Text(v))})
	}
	if d.limit != nil {
		v, err := celrules.EvalLLM(d.limit, in, nil)
		if err != nil {
			return nil, false
		}
		o, ok := limitOverride(v)
		if !ok {
			return nil, false
		}
		out.Limit = o
	}
	if d.tokens {
		out.HitsAddend = wrapperspb.UInt64(0)
		return out, true
	}
	if d.cost != nil {
		n, ok := hits(celrules.EvalLLM(d.cost, in, nil))
		if !ok {
			return nil, false
		}
		out.HitsAddend = wrapperspb.UInt64(uint64(n))
	}
	return out, true
}

// limitUnits are limitOverride's units.
var limitUnits = map[string]typev3.RateLimitUnit{
	"second": typev3.RateLimitUnit_SECOND, "minute": typev3.RateLimitUnit_MINUTE, "hour": typev3.RateLimitUnit_HOUR,
	"day": typev3.RateLimitUnit_DAY, "month": typev3.RateLimitUnit_MONTH,
	"year": typev3.RateLimitUnit_YEAR,
}

// limitOverride reads a limitOverride value: a map of unit (a name of
// limitUnits, any case) and requestsPerUnit (a whole number that fits in
// 32 bits).
func limitOverride(v ref.Val) (*rlcommon.RateLimitDescriptor_RateLimitOverride, bool) {
	native, err := v.ConvertToNative(reflect.TypeFor[map[string]any]())
	if err != nil {
		return nil, false
	}
	m := native.(map[string]any)
	if len(m) != 2 {
		return nil, false
	}
	unitName, _ := m["unit"].(string)
	unit, ok := limitUnits[strings.ToLower(unitName)]
	if !ok {
		return nil, false
	}
	var n float64
	switch x := m["requestsPerUnit"].(type) {
	case int64:
		n = float64(x)
	case uint64:
		n = float64(x)
	case float64:
		n = x
	default:
		return nil, false
	}
	if n < 0 || n > math.MaxUint32 || n != math.Trunc(n) {
		return nil, false
	}
	return &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(n), Unit: unit}, true
}

// answer answers the request with status and body; a refusal (resp not
// nil) has the service's response headers and x-ratelimit-* headers, and
// its raw_body when it sent one.
func (p *RemoteRateLimit) answer(c *policy.Ctx, status int, body []byte, resp *rlsv3.RateLimitResponse) policy.Result {
	r := &c.Fast.Response
	r.Reset()
	r.SetStatusCode(status)
	r.Header.SetContentTypeBytes(contentTypeText)
	for _, e := range p.responseHeaders(resp) {
		e.Apply(&r.Header) // the service's Content-Type wins (Envoy's)
	}
	if raw := resp.GetRawBody(); len(raw) > 0 {
		body = raw
	}
	r.SetBody(body)
	return policy.Done
}

// fits reports whether the service's header h fits in what is left of an
// answer's budget (policy.MaxServiceHeaderBytes); one that does not is
// dropped, as an invalid one is, and said (throttled: sizeLog).
func (p *RemoteRateLimit) fits(b *policy.HeaderBudget, h *corev3.HeaderValue) bool {
	if b.Take(h.GetKey(), h.GetValue()) {
		return true
	}
	p.warn(&p.sizeLog, "remoteRateLimit: the rate limit service's headers exceed 32 KiB; header dropped",
		errors.New("header "+strconv.Quote(logline.BoundValue(h.GetKey()))+" of "+strconv.Itoa(len(h.GetKey())+len(h.GetValue()))+" bytes"))
	return false
}

// Header names of the x-ratelimit-* headers, in fasthttp's canonical form.
const (
	hdrLimit     = "X-Ratelimit-Limit"
	hdrRemaining = "X-Ratelimit-Remaining"
	hdrReset     = "X-Ratelimit-Reset"
)

// responseHeaders are the headers resp puts on the response: the service's
// response_headers_to_add, each replacing every value of its name
// (agentgateway's insert), then, unless the service named one of them,
// x-ratelimit-limit, -remaining and -reset from the descriptor status with
// the fewest requests remaining among those with a current limit (the
// first of equals): its requests per unit, its remaining requests, and the
// whole seconds until it resets; none when no status has a limit. The
// service's headers past policy.MaxServiceHeaderBytes are left out (fits).
func (p *RemoteRateLimit) responseHeaders(resp *rlsv3.RateLimitResponse) []policy.HeaderEdit {
	var out []policy.HeaderEdit
	named := false
	var budget policy.HeaderBudget
	for _, h := range resp.GetResponseHeadersToAdd() {
		if policy.ValidHeader(h.GetKey(), h.GetValue()) && !policy.ReservedHeader(h.GetKey()) && p.fits(&budget, h) {
			out = append(out, policy.HeaderEdit{Name: h.GetKey(), Value: h.GetValue()})
			named = named || strings.EqualFold(h.GetKey(), hdrLimit) || strings.EqualFold(h.GetKey(), hdrRemaining) || strings.EqualFold(h.GetKey(), hdrReset)
		}
	}
	if named {
		return out
	}
	var best *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range resp.GetStatuses() {
		if st.GetCurrentLimit() != nil && (best == nil || st.GetLimitRemaining() < best.GetLimitRemaining()) {
			best = st
		}
	}
	if best == nil {
		return out
	}
	reset := max(best.GetDurationUntilReset().GetSeconds(), 0)
	return append(out,
		policy.HeaderEdit{Name: hdrLimit, Value: strconv.FormatUint(uint64(best.GetCurrentLimit().GetRequestsPerUnit()), 10)},
		policy.HeaderEdit{Name: hdrRemaining, Value: strconv.FormatUint(uint64(best.GetLimitRemaining()), 10)},
		policy.HeaderEdit{Name: hdrReset, Value: strconv.FormatInt(reset, 10)},
	)
}

var (
	_ policy.Request  = (*RemoteRateLimit)(nil)
	_ policy.Response = (*RemoteRateLimit)(nil)
)
