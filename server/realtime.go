package server

import (
	"bytes"
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/bytedance/sonic"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/ratelimit"
	"github.com/relaygate/gateway/server/telemetry"
)

// rtRealtime is the realtime route type (OpenAI's Realtime API over
// WebSocket): the gateway tunnels the connection to the provider with the
// provider's credentials and reads the token usage from the server's
// response.done events on the way through.
const rtRealtime provider.RouteType = 200

// serveRealtime tunnels a realtime WebSocket to the first live provider
// that speaks the Realtime API.
func (b *bind) serveRealtime(rs *requestState, r *route, rb *routeBackend, t *llmTarget) int {
	fctx := rs.pc.Fast
	req := &fctx.Request
	fields := requestFields(&req.Header)
	if !rs.upgrade || fields&(fieldConnection|fieldUpgrade) != fieldConnection|fieldUpgrade || !isUpgrade(&req.Header) {
		return respondError(fctx, fasthttp.StatusBadRequest, "realtime requests are WebSocket upgrades")
	}
	var prov *llmProvider
	it := t.set.Attempts(0)
	for {
		p, _, ok := it.Next()
		if !ok {
			break
		}
		if k := p.p.Kind(); k == "openAI" || k == "azure" {
			prov = p
			break
		}
	}
	if prov == nil {
		return respondError(fctx, fasthttp.StatusNotFound, "no provider of this backend serves realtime requests")
	}
	if rs.limited {
		// Admitted by the requests buckets in the policies' order
		// (runChain); the tokens buckets are the session's.
		r.limiter.AdmitTokens(&rs.limit, 0)
		if !rs.limit.Allowed {
			status := rs.limit.Reject(&fctx.Response)
			llmRateLimitBody(rs, rtRealtime, "tokens")
			return status
		}
	}
	_ = b.prepareRequest(rs, rb, prov.up, true, fields, false) // an ai backend's credentials are its providers'
	// No compression is negotiated, so the server's events can be read.
	policy.DelRequestHeader(&req.Header, headerWSExtensions)
	uri := prov.p.AppendPath(rs.pc.Scratch(), provider.Passthrough, "", false, req.Header.RequestURI())
	req.SetRequestURIBytes(uri)
	rs.pc.KeepScratch(uri)
	req.Header.SetHostBytes(prov.host)
	req.UseHostHeader = true
	if prov.passthrough && len(rs.pc.Token) > 0 {
		rs.pc.KeepScratch(prov.passthroughAt.Insert(req, rs.pc.Token, rs.pc.Scratch()))
	}
	rs.hideCredentials() // the provider's credentials go upstream alone
	ctx, cancel := rs.llmAuthContext(time.Now().Add(upgradeHandshakeTimeout))
	err := prov.p.Authorize(ctx, req)
	cancel()
	if err != nil {
		rs.upstreamErr = err
		return respondError(fctx, fasthttp.StatusBadGateway, "provider credentials unavailable")
	}
	acct := &realtimeAccount{
		metrics: t.metrics, backend: t.name, provider: prov.p.Name(), system: prov.p.System(),
		model: string(fctx.QueryArgs().Peek("model")), start: rs.start,
	}
	if rs.route != nil {
		acct.route = rs.route.name
	}
	if rs.limited {
		acct.limiter, acct.limit = r.limiter, rs.limit
	}
	return b.tunnel(rs, prov.up, acct)
}

// realtimeAccount gathers a realtime session's usage; the session is
// recorded when its tunnel ends, long after the request state was
// released.
type realtimeAccount struct {
	metrics                          *telemetry.LLMMetrics
	route, backend, provider, system string
	model                            string
	start                            time.Duration
	limiter                          *ratelimit.Limiter
	limit                            ratelimit.Decision

	mu    sync.Mutex
	usage convert.Usage
	seen  bool
}

// add takes the usage of one response.done event.
func (a *realtimeAccount) add(u convert.Usage) {
	u = u.Clamped()
	a.mu.Lock()
	a.usage.InputTokens += u.InputTokens
	a.usage.OutputTokens += u.OutputTokens
	a.usage.CachedInputTokens += u.CachedInputTokens
	a.seen = true
	a.mu.Unlock()
	if a.limiter != nil {
		a.limiter.Charge(&a.limit, u.TotalTokens())
	}
}

// finish records the session's tokens.
func (a *realtimeAccount) finish() {
	a.mu.Lock()
	u, seen := a.usage, a.seen
	a.mu.Unlock()
	o := telemetry.LLMObservation{
		Operation: "realtime", Provider: a.system, RequestModel: a.model, ResponseModel: a.model,
		Route: a.route, Backend: a.provider, Duration: monoNow() - a.start, Cost: costUnknown,
		InputTokens: -1, OutputTokens: -1, CachedInputTokens: -1,
	}
	if seen {
		o.InputTokens, o.OutputTokens, o.CachedInputTokens = u.InputTokens, u.OutputTokens, u.CachedInputTokens
	}
	a.metrics.Observe(&o)
}

// maxRealtimeMessage bounds a server message the observer reads (a
// longer one, audio mostly, is passed on unread).
const maxRealtimeMessage = 1 << 20

// realtimeObserver reads the WebSocket frames a server sends (RFC 6455 5.2:
// unmasked, possibly fragmented) as they pass, and takes the usage of its
// response.done events. It never changes or holds back a byte: what it
// cannot read it skips.
type realtimeObserver struct {
	acct *realtimeAccount
	head []byte // a frame header being gathered
	left uint64 // payload bytes of the current frame still to come
	keep bool   // the current frame's payload belongs to a message read
	msg  []byte // the text message being gathered
	skip bool   // the current message is too long, or not text
	fin  bool   // the current frame ends its message
}

func (o *realtimeObserver) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if o.left > 0 {
			k := uint64(len(p))
			if k > o.left {
				k = o.left
			}
			if o.keep && !o.skip {
				if len(o.msg)+int(k) > maxRealtimeMessage {
					o.skip, o.msg = true, o.msg[:0]
				} else {
					o.msg = append(o.msg, p[:k]...)
				}
			}
			p = p[k:]
			o.left -= k
			if o.left == 0 {
				o.frameDone()
			}
			continue
		}
		o.head = append(o.head, p[0])
		p = p[1:]
		need, ok := frameHeaderLen(o.head)
		if !ok || len(o.head) < need {
			continue
		}
		o.startFrame()
		if o.left == 0 {
			o.frameDone()
		}
	}
	return n, nil
}

// frameHeaderLen is the length of the header that starts h, once h holds
// enough of it to tell.
func frameHeaderLen(h []byte) (int, bool) {
	if len(h) < 2 {
		return 0, false
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4 // a masked frame (servers send none, but it is skipped right)
	}
	return n, true
}

// startFrame reads the gathered header: what the frame's payload is and
// how long.
func (o *realtimeObserver) startFrame() {
	h := o.head
	var size uint64
	switch l := h[1] & 0x7f; l {
	case 126:
		size = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		size = binary.BigEndian.Uint64(h[2:10])
	default:
		size = uint64(l)
	}
	opcode := h[0] & 0x0f
	switch {
	case opcode == 0x1: // text: a new message
		o.msg, o.skip, o.keep = o.msg[:0], h[1]&0x80 != 0, true
	case opcode == 0x0: // continuation
		o.keep = true
	case opcode == 0x2: // binary: not an event
		o.msg, o.skip, o.keep = o.msg[:0], true, true
	default: // control frames interleave and carry nothing of ours
		o.keep = false
	}
	o.left = size
	o.fin = h[0]&0x80 != 0
	o.head = o.head[:0]
}

func (o *realtimeObserver) frameDone() {
	if o.keep && o.fin {
		if !o.skip {
			o.event(o.msg)
		}
		o.msg, o.skip = o.msg[:0], false
	}
	o.keep = false
}

// realtimeEvent is the part of a server event the gateway reads.
type realtimeEvent struct {
	Type     string `json:"type"`
	Response struct {
		Usage struct {
			InputTokens        int64 `json:"input_tokens"`
			OutputTokens       int64 `json:"output_tokens"`
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_token_details"`
		} `json:"usage"`
	} `json:"response"`
}

var responseDone = []byte(`"response.done"`)

func (o *realtimeObserver) event(msg []byte) {
	if !bytes.Contains(msg, responseDone) {
		return
	}
	var ev realtimeEvent
	if sonic.Unmarshal(msg, &ev) != nil || !strings.EqualFold(ev.Type, "response.done") {
		return
	}
	u := ev.Response.Usage
	o.acct.add(convert.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.InputTokensDetails.CachedTokens})
}
