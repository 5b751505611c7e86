package extproc

import (
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy"
)

// OnResponse sends the response's headers and body to the service as the
// processing options (or the service's mode override) say and applies its
// answers. It does nothing for a response the policy made itself, or when
// the request phase failed open.
func (p *ExtProc) OnResponse(c *policy.Ctx) {
	s := p.sessionOf(c)
	if s == nil {
		return
	}
	if pm := s.reqPump; pm != nil && !pm.finished() {
		// The exchange is over with the request's body still streaming
		// (the upstream answered, or failed, before taking all of it):
		// the service is mid-body, so the response cannot be processed.
		s.end()
		pm.halt()
		if !s.skipResp {
			s.skipResp = true
			p.responseFailed(c, s, &errService{"the exchange ended before the request body was processed"}, nil)
		}
		return
	}
	if s.skipResp {
		return
	}
	if err := s.brokenOutOfTurn(); err != nil {
		// The service answered out of turn after the request went on
		// (an answer for a response it had not been sent, say): the
		// response is the failure mode's at once, whatever of it was to
		// be processed.
		p.responseFailed(c, s, err, nil)
		return
	}
	resp := &c.Fast.Response
	hasBody := responseHasBody(c)
	mode := s.respBody
	if !hasBody {
		mode = bodyNone
	}
	if !s.respHeaders && mode == bodyNone {
		s.end()
		return
	}
	if !s.opened {
		if err := s.open(c.Trace, p.grpcMD(c)); err != nil {
			p.responseFailed(c, s, err, nil)
			return
		}
		s.metadata = p.metadataContext(c)
	}
	attrs := p.attributes(c, p.respAttrs)
	var pm *pump
	if s.respHeaders {
		m := &procv3.ProcessingRequest{
			Request: &procv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &procv3.HttpHeaders{
				Headers:     responseHeaderMap(resp),
				EndOfStream: !hasBody,
			}},
			Attributes: attrs,
		}
		attrs = nil
		if err := s.send(m); err != nil {
			p.responseFailed(c, s, err, nil)
			return
		}
		if mode == bodyDuplex {
			src, ok := takeResponseBody(resp)
			if !ok {
				p.responseFailed(c, s, errNotDetachable, nil)
				return
			}
			pm = startPump(s, src, true, resp.Header.ContentLength(), p.maxBuffer, nil)
		}
		ans, err := s.wait(s.respCh, pm.stopped())
		if err != nil {
			p.responseFailed(c, s, err, pm)
			return
		}
		hr, ok := ans.Response.(*procv3.ProcessingResponse_ResponseHeaders)
		if !ok {
			p.responseFailed(c, s, errOutOfOrder("response headers"), pm)
			return
		}
		takeMetadata(c, ans)
		if pm == nil {
			s.override(ans, false)
			if hasBody {
				mode = s.respBody
			}
		}
		cr := hr.ResponseHeaders.GetResponse()
		if err := applyResponseMutation(resp, cr.GetHeaderMutation()); err != nil {
			p.responseFailed(c, s, err, pm)
			return
		}
		if cr.GetStatus() == procv3.CommonResponse_CONTINUE_AND_REPLACE {
			if pm != nil {
				p.responseFailed(c, s, &errService{"the service replaced a body it was streaming (CONTINUE_AND_REPLACE in full-duplex mode)"}, pm)
				return
			}
			resp.SetBody(replacedBody(cr.GetBodyMutation(), nil))
			s.end()
			return
		}
		if pm != nil {
			d := newDuplexBody(s, s.respCh, pm)
			d.take(cr.GetBodyMutation())
			p.streamResponse(c, d)
			return
		}
	}
	switch mode {
	case bodyNone:
		s.end()
		return
	case bodyDuplex:
		src, ok := takeResponseBody(resp)
		if !ok {
			p.responseFailed(c, s, errNotDetachable, nil)
			return
		}
		pm = startPump(s, src, true, resp.Header.ContentLength(), p.maxBuffer, attrs)
		p.streamResponse(c, newDuplexBody(s, s.respCh, pm))
		return
	}
	src, ok := takeResponseBody(resp)
	if !ok {
		p.responseFailed(c, s, errNotDetachable, nil)
		return
	}
	body, rest, err := readBody(nil, src, resp.Header.ContentLength(), p.maxBuffer, mode == bodyPartial)
	if err != nil {
		closeReader(src)
		p.responseFailed(c, s, err, nil)
		return
	}
	restore := func() { setResponseBody(resp, body, rest, src) }
	m := &procv3.ProcessingRequest{
		Request:    &procv3.ProcessingRequest_ResponseBody{ResponseBody: &procv3.HttpBody{Body: body, EndOfStream: rest == nil}},
		Attributes: attrs,
	}
	if err := s.send(m); err != nil {
		restore()
		p.responseFailed(c, s, err, nil)
		return
	}
	ans, err := s.wait(s.respCh, nil)
	if err != nil {
		restore()
		p.responseFailed(c, s, err, nil)
		return
	}
	br, ok := ans.Response.(*procv3.ProcessingResponse_ResponseBody)
	if !ok {
		restore()
		p.responseFailed(c, s, errOutOfOrder("response body"), nil)
		return
	}
	takeMetadata(c, ans)
	cr := br.ResponseBody.GetResponse()
	if err := applyResponseMutation(resp, cr.GetHeaderMutation()); err != nil {
		restore()
		p.responseFailed(c, s, err, nil)
		return
	}
	setResponseBody(resp, replacedBody(cr.GetBodyMutation(), body), rest, src)
	s.end()
}

var errNotDetachable = &errService{"this response's body is produced by the gateway itself and cannot be processed externally (set responseBodyMode: none)"}

// responseFailed handles a failure of the response phase.
func (p *ExtProc) responseFailed(c *policy.Ctx, s *session, err error, pm *pump) {
	s.failed(err)
	resp := &c.Fast.Response
	if err == errImmediate {
		if pm != nil {
			pm.stop()
			closeReader(pm.src)
		}
		respondImmediate(c, s.immediate)
		s.end()
		return
	}
	replayable := true
	if pm != nil {
		s.end()
		replayable = pm.replayResponse(resp)
	}
	s.end()
	if p.failOpen && replayable {
		p.warnFailed("extProc: the external processing service failed; the response goes on unprocessed (failureMode failOpen)", err)
		return
	}
	p.warnFailed("extProc: the external processing service failed; answering 500", err)
	respondFailed(resp)
}
