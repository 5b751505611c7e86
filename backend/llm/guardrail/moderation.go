package guardrail

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
)

// moderation is OpenAI's moderation endpoint (POST
// https://api.openai.com/v1/moderations): every message's text is one
// input, and the prompt is rejected when any result is flagged.
type moderation struct {
	svc   *service
	model string
}

// Moderation defaults (agentgateway's).
const (
	openAIHost              = "api.openai.com"
	moderationPath          = "/v1/moderations"
	defaultModerationsModel = "omni-moderation-latest"
)

func (g *Guard) compileModeration(c *config.ModerationGuard, opts *Options) error {
	g.kind, g.unit = "openAIModeration", PerMessage
	const path = "openAIModeration.policies"
	svc, err := newService(cloudTarget(openAIHost, opts), c.Policies, path, opts)
	if err != nil {
		return err
	}
	svc.creds, err = compileCredentials(config.AIProvider{OpenAI: &config.OpenAIProvider{}}, c.Policies, path, authRules{
		key:      true,
		takes:    "a key (or passthrough)",
		required: "OpenAI's moderation endpoint needs a key",
	})
	if err != nil {
		return err
	}
	m := &moderation{svc: svc, model: defaultModerationsModel}
	if c.Model != nil {
		m.model = *c.Model
	}
	g.checker = m
	g.services = append(g.services, svc)
	return nil
}

func (m *moderation) check(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	c := newCall(moderationPath)
	defer c.release()
	b := append(c.body[:0], `{"input":[`...)
	for i := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = llm.AppendString(b, msgs[i].Content)
	}
	b = append(b, `],"model":`...)
	b = llm.AppendString(b, m.model)
	c.body = append(b, '}')
	m.svc.prepare(c)
	answer, err := m.svc.send(ctx, c, in)
	if err != nil {
		return Verdict{}, err
	}
	flagged, categories, err := decodeModeration(answer)
	if err != nil {
		return Verdict{}, err
	}
	if !flagged {
		return Verdict{Action: Pass}, nil
	}
	return Verdict{Action: Reject, Reason: reason("flagged", categories)}, nil
}

// decodeModeration reads a moderation answer: whether any result is
// flagged, and the categories flagged (sorted, once each).
func decodeModeration(body []byte) (bool, []string, error) {
	var answer struct {
		Results []struct {
			Flagged    *bool          `json:"flagged"`
			Categories map[string]any `json:"categories"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return false, nil, errors.New("invalid answer: " + err.Error())
	}
	if answer.Results == nil {
		return false, nil, errors.New("invalid answer: no results")
	}
	flagged := false
	var categories []string
	for _, r := range answer.Results {
		if r.Flagged == nil {
			return false, nil, errors.New("invalid answer: a result without flagged")
		}
		if !*r.Flagged {
			continue
		}
		flagged = true
		for name, v := range r.Categories {
			if v == true && !slices.Contains(categories, name) {
				categories = append(categories, name)
			}
		}
	}
	slices.Sort(categories)
	return flagged, categories, nil
}

var _ checker = (*moderation)(nil)
