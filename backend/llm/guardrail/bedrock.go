package guardrail

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
)

// bedrock is an AWS Bedrock guardrail through the ApplyGuardrail API (POST
// https://bedrock-runtime.{region}.amazonaws.com/guardrail/{id}/version/{version}/apply,
// signed with SigV4 for the "bedrock" service): each text is a content
// block of source INPUT (prompts) or OUTPUT (answers). An intervention that
// only anonymized, with one output per block, masks; any other rejects.
type bedrock struct {
	svc    *service
	path   string
	source string
}

func (g *Guard) compileBedrock(c *config.BedrockGuardrails, ph phase, opts *Options) error {
	g.kind = "bedrockGuardrails"
	const path = "bedrockGuardrails.policies"
	host := "bedrock-runtime." + c.Region + ".amazonaws.com"
	svc, err := newService(cloudTarget(host, opts), c.Policies, path, opts)
	if err != nil {
		return err
	}
	svc.creds, err = compileCredentials(config.AIProvider{Bedrock: &config.BedrockProvider{Region: c.Region}}, c.Policies, path, authRules{
		aws:   true,
		key:   true,
		takes: "aws (or a Bedrock API key, or passthrough)",
	})
	if err != nil {
		return err
	}
	b := &bedrock{
		svc:    svc,
		path:   "/guardrail/" + escapeSegment(c.GuardrailIdentifier) + "/version/" + escapeSegment(c.GuardrailVersion) + "/apply",
		source: "INPUT",
	}
	if ph == answerPhase {
		b.source = "OUTPUT"
	}
	g.checker = b
	g.services = append(g.services, svc)
	return nil
}

func (b *bedrock) check(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	c := newCall(b.path)
	defer c.release()
	buf := append(c.body[:0], `{"source":"`...)
	buf = append(buf, b.source...)
	buf = append(buf, `","content":[`...)
	for i := range msgs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"text":{"text":`...)
		buf = llm.AppendString(buf, msgs[i].Content)
		buf = append(buf, "}}"...)
	}
	c.body = append(buf, "]}"...)
	b.svc.prepare(c)
	answer, err := b.svc.send(ctx, c, in)
	if err != nil {
		return Verdict{}, err
	}
	a, err := decodeApplyGuardrail(answer)
	if err != nil {
		return Verdict{}, err
	}
	return a.verdict(msgs), nil
}

// applyGuardrailAnswer is what a verdict needs of ApplyGuardrail's answer.
type applyGuardrailAnswer struct {
	intervened bool
	// blocked and anonymized: some assessment's action is BLOCKED, or
	// ANONYMIZED.
	blocked, anonymized bool
	outputs             []string
	// types are the policy types that acted (VIOLENCE, EMAIL, ...).
	types []string
}

// decodeApplyGuardrail reads ApplyGuardrail's answer. Its action must be
// NONE or GUARDRAIL_INTERVENED, as the AWS SDK requires.
func decodeApplyGuardrail(body []byte) (applyGuardrailAnswer, error) {
	var raw struct {
		Action  *string `json:"action"`
		Outputs []struct {
			Text *string `json:"text"`
		} `json:"outputs"`
		Assessments []any `json:"assessments"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return applyGuardrailAnswer{}, errors.New("invalid answer: " + err.Error())
	}
	var a applyGuardrailAnswer
	switch {
	case raw.Action == nil:
		return a, errors.New("invalid answer: no action")
	case *raw.Action == "GUARDRAIL_INTERVENED":
		a.intervened = true
	case *raw.Action != "NONE":
		return a, errors.New("invalid answer: unknown action " + strconv.Quote(truncate(*raw.Action, 64)))
	}
	for _, o := range raw.Outputs {
		if o.Text == nil {
			return a, errors.New("invalid answer: an output without text")
		}
		a.outputs = append(a.outputs, *o.Text)
	}
	for _, v := range raw.Assessments {
		a.collectActions(v)
	}
	slices.Sort(a.types)
	return a, nil
}

// collectActions finds the objects whose "action" is BLOCKED or
// ANONYMIZED anywhere in an assessment (agentgateway looks the same way:
// the assessment's policies nest their findings differently).
func (a *applyGuardrailAnswer) collectActions(v any) {
	switch x := v.(type) {
	case map[string]any:
		switch x["action"] {
		case "BLOCKED":
			a.blocked = true
			a.addType(x["type"])
		case "ANONYMIZED":
			a.anonymized = true
			a.addType(x["type"])
		}
		for _, e := range x {
			a.collectActions(e)
		}
	case []any:
		for _, e := range x {
			a.collectActions(e)
		}
	}
}

func (a *applyGuardrailAnswer) addType(t any) {
	if s, ok := t.(string); ok && s != "" && len(a.types) < 16 {
		if !slices.Contains(a.types, s) {
			a.types = append(a.types, s)
		}
	}
}

// verdict decides as agentgateway does: no intervention passes; an
// intervention that only anonymized masks when it gave one output per text
// sent; any other intervention rejects (its outputs are a canned message).
func (a *applyGuardrailAnswer) verdict(sent []Message) Verdict {
	if !a.intervened {
		return Verdict{Action: Pass}
	}
	why := reason("guardrail intervened", a.types)
	if a.anonymized && !a.blocked {
		if len(a.outputs) == len(sent) {
			masked := make([]Message, len(sent))
			for i := range sent {
				masked[i] = Message{Role: sent[i].Role, Content: a.outputs[i]}
			}
			return Verdict{Action: Mask, Messages: masked, Reason: why}
		}
		why = "guardrail masked " + strconv.Itoa(len(sent)) + " texts into " + strconv.Itoa(len(a.outputs)) + " outputs"
	}
	return Verdict{Action: Reject, Reason: why}
}

// escapeSegment escapes a path segment as the AWS SDK does: every byte
// but the unreserved ones (RFC 3986) is percent-encoded.
func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

var _ checker = (*bedrock)(nil)
