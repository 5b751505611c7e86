package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// Bedrock Converse as a provider format: requests written, responses read
// (streams: stream_bedrock.go).

// bedrockPlaceholderTool is declared when the conversation holds tool uses
// but the request no tools: Converse refuses tool history without a
// toolConfig (agentgateway declares the same kind of placeholder).
const bedrockPlaceholderTool = `{"toolSpec":{"name":"gateway_placeholder_do_not_call","inputSchema":{"json":{"type":"object"}}}}`

// validBedrockToolName: [a-zA-Z0-9_-]{1,64}, the rule of OpenAI and
// Anthropic too, so only names from elsewhere (MCP servers' dotted names)
// fail it.
func validBedrockToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (t *translator) writeBedrockRequest(dst []byte, o *Options) ([]byte, error) {
	r := &t.req
	dst = append(dst, `{"messages":[`...)
	n := 0
	for _, m := range r.messages {
		blocks := r.msgBlocks(m)
		start := len(dst)
		dst = comma(dst, &n)
		if m.role == roleAssistant {
			dst = append(dst, `{"role":"assistant","content":[`...)
		} else {
			dst = append(dst, `{"role":"user","content":[`...)
		}
		k := 0
		for i := range blocks {
			var err error
			if dst, err = t.appendBedrockBlock(dst, &blocks[i], &k); err != nil {
				return dst, err
			}
		}
		if k == 0 { // only blank text: Converse refuses empty turns
			dst = dst[:start]
			n--
			continue
		}
		dst = append(dst, `]}`...)
	}
	dst = append(dst, ']')
	if len(r.system) > 0 {
		dst = append(dst, `,"system":[`...)
		k := 0
		for i := range r.system {
			b := &r.system[i]
			if b.text.Blank() {
				continue
			}
			dst = comma(dst, &k)
			dst = append(dst, `{"text":`...)
			dst = append(dst, b.text...)
			dst = append(dst, '}')
			if b.cache.Present() {
				dst = append(dst, `,{"cachePoint":{"type":"default"}}`...)
			}
		}
		if k == 0 {
			dst = dst[:len(dst)-len(`,"system":[`)]
		} else {
			dst = append(dst, ']')
		}
	}
	maxTokens := r.maxTokens
	if maxTokens <= 0 {
		maxTokens = o.DefaultMaxTokens
	}
	r.outMaxTokens = maxTokens
	dst = append(dst, `,"inferenceConfig":{"maxTokens":`...)
	dst = appendInt(dst, int64(maxTokens))
	dst = appendOptionalRaw(dst, `,"temperature":`, r.temperature)
	dst = appendOptionalRaw(dst, `,"topP":`, r.topP)
	if r.stop.Present() {
		dst = append(dst, `,"stopSequences":`...)
		dst = appendStringArray(dst, r.stop)
	}
	dst = append(dst, '}')
	switch {
	case len(r.tools) > 0 && r.choice != choiceNone:
		dst = append(dst, `,"toolConfig":{"tools":[`...)
		for i := range r.tools {
			tl := &r.tools[i]
			if !validBedrockToolName(tl.name) {
				return dst, badRequest("tool name " + quoteForError(tl.name) + " is not valid for Bedrock ([a-zA-Z0-9_-]{1,64})")
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"toolSpec":{"name":`...)
			dst = llm.AppendString(dst, tl.name)
			dst = appendOptionalRaw(dst, `,"description":`, tl.desc)
			dst = append(dst, `,"inputSchema":{"json":`...)
			dst = appendSchema(dst, tl.schema)
			dst = append(dst, `}}}`...)
			if tl.cache.Present() {
				dst = append(dst, `,{"cachePoint":{"type":"default"}}`...)
			}
		}
		dst = append(dst, ']')
		switch r.choice {
		case choiceAuto:
			dst = append(dst, `,"toolChoice":{"auto":{}}`...)
		case choiceAny:
			dst = append(dst, `,"toolChoice":{"any":{}}`...)
		case choiceTool:
			dst = append(dst, `,"toolChoice":{"tool":{"name":`...)
			dst = llm.AppendString(dst, r.choiceName)
			dst = append(dst, `}}`...)
		}
		dst = append(dst, '}')
	case r.hasToolHistory():
		// No tools offered (or tool_choice none, which Converse lacks): the
		// placeholder keeps the history valid without offering a tool.
		dst = append(dst, `,"toolConfig":{"tools":[`...)
		dst = append(dst, bedrockPlaceholderTool...)
		dst = append(dst, `]}`...)
	}
	budget := thinkingBudget(r.thinkingBudget, maxTokens)
	if budget > 0 || r.topK.Present() {
		// Model-specific fields; these are the Anthropic models' names.
		dst = append(dst, `,"additionalModelRequestFields":{`...)
		k := 0
		if budget > 0 {
			dst = comma(dst, &k)
			dst = append(dst, `"thinking":{"type":"enabled","budget_tokens":`...)
			dst = appendInt(dst, int64(budget))
			dst = append(dst, '}')
		} else if r.topK.Present() {
			dst = comma(dst, &k)
			dst = append(dst, `"top_k":`...)
			dst = append(dst, r.topK...)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

func (t *translator) appendBedrockBlock(dst []byte, b *block, k *int) ([]byte, error) {
	switch b.kind {
	case kText:
		if b.text.Blank() {
			return dst, nil // Converse refuses blank text blocks
		}
		dst = comma(dst, k)
		dst = append(dst, `{"text":`...)
		dst = append(dst, b.text...)
		dst = append(dst, '}')
	case kImage:
		var err error
		if dst, err = appendBedrockImage(comma(dst, k), b); err != nil {
			return dst, err
		}
	case kToolUse:
		if !validBedrockToolName(b.name) {
			return dst, badRequest("tool name " + quoteForError(b.name) + " is not valid for Bedrock ([a-zA-Z0-9_-]{1,64})")
		}
		dst = comma(dst, k)
		dst = append(dst, `{"toolUse":{"toolUseId":`...)
		dst = llm.AppendString(dst, b.id)
		dst = append(dst, `,"name":`...)
		dst = llm.AppendString(dst, b.name)
		dst = append(dst, `,"input":`...)
		dst = appendArgsObject(dst, b)
		dst = append(dst, `}}`...)
	case kToolResult:
		dst = comma(dst, k)
		dst = append(dst, `{"toolResult":{"toolUseId":`...)
		dst = llm.AppendString(dst, b.id)
		dst = append(dst, `,"content":[`...)
		if b.nsub > 0 {
			for i, s := range t.req.subBlocks(b) {
				if i > 0 {
					dst = append(dst, ',')
				}
				switch s.kind {
				case kText:
					dst = append(dst, `{"text":`...)
					dst = append(dst, s.text...)
					dst = append(dst, '}')
				case kImage:
					var err error
					if dst, err = appendBedrockImage(dst, &s); err != nil {
						return dst, err
					}
				}
			}
		} else {
			dst = append(dst, `{"text":`...)
			dst = appendTextOrEmpty(dst, b.text)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
		if b.isError {
			dst = append(dst, `,"status":"error"`...)
		}
		dst = append(dst, `}}`...)
	case kThinking:
		if !b.sig.IsString() || b.sig.Blank() {
			return dst, nil // Converse refuses unsigned reasoning
		}
		dst = comma(dst, k)
		dst = append(dst, `{"reasoningContent":{"reasoningText":{"text":`...)
		dst = appendTextOrEmpty(dst, b.text)
		dst = append(dst, `,"signature":`...)
		dst = append(dst, b.sig...)
		dst = append(dst, `}}}`...)
	case kRedacted:
		dst = comma(dst, k)
		dst = append(dst, `{"reasoningContent":{"redactedContent":`...)
		dst = appendTextOrEmpty(dst, b.text)
		dst = append(dst, `}}`...)
	}
	if b.cache.Present() && *k > 0 {
		dst = append(dst, `,{"cachePoint":{"type":"default"}}`...)
	}
	return dst, nil
}

func appendBedrockImage(dst []byte, b *block) ([]byte, error) {
	if b.url != nil {
		return dst, badRequest("image URLs cannot be sent to Bedrock; send the image as base64 data")
	}
	format := imageFormat(b.media)
	if format == "" {
		return dst, badRequest("image type " + quoteForError(string(b.media)) + " cannot be sent to Bedrock (png, jpeg, gif, webp)")
	}
	dst = append(dst, `{"image":{"format":"`...)
	dst = append(dst, format...)
	dst = append(dst, `","source":{"bytes":`...)
	dst = llm.AppendString(dst, b.data)
	return append(dst, `}}}`...), nil
}

func (t *translator) readBedrockResponse(body []byte) error {
	g := &t.bdResp
	if err := g.Decode(&t.dec, body); err != nil {
		return providerInvalid(err)
	}
	if g.StopReason == "" && len(g.Output.Message.Content) == 0 {
		if e := answerError(body, Bedrock); e != nil {
			return e
		}
	}
	r := &t.resp
	r.usage = bedrockUsage(&g.Usage)
	r.stop = bedrockStop(g.StopReason)
	for i := range g.Output.Message.Content {
		c := &g.Output.Message.Content[i]
		switch {
		case c.Text.IsString():
			if len(c.Text) > 2 { // an empty text block makes none
				r.blocks = append(r.blocks, block{kind: kText, text: c.Text})
			}
		case c.ToolUse.Name != "":
			r.blocks = append(r.blocks, block{kind: kToolUse, id: c.ToolUse.ToolUseID, name: c.ToolUse.Name, input: c.ToolUse.Input})
		case c.ReasoningContent.ReasoningText.Text.IsString():
			rt := &c.ReasoningContent.ReasoningText
			r.blocks = append(r.blocks, block{kind: kThinking, text: rt.Text, sig: rt.Signature})
		case c.ReasoningContent.RedactedContent.IsString():
			r.blocks = append(r.blocks, block{kind: kRedacted, text: c.ReasoningContent.RedactedContent})
		}
	}
	return nil
}

func bedrockUsage(u *llm.BedrockUsage) Usage {
	return Usage{
		InputTokens:           u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens,
		OutputTokens:          u.OutputTokens,
		CachedInputTokens:     u.CacheReadInputTokens,
		CacheWriteInputTokens: u.CacheWriteInputTokens,
	}
}

func bedrockStop(reason string) stopReason {
	switch reason {
	case "":
		return stopNone
	case "max_tokens", "model_context_window_exceeded":
		return stopMaxTokens
	case "stop_sequence":
		return stopSequence
	case "tool_use":
		return stopToolUse
	case "guardrail_intervened", "content_filtered":
		return stopFilter
	}
	return stopEnd
}
