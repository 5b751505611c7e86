package extauthz

import (
	"context"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// Verdict is what a connection check decided.
type Verdict uint8

const (
	// Allowed: the service answered 200, or could not decide and
	// failureMode is allow.
	Allowed Verdict = iota
	// Denied: the service answered something else.
	Denied
	// Failed: the service could not decide (unreachable, too slow) and
	// failureMode denies, or the check request could not be built (an
	// expression without a value), whatever failureMode says.
	Failed
)

// NewConnectionCheck compiles frontendPolicies.networkExtAuthz: an extAuthz
// policy that checks connections (CheckConnection). Only the HTTP protocol
// can (config.NetworkExtAuthz refuses the rest at load; this refuses it
// for a File built in code).
func NewConnectionCheck(cfg *config.ExtAuthz, o Options) (*ExtAuthz, error) {
	if cfg.Conditional != nil {
		return nil, &policy.FieldError{Field: "conditional", Msg: "networkExtAuthz has no conditional form"}
	}
	if cfg.Protocol == nil || cfg.Protocol.HTTP == nil {
		return nil, &policy.FieldError{Field: "protocol", Msg: "networkExtAuthz only supports protocol http"}
	}
	return New(cfg, o)
}

// CheckConnection asks the service whether a new downstream connection may
// be served, as agentgateway's networkExtAuthz does: the check is the HTTP
// check of a request `GET /` without headers, whose expressions (path,
// addRequestHeaders, body, cache.key) see the connection's source and
// destination (the maps networkAuthorization's rules see). It waits at
// most the policy's timeout and is safe for concurrent use; each caller
// waits only for its own check.
func (p *ExtAuthz) CheckConnection(source, destination map[string]any) Verdict {
	if p.http == nil {
		return Failed // NewConnectionCheck makes none such
	}
	in := celrules.Input{Source: source, Destination: destination, Request: connRequest()}
	var key [32]byte
	cacheable := false
	if p.cache != nil {
		if key, cacheable = p.cache.key(&in); cacheable {
			if d := p.cache.get(key); d != nil {
				return verdict(d)
			}
		}
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI("/")
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	d, err := p.http.ask(ctx, p, &asked{req: req, in: &in})
	if err != nil {
		if isExpressionError(err) {
			// A fault of the policy, not of the service: failureMode
			// allow does not let the connection through.
			p.log.Warn("networkExtAuthz: the check request could not be built; closing the connection", zap.Error(err))
			return Failed
		}
		if p.failAllow {
			p.warnFailed("networkExtAuthz: the authorization service could not decide; allowing the connection (failureMode allow)", err)
			return Allowed
		}
		p.warnFailed("networkExtAuthz: the authorization service could not decide; closing the connection", err)
		return Failed
	}
	if cacheable {
		in.ExtAuthz = d.metadata // for a ttl that reads the answer
		p.cache.put(key, d, &in)
	}
	return verdict(d)
}

func verdict(d *decision) Verdict {
	if d.deny {
		return Denied
	}
	return Allowed
}

// connRequest is `request` for a connection check: the synthetic request's
// method and path, no headers. A fresh map each time: expressions may hold
// on to what they read.
func connRequest() map[string]any {
	return map[string]any{"method": "GET", "path": "/", "uri": "/", "headers": map[string]any{}}
}
