package provider

import (
	"github.com/relaygate/gateway/codec/llm"
)

// vertexAnthropicVersion is the API version Vertex AI's Anthropic
// publisher takes in the body.
const vertexAnthropicVersion = `"vertex-2023-10-16"`

// PrepareBody finishes a body already in the provider's format, appending
// it to dst when it changes:
//   - Vertex AI's Anthropic publisher takes the model in the path, not in
//     the body, and needs "anthropic_version": "vertex-2023-10-16": a chat
//     route's body for a Claude model (the provider's fixed one, else the
//     body's) loses its "model" and gains anthropic_version, an
//     AnthropicTokenCount body gains anthropic_version;
//   - a Bedrock provider with a guardrail (guardrailIdentifier and
//     guardrailVersion) sets a chat route's guardrailConfig to
//     {"guardrailIdentifier", "guardrailVersion", "trace": "enabled"}
//     (replacing the client's, if any), for Converse and ConverseStream
//     alike.
//
// Every other body is returned as it is (not copied), and so is one that is
// not a JSON object. Members are copied byte for byte.
func (p *Provider) PrepareBody(dst, body []byte, rt RouteType) []byte {
	switch p.kind {
	case kindVertex:
		switch {
		case rt == AnthropicTokenCount:
			return setAnthropicVersion(dst, body, false)
		case rt.chat() && vertexPublisherOf(p.bodyModel(body)) == publisherAnthropic:
			return setAnthropicVersion(dst, body, true)
		}
	case kindBedrock:
		if rt.chat() && p.bedrock.guardrail != nil {
			out, err := llm.SetMember(dst, body, "guardrailConfig", p.bedrock.guardrail)
			if err != nil {
				return body
			}
			return out
		}
	}
	return body
}

// bodyModel is the provider's fixed model, else the body's "model".
func (p *Provider) bodyModel(body []byte) string {
	if p.model != "" {
		return p.model
	}
	raw, err := llm.Lookup(body, "model")
	if err != nil || !raw.IsString() {
		return ""
	}
	var buf [128]byte
	model, err := llm.AppendUnquoted(buf[:0], raw)
	if err != nil {
		return ""
	}
	return string(model)
}

// setAnthropicVersion appends body with anthropic_version first and any
// member of that name dropped, and "model" dropped when dropModel; body is
// returned unchanged when it is not a JSON object.
func setAnthropicVersion(dst, body []byte, dropModel bool) []byte {
	dst = append(dst, `{"anthropic_version":`...)
	dst = append(dst, vertexAnthropicVersion...)
	var m llm.Members
	m.Reset(body)
	for m.Next() {
		if m.NameIs("anthropic_version") || dropModel && m.NameIs("model") {
			continue
		}
		dst = append(dst, ',')
		dst = append(dst, m.Name()...)
		dst = append(dst, ':')
		dst = append(dst, m.Value()...)
	}
	if m.Err() != nil {
		return body
	}
	return append(dst, '}')
}
