package ratelimit

import "github.com/relaygate/gateway/policy"

// AdmitCtx admits the request of c (AdmitRequest: its `tokens` buckets are
// an LLM exchange's to check, AdmitTokens) and, when refused, writes the 429
// answer into c.Fast.Response. The server calls it in policy.Order's place
// for localRateLimit (policy.Chain.Before), and keeps the Decision: to put
// the x-ratelimit-* headers on an allowed request's response (WriteHeaders,
// once the response is there), and for an LLM exchange's AdmitTokens and
// Charge. A request must be admitted once: either AdmitCtx or the limiter
// in the route's chain, not both.
func (l *Limiter) AdmitCtx(c *policy.Ctx) Decision {
	d := l.AdmitRequest(c)
	if !d.Allowed {
		d.Reject(&c.Fast.Response)
	}
	return d
}

// OnRequest implements policy.Request, for a route whose limiter counts
// requests only: it answers 429 and returns Done when refused. An allowed
// request's Decision is dropped here, so its response gets no x-ratelimit-*
// headers (the chain has no per-request state to keep it in, and the
// response does not exist yet); a server that wants them calls AdmitCtx
// instead and WriteHeaders on the response.
func (l *Limiter) OnRequest(c *policy.Ctx) policy.Result {
	if l.AdmitCtx(c).Allowed {
		return policy.Continue
	}
	return policy.Done
}

var _ policy.Request = (*Limiter)(nil)
