package server

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
)

// mirror sends a copy of a share of a route's requests to another backend and
// discards the answer. Copies are dropped, never queued, when too many are in
// flight, and requests whose bodies are streaming are not mirrored.
type mirror struct {
	upstream   *backend.Upstream
	percentage float64
	// headers and timeout are a named backend's requestHeaderModifier
	// and http.requestTimeout (mirrorTimeout at most).
	headers *policy.HeaderModifier
	timeout time.Duration
}

// mirrorTimeout bounds one mirrored request.
const mirrorTimeout = 30 * time.Second

// maxMirrorsInFlight bounds concurrent mirrored requests per gateway.
const maxMirrorsInFlight = 256

func (c *compiler) mirror(path string, m *config.RequestMirror) (*mirror, error) {
	addr := m.Backend.Host
	settings := c.defaults
	out := &mirror{timeout: mirrorTimeout}
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
		if p := nb.Policies; p != nil {
			at := c.namedPath[nb.Name] + ".policies."
			// The copy goes as the backend's own requests do: as securely
			// (backendTLS), with its headers, dialing and timeout. What a
			// copy cannot take is refused rather than left out: a copy
			// without the backend's credentials would only be refused.
			switch {
			case p.BackendAuth != nil:
				return nil, &decode.FieldError{Path: path + ".backend.backend", Msg: fmt.Sprintf("mirroring to backend %q, whose backendAuth (%sbackendAuth) is not applied to mirrored copies yet: mirror to a backend without it", nb.Name, at)}
			case p.RequestRedirect != nil:
				return nil, &decode.FieldError{Path: path + ".backend.backend", Msg: fmt.Sprintf("mirroring to backend %q, whose requestRedirect (%srequestRedirect) would answer the copy instead of sending it", nb.Name, at)}
			}
			if p.BackendTLS != nil {
				t, err := compileBackendTLS(p.BackendTLS)
				if err != nil {
					return nil, kindError(at+"backendTLS", err)
				}
				settings.TLS = t
			}
			if p.TCP != nil {
				settings.Dialing = backendTCPDialing(p.TCP, settings.Dialing)
			}
			if p.HTTP != nil && p.HTTP.RequestTimeout != nil {
				out.timeout = min(out.timeout, p.HTTP.RequestTimeout.Duration)
			}
			if p.RequestHeaderModifier != nil {
				h, err := policy.NewHeaderModifier(p.RequestHeaderModifier)
				if err != nil {
					return nil, kindError(at+"requestHeaderModifier", err)
				}
				out.headers = h
			}
		}
	}
	if m.Percentage == nil {
		return nil, &decode.FieldError{Path: path + ".percentage", Msg: "required"}
	}
	out.upstream, out.percentage = c.upstream(addr, settings), *m.Percentage
	return out, nil
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
	if m.headers != nil {
		m.headers.ApplyRequest(&cp.Header)
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
		_ = m.upstream.Exchange(cp, resp, time.Now().Add(m.timeout))
		if resp.IsBodyStream() {
			_ = resp.CloseBodyStream()
		}
		fasthttp.ReleaseResponse(resp)
		fasthttp.ReleaseRequest(cp)
	}()
}

// mirrorBodyLimit is the largest request body that is mirrored.
const mirrorBodyLimit = 1 << 20
