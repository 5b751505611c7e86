package server

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
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
	settings := c.defaults
	if m.Backend.Backend != "" {
		nb := c.named[m.Backend.Backend]
		if nb == nil {
			// Parse refuses this; a File built in code may still hold it.
			return nil, &decode.FieldError{Path: path + ".backend.backend", Msg: fmt.Sprintf("no backend named %q in the top-level backends", m.Backend.Backend)}
		}
		if nb.Kind != config.BackendHost {
			return nil, &decode.FieldError{Path: path + ".backend.backend", Msg: "mirroring to this backend kind is not supported yet"}
		}
		addr = nb.Host
		if nb.Policies != nil && nb.Policies.BackendTLS != nil {
			// A copy goes as securely as the backend's own requests.
			t, err := compileBackendTLS(nb.Policies.BackendTLS)
			if err != nil {
				return nil, kindError(c.namedPath[nb.Name]+".policies.backendTLS", err)
			}
			settings.TLS = t
		}
	}
	if m.Percentage == nil {
		return nil, &decode.FieldError{Path: path + ".percentage", Msg: "required"}
	}
	up := c.upstream(addr, settings)
	return &mirror{upstream: up, percentage: *m.Percentage}, nil
}

// chosen reports whether this request is one the mirror copies. One whose
// body streams is copied only if its body could be read whole
// (bufferBody); send checks.
func (m *mirror) chosen() bool {
	return m.percentage >= 1 || m.percentage > 0 && rand.Float64() < m.percentage
}

// send copies req to the mirror's backend, unless its body still streams
// beyond mirrorBodyLimit or too many copies are in flight. The copy gets
// the mirror backend's name as Host when that is a hostname and no
// rewrite chose one. A request whose body of unknown length streams is
// copied without it and returned, for the caller to send with the body
// once it ended (launch), or release.
func (m *mirror) send(gw *Gateway, req *fasthttp.Request, hostRewritten bool) *fasthttp.Request {
	if req.IsBodyStream() && req.Header.ContentLength() >= 0 {
		return nil // a declared length beyond the limit (bufferBody)
	}
	cp := fasthttp.AcquireRequest()
	req.CopyTo(cp) // (never a body stream)
	cp.UseHostHeader = true
	if m.upstream.HostName != "" && !hostRewritten {
		cp.Header.SetHostBytes(m.upstream.HostHeader)
	}
	if req.IsBodyStream() {
		return cp
	}
	m.launch(gw, cp)
	return nil
}

// launch sends cp to the mirror's backend on a goroutine of its own, and
// releases it; or releases it at once when too many copies are in flight.
func (m *mirror) launch(gw *Gateway, cp *fasthttp.Request) {
	select {
	case gw.mirrorSlots <- struct{}{}:
	default:
		fasthttp.ReleaseRequest(cp)
		return
	}
	go func() {
		defer func() { <-gw.mirrorSlots }()
		resp := fasthttp.AcquireResponse()
		// Exchange, like every use of an upstream pool, so no fasthttp
		// deadline is left on a pooled connection.
		_ = m.upstream.Exchange(cp, resp, time.Now().Add(mirrorTimeout))
		if resp.IsBodyStream() {
			_ = resp.CloseBodyStream()
		}
		fasthttp.ReleaseResponse(resp)
		fasthttp.ReleaseRequest(cp)
	}()
}

// mirrorBodyLimit is the largest request body that is mirrored.
const mirrorBodyLimit = 1 << 20
