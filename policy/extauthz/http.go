package extauthz

import (
	"context"
	"fmt"
	"sort"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/pool"
)

// httpCheck asks a service over HTTP: the check request has the client's
// method, path (or `path`) and the included headers; a 2xx answer allows.
type httpCheck struct {
	client          *fasthttpClient
	host            string
	path, redirect  cel.Program
	responseHeaders []string
	addHeaders      []headerExpr // sorted by name
}

type headerExpr struct {
	name string
	prog cel.Program
}

// fasthttpClient is the connection pool to one service, kept in the lease.
type fasthttpClient struct{ *fasthttp.HostClient }

// Close implements io.Closer for the lease.
func (f *fasthttpClient) Close() error { f.CloseIdleConnections(); return nil }

func newHTTPCheck(cfg *config.ExtAuthzHTTP, o Options) (*httpCheck, error) {
	build := func() (*fasthttpClient, error) {
		return &fasthttpClient{&fasthttp.HostClient{
			Addr:                          o.Addr,
			MaxConns:                      512,
			MaxIdleConnDuration:           90 * time.Second,
			MaxResponseBodySize:           maxAnswerBody,
			DisableHeaderNamesNormalizing: false,
			NoDefaultUserAgentHeader:      true,
		}}, nil
	}
	var client *fasthttpClient
	if o.Lease != nil {
		client, _ = pool.LoadOrNew(o.Lease, "extauthz-http\x00"+o.Addr, build)
	} else {
		client, _ = build()
	}
	h := &httpCheck{client: client, host: o.Addr, responseHeaders: cfg.IncludeResponseHeaders}
	var err error
	if cfg.Path != nil {
		if h.path, err = config.CompileLLMExpression(string(*cfg.Path)); err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.path", Msg: err.Error()}
		}
	}
	if cfg.Redirect != nil {
		if h.redirect, err = config.CompileLLMExpression(string(*cfg.Redirect)); err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.redirect", Msg: err.Error()}
		}
	}
	for name, expr := range cfg.AddRequestHeaders {
		p, err := config.CompileLLMExpression(string(expr))
		if err != nil {
			return nil, &policy.FieldError{Field: "protocol.http.addRequestHeaders." + name, Msg: err.Error()}
		}
		h.addHeaders = append(h.addHeaders, headerExpr{name: name, prog: p})
	}
	sort.Slice(h.addHeaders, func(i, j int) bool { return h.addHeaders[i].name < h.addHeaders[j].name })
	return h, nil
}

func (h *httpCheck) check(ctx context.Context, p *ExtAuthz, c *policy.Ctx) (done bool, err error) {
	areq := fasthttp.AcquireRequest()
	aresp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(areq)
	defer fasthttp.ReleaseResponse(aresp)
	req := &c.Fast.Request
	target := string(req.Header.RequestURI())
	if h.path != nil {
		s, ok := evalString(h.path, c)
		if !ok || len(s) == 0 || s[0] != '/' {
			return false, fmt.Errorf("protocol.http.path did not give a path")
		}
		target = s
	}
	areq.Header.SetMethodBytes(req.Header.Method())
	areq.SetRequestURI(target)
	areq.Header.SetHost(h.host)
	for name, value := range requestHeaders(c, p.include) {
		if name[0] == ':' || equalFold(name, "host") || equalFold(name, "content-length") {
			continue
		}
		areq.Header.Set(name, value)
	}
	for _, a := range h.addHeaders {
		if v, ok := evalString(a.prog, c); ok && validHeader(a.name, v) {
			areq.Header.Set(a.name, v)
		}
	}
	deadline, _ := ctx.Deadline()
	if err := h.client.DoDeadline(areq, aresp, deadline); err != nil {
		return false, err
	}
	status := aresp.StatusCode()
	if status >= 200 && status < 300 {
		for _, name := range h.responseHeaders {
			if v := aresp.Header.Peek(name); v != nil {
				req.Header.SetBytesV(name, v)
			}
		}
		return false, nil
	}
	resp := &c.Fast.Response
	resp.Reset()
	if (status == 401 || status == 403) && h.redirect != nil {
		to, ok := evalString(h.redirect, c)
		if !ok || !validHeader("Location", to) {
			return false, fmt.Errorf("protocol.http.redirect did not give a location")
		}
		resp.SetStatusCode(fasthttp.StatusFound)
		resp.Header.Set("Location", to)
		return true, nil
	}
	// The service's refusal, as it answered.
	resp.SetStatusCode(status)
	for k, v := range aresp.Header.All() {
		if !isHopByHop(k) {
			resp.Header.AddBytesKV(k, v)
		}
	}
	resp.SetBody(aresp.Body())
	return true, nil
}
