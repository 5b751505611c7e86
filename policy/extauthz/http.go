package extauthz

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// httpCheck asks a service over HTTP: the check request has the client's
// method, path (or `path`) and the included headers; a 200 answer allows
// (errNot200).
type httpCheck struct {
	client          *fasthttpClient
	host            string
	path, redirect  cel.Program
	body            cel.Program
	responseHeaders []string
	addHeaders      []headerExpr // sorted by name; :method and :path set those
	metadata        []headerExpr // sorted by name
}

type headerExpr struct {
	name string
	prog cel.Program
}

// fasthttpClient is the connection pool to one service, kept in the lease.
// Checks go through exchange, not the HostClient's Do.
type fasthttpClient struct{ *fasthttp.HostClient }

// Close implements io.Closer for the lease.
func (f *fasthttpClient) Close() error { f.CloseIdleConnections(); return nil }

func newHTTPCheck(cfg *config.ExtAuthzHTTP, o Options) (*httpCheck, error) {
	build := func() (*fasthttpClient, error) {
		return &fasthttpClient{&fasthttp.HostClient{
			Addr:                o.Addr,
			MaxConns:            512,
			MaxIdleConnDuration: 90 * time.Second,
			MaxResponseBodySize: maxAnswerBody,
			// The answer's head, and so the headers copied from it to
			// the request (includeResponseHeaders) or relayed with a
			// refusal, at most policy.MaxServiceHeaderBytes; a larger
			// one is a service that could not decide. (fasthttp's
			// default, 4 KiB, failed an answer with a large token.)
			ReadBufferSize:                policy.MaxServiceHeaderBytes,
			DisableHeaderNamesNormalizing: false,
			NoDefaultUserAgentHeader:      true,
			// Errors without the service's bytes: its answers carry
			// credentials, and errors reach the logs.
			SecureErrorLogMessage: true,
		}}, nil
	}
	var client *fasthttpClient
	if o.Lease != nil {
		client, _ = pool.LoadOrNew(o.Lease, "extauthz-http\x00"+o.Addr, build)
	} else {
		client, _ = build()
	}
	h := &httpCheck{client: client, host: o.Addr, responseHeaders: cfg.IncludeResponseHeaders}
	for i, name := range cfg.IncludeResponseHeaders {
		// Never copied (check): a listed one would be a setting that
		// silently does nothing.
		if routingHeader(name) || policy.ReservedHeader(name) {
			return nil, &policy.FieldError{Field: "protocol.http.includeResponseHeaders[" + strconv.Itoa(i) + "]",
				Msg: name + " is never copied into the request: the gateway sets Host and the hop-by-hop and framing fields itself"}
		}
	}
	var err error
	if cfg.Path != nil {
		if h.path, err = config.CompileValueExpression(string(*cfg.Path), false); err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.path", Msg: err.Error()}
		}
	}
	if cfg.Redirect != nil {
		if h.redirect, err = config.CompileValueExpression(string(*cfg.Redirect), false); err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.redirect", Msg: err.Error()}
		}
	}
	if cfg.Body != nil {
		if h.body, err = config.CompileValueExpression(string(*cfg.Body), false); err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.body", Msg: err.Error()}
		}
	}
	for name, expr := range cfg.Metadata {
		p, err := config.CompileValueExpression(string(expr), false)
		if err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.metadata." + name, Msg: err.Error()}
		}
		h.metadata = append(h.metadata, headerExpr{name: name, prog: p})
	}
	sort.Slice(h.metadata, func(i, j int) bool { return h.metadata[i].name < h.metadata[j].name })
	for name, expr := range cfg.AddRequestHeaders {
		p, err := config.CompileValueExpression(string(expr), false)
		if err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.addRequestHeaders." + name, Msg: err.Error()}
		}
		h.addHeaders = append(h.addHeaders, headerExpr{name: name, prog: p})
	}
	sort.Slice(h.addHeaders, func(i, j int) bool { return h.addHeaders[i].name < h.addHeaders[j].name })
	return h, nil
}

// asked is what a check asks the service about: a request (the client's,
// or the `GET /` that stands for a connection), how expressions see it,
// and the trace the call joins.
type asked struct {
	req    *fasthttp.Request
	scheme []byte
	in     *celrules.Input
	trace  policy.Trace
}

func (h *httpCheck) check(ctx context.Context, p *ExtAuthz, c *policy.Ctx) (*decision, error) {
	in := celrules.LiveInput(c)
	return h.ask(ctx, p, &asked{req: &c.Fast.Request, scheme: c.Scheme, in: &in, trace: c.Trace})
}

// ask sends the check request for a and reads the service's answer.
func (h *httpCheck) ask(ctx context.Context, p *ExtAuthz, a *asked) (*decision, error) {
	areq := fasthttp.AcquireRequest()
	aresp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(areq)
	defer fasthttp.ReleaseResponse(aresp)
	req := a.req
	target := string(req.Header.RequestURI())
	if h.path != nil {
		s, ok := evalString(h.path, a.in)
		if !ok || !policy.ValidOriginForm(s) {
			return nil, &expressionError{errors.New("protocol.http.path did not give a path")}
		}
		target = s
	}
	areq.Header.SetMethodBytes(req.Header.Method())
	areq.SetRequestURI(target)
	areq.Header.SetHost(h.host)
	for name, value := range requestHeaders(req, a.scheme, p.include, false) {
		if name[0] == ':' || equalFold(name, "host") || equalFold(name, "content-length") {
			continue
		}
		areq.Header.Set(name, value)
	}
	for _, ah := range h.addHeaders {
		v, ok := evalString(ah.prog, a.in)
		switch {
		case !ok:
		case ah.name == ":method":
			if policy.ValidHeaderName(v) { // a method is a token
				areq.Header.SetMethod(v)
			}
		case ah.name == ":path":
			if policy.ValidOriginForm(v) {
				areq.SetRequestURI(v)
			}
		case ah.name == ":authority":
			if v != "" && policy.ValidHeader("host", v) {
				areq.Header.SetHost(v)
			}
		case policy.ValidHeader(ah.name, v):
			areq.Header.Set(ah.name, v)
		}
	}
	if b, ok := bodyOf(ctx); ok && h.body == nil {
		areq.SetBody(b.body)
		if b.partial {
			areq.Header.Set("X-Envoy-Auth-Partial-Body", "true")
		} else if p.body != nil {
			areq.Header.Set("X-Envoy-Auth-Partial-Body", "false")
		}
	}
	if h.body != nil {
		v, err := celrules.EvalLLM(h.body, a.in, nil)
		if err != nil {
			return nil, &expressionError{fmt.Errorf("protocol.http.body: %v", err)}
		}
		areq.SetBody([]byte(celrules.Text(v)))
	}
	deadline, _ := ctx.Deadline()
	call := a.trace.StartHTTP(policy.KindExtAuthz, areq, h.host)
	err := logline.WithoutPeerBytes(h.client.exchange(areq, aresp, deadline))
	call.EndHTTP(aresp.StatusCode(), err)
	if err != nil {
		return nil, err
	}
	status := aresp.StatusCode()
	if status != fasthttp.StatusOK && status >= 200 && status < 300 {
		return nil, errNot200{status}
	}
	d := &decision{}
	if status == fasthttp.StatusOK {
		for _, name := range h.responseHeaders {
			if routingHeader(name) || policy.ReservedHeader(name) {
				p.log.Debug("extAuthz: the service's routing or hop-by-hop header not copied to the request", zap.String("header", name))
				continue
			}
			if v := aresp.Header.Peek(name); v != nil {
				d.setHeaders = append(d.setHeaders, [2]string{name, string(v)})
			}
		}
		if len(h.metadata) > 0 {
			d.metadata = h.evalMetadata(a.in, aresp)
		}
		return d, nil
	}
	d.deny = true
	if (status == 401 || status == 403) && h.redirect != nil {
		to, ok := evalString(h.redirect, a.in)
		if !ok || !policy.ValidHeader("Location", to) {
			return nil, fmt.Errorf("protocol.http.redirect did not give a location")
		}
		d.status, d.headers = fasthttp.StatusFound, [][2]string{{"Location", to}}
		return d, nil
	}
	// The service's refusal, as it answered.
	d.status, d.body = status, append([]byte(nil), aresp.Body()...)
	for k, v := range aresp.Header.All() {
		if !isHopByHop(k) {
			d.headers = append(d.headers, [2]string{string(k), string(v)})
		}
	}
	return d, nil
}

// errNot200 is the error of an HTTP check answered with a 2xx status other
// than 200. Only 200 allows (the protocol's rule, and Envoy's), and the
// answer is not a refusal either: relayed, a 201 or a 204 would tell the
// client its request succeeded when it never reached the backend. It is a
// service that could not decide, handled by failureMode.
type errNot200 struct{ status int }

func (e errNot200) Error() string {
	return "the authorization service answered " + strconv.Itoa(e.status) + ", not 200"
}

// evalMetadata computes metadata with `response` the service's answer; a
// value that fails is left out.
func (h *httpCheck) evalMetadata(req *celrules.Input, aresp *fasthttp.Response) map[string]any {
	headers := map[string]any{}
	for k, v := range aresp.Header.All() {
		name := strings.ToLower(string(k))
		if _, seen := headers[name]; !seen {
			headers[name] = string(v)
		}
	}
	in := *req // response set on a copy: the caller's input goes on without it
	in.Response = map[string]any{"code": int64(aresp.StatusCode()), "headers": headers, "body": string(aresp.Body())}
	out := make(map[string]any, len(h.metadata))
	for _, m := range h.metadata {
		v, err := celrules.EvalLLM(m.prog, &in, nil)
		if err != nil {
			continue
		}
		if native := celrules.JSONValue(v); native != nil {
			out[m.name] = wholeNumbers(native)
		}
	}
	return out
}
