package policy

import (
	"github.com/relaygate/gateway/config"
)

// DirectResponse answers every request itself with a fixed status and body
// (`directResponse`). As in agentgateway, the body is sent as configured and
// no Content-Type is added.
type DirectResponse struct {
	status int
	body   []byte
}

// NewDirectResponse compiles a direct response; status must be 200..599.
func NewDirectResponse(cfg *config.DirectResponse) (*DirectResponse, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	if cfg.Status == nil {
		return nil, fieldErrorf("status", "is required")
	}
	if s := *cfg.Status; s < 200 || s > 599 {
		return nil, fieldErrorf("status", "must be between 200 and 599, not %d", s)
	}
	return &DirectResponse{status: *cfg.Status, body: append([]byte(nil), cfg.Body...)}, nil
}

// OnRequest writes the response and returns Done.
func (p *DirectResponse) OnRequest(c *Ctx) Result {
	answerEmpty(c, p.status)
	if len(p.body) > 0 {
		c.Fast.Response.SetBody(p.body)
	}
	return Done
}
