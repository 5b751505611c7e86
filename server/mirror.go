package server

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
)

// mirror sends a copy of a share of a route's requests to another backend and
// discards the answer. Copies are dropped, never queued, when too many are in
// flight, and requests whose bodies are streaming are not mirrored.
type mirror struct {
	upstream   *backend.Upstream
	percentage float64
}

// mirrorTimeout bounds one mirrored request.
const mirrorTimeout = 30 * time.Second

// maxMirrorsInFlight bounds concurrent mirrored requests per gateway.
const maxMirrorsInFlight = 256

func (c *compiler) mirror(path string, m *config.RequestMirror) (*mirror, error) {
	addr := m.Backend.Host
	if m.Backend.Backend != "" {
		nb := c.named[m.Backend.Backend]
		if nb == nil {
			// Parse refuses this; a File built in code may still hold it.
			return nil, fmt.Errorf("%s.backend.backend: no backend named %q in the top-level backends", path, m.Backend.Backend)
		}
		if nb.Kind != config.BackendHost {
			return nil, fmt.Errorf("%s.backend.backend: mirroring to this backend kind is not supported yet", path)
		}
		addr = nb.Host
	}
	if m.Percentage == nil {
		return nil, fmt.Errorf("%s.percentage: required", path)
	}
	up := c.gw.pools.Get(addr, c.defaults)
	c.used[up] = true
	return &mirror{upstream: up, percentage: *m.Percentage}, nil
}

func (m *mirror) maybeSend(gw *Gateway, fctx *fasthttp.RequestCtx) {
	if m.percentage <= 0 || (m.percentage < 1 && rand.Float64() >= m.percentage) {
		return
	}
	if fctx.Request.IsBodyStream() {
		n := fctx.Request.Header.ContentLength()
		if n < 0 || n > mirrorBodyLimit {
			return
		}
		_ = fctx.Request.Body() // buffer it: both the mirror and the backend need it
	}
	select {
	case gw.mirrorSlots <- struct{}{}:
	default:
		return
	}
	req := fasthttp.AcquireRequest()
	fctx.Request.CopyTo(req)
	go func() {
		defer func() { <-gw.mirrorSlots }()
		resp := fasthttp.AcquireResponse()
		resp.SkipBody = false
		// Exchange, like every use of an upstream pool, so no fasthttp
		// deadline is left on a pooled connection.
		_ = m.upstream.Exchange(req, resp, time.Now().Add(mirrorTimeout))
		if resp.IsBodyStream() {
			_ = resp.CloseBodyStream()
		}
		fasthttp.ReleaseResponse(resp)
		fasthttp.ReleaseRequest(req)
	}()
}

// mirrorBodyLimit is the largest request body that is mirrored.
const mirrorBodyLimit = 1 << 20
