package server

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/celrules"
)

// This file wires the remote prompt guards (backend/llm/guardrail) into the
// LLM path: their calls go through the gateway's pools, webhooks may name
// top-level host backends, and their verdicts become answers (a rejection,
// 503 for a cloud guard that failed) and the access log's llm.guard.

// guardrailHostOverride sends the cloud guards' calls to local emulators
// (guardrail.Options.HostOverride): a test hook, nil in production.
var guardrailHostOverride map[string]string

// guardrailOptions are the options the remote guards of this snapshot are
// compiled with.
func (c *compiler) guardrailOptions() guardrail.Options {
	return guardrail.Options{
		ResolveBackend: c.guardrailBackend,
		Pool: func(addr string, tls backend.UpstreamTLS, tcp *config.BackendTCP) *backend.Upstream {
			s := c.defaults
			s.TLS = tls
			if tcp != nil {
				s.Dialing = backendTCPDialing(tcp, s.Dialing)
			}
			up := c.upstream(addr, s)
			return up
		},
		// A webhook's mask repeats the prompt: room for the largest body.
		MaxAnswer:    max(guardrail.DefaultMaxAnswer, 2*c.frontend.maxBufferSize),
		HostOverride: guardrailHostOverride,
	}
}

// guardrailBackend resolves a webhook's {backend: name} as the mirror
// policy does: top-level host backends only.
func (c *compiler) guardrailBackend(name string) (string, bool) {
	nb := c.named[name]
	if nb == nil || nb.Kind != config.BackendHost {
		return "", false
	}
	return nb.Host, true
}

// guardContext bounds the guards' calls by the request's deadline (zero:
// by the guards' own timeouts only).
func guardContext(deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.Background(), func() {}
	}
	return context.WithDeadline(context.Background(), deadline)
}

// remoteInput is what the remote guards of the request read: its headers,
// its CEL view (in, built when nil) and the client's token.
func remoteInput(rs *requestState, in **celrules.Input, header guardrail.Headers, ctx context.Context) *aipolicy.RemoteInput {
	if *in == nil {
		v := celrules.InputFromCtx(&rs.pc)
		*in = &v
	}
	return &aipolicy.RemoteInput{Ctx: ctx, Input: guardrail.Input{Header: header, Request: *in, Token: rs.pc.Token, Trace: rs.pc.Trace}}
}

// noteGuard records the remote guards' outcome for the access log.
func (x *llmExchange) noteGuard(r *aipolicy.RemoteInput) {
	switch {
	case r.Masked:
		x.guard = "masked"
	case r.FailedOpen && x.guard == "":
		x.guard = "failed_open"
	}
}

// guardFailure answers a request whose cloud guard could not judge: 503,
// as agentgateway does. ok is false for another error.
func (b *bind) guardFailure(rs *requestState, x *llmExchange, err error) (int, bool) {
	var ge *aipolicy.GuardError
	if !errors.As(err, &ge) {
		return 0, false
	}
	rs.upstreamErr = err
	x.guard, x.errType = "failed", "guardrail"
	return b.llmClientError(x, fasthttp.StatusServiceUnavailable, "prompt guard unavailable"), true
}

// guardAnswer runs the remote response guards on a whole translated answer
// (x.out): a mask rewrites it, a reject replaces it with the rejection. It
// returns the body to send, or ok false with the status of the answer
// written instead.
func (b *bind) guardAnswer(rs *requestState, x *llmExchange, body []byte) (out []byte, status int, ok bool) {
	pol := x.prov.policy
	if pol == nil || !pol.HasRemoteResponseGuards() {
		return body, 0, true
	}
	var in *celrules.Input
	ctx, cancel := guardContext(requestDeadline(rs))
	defer cancel()
	remote := remoteInput(rs, &in, &x.upResp.Header, ctx)
	out, rej, err := pol.Response(x.guarded[:0], body, x.info.Client, remote)
	if err != nil {
		st, _ := b.guardFailure(rs, x, err)
		return nil, st, false
	}
	if rej != nil {
		x.guard, x.errType = "rejected", "guardrail_rejected"
		return nil, rej.Write(&x.fctx.Response), false
	}
	x.noteGuard(remote)
	if len(out) > 0 && &out[0] != &body[0] {
		x.guarded = out
	}
	return out, 0, true
}

// requestDeadline is when the route's timeout ends the request (zero: no
// timeout).
func requestDeadline(rs *requestState) time.Time {
	if rs.route == nil || rs.route.timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(rs.route.timeout - (monoNow() - rs.start))
}
