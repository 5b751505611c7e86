package guardrail

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
)

// service is where a guard sends its calls: a connection pool, the Host
// the calls carry, their time limit and answer bound, the policies' header
// changes and the credentials.
type service struct {
	up        *backend.Upstream
	host      string
	timeout   time.Duration
	maxAnswer int
	headers   *policy.HeaderModifier // policies.requestHeaderModifier
	creds     *credentials           // nil: none
	// pools holds the pool when the guard made it itself (Options.Pool
	// nil).
	pools *backend.Pools
}

// serviceTarget is where a service is.
type serviceTarget struct {
	addr string // dialed
	host string // the Host header
	tls  bool
}

// cloudTarget is a cloud service's host on 443 with TLS, or the
// override's address over plain HTTP; either way the calls carry host.
func cloudTarget(host string, opts *Options) serviceTarget {
	if addr, ok := opts.HostOverride[host]; ok {
		return serviceTarget{addr: addr, host: host}
	}
	return serviceTarget{addr: net.JoinHostPort(host, "443"), host: host, tls: true}
}

// newService builds a service for t with the guard's policies (nil: none).
// policiesPath is where errors about the policies point.
func newService(t serviceTarget, pols *config.SimpleBackendPolicies, policiesPath string, opts *Options) (*service, error) {
	s := &service{host: t.host, timeout: opts.timeout(), maxAnswer: opts.maxAnswer()}
	var tcp *config.BackendTCP
	if pols != nil {
		if pols.RequestHeaderModifier != nil {
			h, err := policy.NewHeaderModifier(pols.RequestHeaderModifier)
			if err != nil {
				return nil, policyFieldError(policiesPath+".requestHeaderModifier", err)
			}
			s.headers = h
		}
		if pols.HTTP != nil && pols.HTTP.RequestTimeout != nil && pols.HTTP.RequestTimeout.Duration > 0 {
			s.timeout = pols.HTTP.RequestTimeout.Duration
		}
		tcp = pols.TCP
	}
	var tls backend.UpstreamTLS
	if t.tls {
		host, _, err := net.SplitHostPort(t.addr)
		if err != nil {
			return nil, fieldError(policiesPath, "bad service address "+strconv.Quote(t.addr))
		}
		tls = backend.UpstreamTLS{Enabled: true, ServerName: host}
	}
	if opts.Pool != nil {
		s.up = opts.Pool(t.addr, tls, tcp)
	} else {
		s.pools = backend.NewPools()
		s.up = s.pools.Get(t.addr, ownPoolSettings(tls, tcp))
	}
	return s, nil
}

// ownPoolSettings are the settings of a pool the guard keeps itself: the
// gateway's default dialing, with the tcp policy's connect timeout and
// keepalives (which, as for a backend, replace the keepalive defaults as a
// whole).
func ownPoolSettings(tls backend.UpstreamTLS, tcp *config.BackendTCP) backend.PoolSettings {
	s := backend.PoolSettings{
		Dialing: backend.Dialing{ConnectTimeout: backend.DefaultConnectTimeout, Keepalive: backend.DefaultKeepalive},
		TLS:     tls,
	}
	if tcp == nil {
		return s
	}
	if tcp.ConnectTimeout != nil && tcp.ConnectTimeout.Duration > 0 {
		s.ConnectTimeout = tcp.ConnectTimeout.Duration
	}
	if k := tcp.Keepalives; k != nil {
		if k.Enabled != nil {
			s.Keepalive.Enabled = *k.Enabled
		}
		if k.Time != nil {
			s.Keepalive.Time = k.Time.Duration
		}
		if k.Interval != nil {
			s.Keepalive.Interval = k.Interval.Duration
		}
		if k.Retries != nil {
			s.Keepalive.Retries = *k.Retries
		}
	}
	return s
}

// close closes the idle connections of a pool of the guard's own
// (Retain with nothing to keep).
func (s *service) close() {
	if s.pools != nil {
		s.pools.Retain(nil)
	}
}

// call is one call to a service: a pooled request and response, and the
// answer's body once read.
type call struct {
	req    *fasthttp.Request
	resp   *fasthttp.Response
	body   []byte // the request body being built
	answer []byte // a streamed answer read whole
}

var calls = sync.Pool{New: func() any {
	return &call{req: new(fasthttp.Request), resp: new(fasthttp.Response)}
}}

// newCall starts a POST to path (origin form).
func newCall(path string) *call {
	c := calls.Get().(*call)
	c.req.Header.SetMethod(fasthttp.MethodPost)
	c.req.SetRequestURI(path)
	return c
}

func (c *call) release() {
	if c.resp.IsBodyStream() {
		_ = c.resp.CloseBodyStream()
	}
	c.req.Reset()
	c.resp.Reset()
	if cap(c.body) > maxKeptBuffer {
		c.body = nil
	}
	if cap(c.answer) > maxKeptBuffer {
		c.answer = nil
	}
	c.body, c.answer = c.body[:0], c.answer[:0]
	calls.Put(c)
}

// maxKeptBuffer bounds the buffers a pooled call keeps.
const maxKeptBuffer = 64 << 10

// errAnswerTooLarge is an answer over Options.MaxAnswer.
var errAnswerTooLarge = errors.New("the answer is larger than the guard's bound")

// prepare sets the headers every call carries: the service's Host, and
// JSON as the body's type and the answer's.
func (s *service) prepare(c *call) {
	h := &c.req.Header
	h.SetHost(s.host)
	c.req.UseHostHeader = true
	h.SetContentType("application/json")
	h.Set(fasthttp.HeaderAccept, "application/json")
}

// send sends c's request, prepared and with its body in c.body, and
// returns the answer's body, valid until c is released. The policies'
// header changes and the credentials come last, over what the caller set.
// An answer that is not 2xx is an error.
func (s *service) send(ctx context.Context, c *call, in *Input) ([]byte, error) {
	deadline := time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.headers != nil {
		s.headers.ApplyRequest(&c.req.Header)
	}
	c.req.SetBodyRaw(c.body)
	// The call's span, its traceparent on the request before a signature
	// covers it.
	span := in.Trace.StartHTTP(KindGuardrails, c.req, s.up.Addr)
	if s.creds != nil {
		// Last: a signature covers the final request.
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := s.creds.apply(actx, c.req, in.Token)
		cancel()
		if err != nil {
			span.EndHTTP(0, err)
			return nil, err
		}
	}
	if err := s.up.Exchange(c.req, c.resp, deadline); err != nil {
		span.EndHTTP(0, err)
		return nil, callError(err)
	}
	body, err := c.readAnswer(s.maxAnswer)
	span.EndHTTP(c.resp.StatusCode(), err)
	if err != nil {
		return nil, err
	}
	if status := c.resp.StatusCode(); status < 200 || status > 299 {
		return nil, errors.New("the service answered " + strconv.Itoa(status) + excerpt(body))
	}
	return body, nil
}

// KindGuardrails names guard services' calls in their spans
// (gateway.policy).
const KindGuardrails policy.Kind = "guardrails"

// callError says what failed without the pool's wrapping.
func callError(err error) error {
	switch backend.Classify(err) {
	case backend.FailureConnect:
		return errors.New("cannot connect: " + err.Error())
	case backend.FailureTimeout:
		return errors.New("timed out: " + err.Error())
	}
	return errors.New("the exchange failed: " + err.Error())
}

// readAnswer reads the answer's body, up to limit bytes.
func (c *call) readAnswer(limit int) ([]byte, error) {
	if !c.resp.IsBodyStream() {
		body := c.resp.Body()
		if len(body) > limit {
			return nil, errAnswerTooLarge
		}
		return body, nil
	}
	r := c.resp.BodyStream()
	buf := c.answer[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			c.answer = buf[:0]
			return nil, errAnswerTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			c.answer = buf[:0]
			return nil, errors.New("reading the answer: " + err.Error())
		}
	}
	c.answer = buf
	return buf, nil
}

// maxExcerpt bounds the part of an error answer quoted in an error.
const maxExcerpt = 160

// excerpt is the start of an error answer for the error message (": ..."),
// with control bytes and invalid UTF-8 replaced, so that a log line stays
// one line.
func excerpt(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	out := make([]byte, 0, min(len(body), maxExcerpt)+8)
	out = append(out, ": "...)
	for i := 0; i < len(body); {
		if len(out) >= maxExcerpt {
			return string(append(out, "..."...))
		}
		r, size := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError || r < 0x20 || r == 0x7f {
			out = append(out, ' ')
		} else {
			out = utf8.AppendRune(out, r)
		}
		i += size
	}
	return string(out)
}

// policyFieldError turns a policy constructor's error into a FieldError
// under path.
func policyFieldError(path string, err error) error {
	return decode.Under(path, err)
}
