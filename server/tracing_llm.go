package server

import (
	"encoding/json"
	"strings"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/logline"
)

// genAIAttributes appends the OpenTelemetry GenAI attributes of an LLM
// request (semantic conventions, gen_ai.* of inference spans): the
// operation, the provider, the models and the usage when it is known.
func (x *llmExchange) genAIAttributes(attrs []attribute.KeyValue) []attribute.KeyValue {
	attrs = append(attrs,
		attribute.String("gen_ai.operation.name", operationName(x.rt)),
		attribute.String("gen_ai.provider.name", x.prov.p.System()),
	)
	if len(x.reqModel) > 0 {
		attrs = append(attrs, attribute.String("gen_ai.request.model", string(logline.BoundBytes(x.reqModel))))
	}
	if m := x.responseModel(); len(m) > 0 {
		attrs = append(attrs, attribute.String("gen_ai.response.model", string(logline.BoundBytes(m))))
	}
	if x.hasUsage {
		attrs = append(attrs,
			attribute.Int64("gen_ai.usage.input_tokens", x.usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", x.usage.OutputTokens),
		)
		if x.usage.CachedInputTokens > 0 {
			attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", x.usage.CachedInputTokens))
		}
	}
	if x.errType != "" {
		attrs = append(attrs, attribute.String("error.type", x.errType))
	}
	return attrs
}

// llmVariable is `llm` of the telemetry expressions (config.TelemetryCELEnv):
// what the exchange came to. Token counts are there only when the provider
// reported usage; prompt (the client's messages) when asked for and the
// body holds any; completion (the answer's texts) when asked for and resp,
// the answer as the client got it, was not streamed.
func (x *llmExchange) llmVariable(resp *fasthttp.Response, prompt, completion bool) map[string]any {
	v := map[string]any{
		"provider":     x.prov.p.System(),
		"requestModel": string(x.reqModel),
		"streaming":    x.info.Stream,
	}
	if m := x.responseModel(); len(m) > 0 {
		v["responseModel"] = string(m)
	}
	if x.hasUsage {
		v["inputTokens"] = x.usage.InputTokens
		v["outputTokens"] = x.usage.OutputTokens
		v["totalTokens"] = x.usage.TotalTokens()
		v["cachedInputTokens"] = x.usage.CachedInputTokens
		v["reasoningTokens"] = x.usage.ReasoningTokens
	}
	f := clientFormat(x.rt)
	if prompt {
		if msgs := promptMessages(x.client, f); msgs != nil {
			v["prompt"] = msgs
		}
	}
	if completion && resp != nil && !x.info.Stream && resp.StatusCode() < 300 {
		if texts := completionTexts(resp.Body(), f); texts != nil {
			v["completion"] = texts
		}
	}
	return v
}

// promptMessages are the messages of a chat request body in format f, each
// a map of role and content (the text of its parts); the system prompt
// first, as a message of role system. nil when the body holds none.
func promptMessages(body []byte, f convert.Format) []any {
	var req struct {
		Messages     []promptMessage `json:"messages"`
		System       json.RawMessage `json:"system"`
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
	}
	if f == convert.FormatUnknown || json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []any
	add := func(role string, content json.RawMessage) {
		out = append(out, map[string]any{"role": role, "content": contentText(content)})
	}
	switch f {
	case convert.Chat:
		for _, m := range req.Messages {
			add(m.Role, m.Content)
		}
	case convert.Messages:
		if len(req.System) > 0 && string(req.System) != "null" {
			add("system", req.System)
		}
		for _, m := range req.Messages {
			add(m.Role, m.Content)
		}
	case convert.Responses:
		if req.Instructions != "" {
			out = append(out, map[string]any{"role": "system", "content": req.Instructions})
		}
		var text string
		var items []promptMessage
		switch {
		case json.Unmarshal(req.Input, &text) == nil:
			add("user", req.Input)
		case json.Unmarshal(req.Input, &items) == nil:
			for _, m := range items {
				if m.Role != "" {
					add(m.Role, m.Content)
				}
			}
		}
	}
	return out
}

type promptMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentText is the text of a message's content: a string, or the texts
// of its parts (text, input_text, output_text) one per line.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// completionTexts are the texts of an answer in format f: one per choice
// (chat), per answer (messages) or per output message (responses). nil
// when it holds none.
func completionTexts(body []byte, f convert.Format) []any {
	var resp struct {
		Choices []struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Content json.RawMessage `json:"content"`
		Output  []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		} `json:"output"`
	}
	if f == convert.FormatUnknown || json.Unmarshal(body, &resp) != nil {
		return nil
	}
	var out []any
	switch f {
	case convert.Chat:
		for _, c := range resp.Choices {
			out = append(out, contentText(c.Message.Content))
		}
	case convert.Messages:
		if len(resp.Content) > 0 {
			out = append(out, contentText(resp.Content))
		}
	case convert.Responses:
		for _, o := range resp.Output {
			if o.Type == "message" {
				out = append(out, contentText(o.Content))
			}
		}
	}
	return out
}
