package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// Anthropic Messages: requests and responses (streams: stream_anthropic.go).

func (t *translator) readAnthropicRequest(body []byte) error {
	a := &t.anReq
	if err := a.Decode(&t.dec, body); err != nil {
		return requestError("messages request", body, err, true, func(b []byte) error { return a.Decode(&t.dec, b) })
	}
	r := &t.req
	var err error
	if r.maxTokens, err = outputBound([]byte("max_tokens"), a.MaxTokens); err != nil {
		return badRequest("invalid messages request: " + err.Error())
	}
	r.model, r.stream = a.Model, a.Stream
	if a.MCPServers.Present() {
		return badRequest("mcp_servers (Anthropic's MCP connector) cannot be translated")
	}
	r.temperature, r.topP, r.topK, r.stop = a.Temperature, a.TopP, a.TopK, a.StopSequences
	if a.Thinking.Type == "enabled" {
		r.thinkingBudget = a.Thinking.BudgetTokens
	}
	switch {
	case a.System.IsString():
		r.system = append(r.system, block{kind: kText, text: a.System})
	case a.System.IsArray():
		if err := t.anDecode(a.System, &t.anBlocks); err != nil {
			return err
		}
		for i := range t.anBlocks {
			b := &t.anBlocks[i]
			if b.Type != "text" {
				return badRequest("system block type " + quoteForError(b.Type) + " cannot be translated")
			}
			if !b.Text.IsString() {
				return errNoText
			}
			r.system = append(r.system, block{kind: kText, text: b.Text, cache: b.CacheControl})
		}
	}
	for i := range a.Messages {
		m := &a.Messages[i]
		ro := roleUser
		switch m.Role {
		case "user":
		case "assistant":
			ro = roleAssistant
		default:
			return badRequest("message role " + quoteForError(m.Role) + " cannot be translated")
		}
		if m.Content.IsString() {
			r.add(ro, block{kind: kText, text: m.Content})
			continue
		}
		if err := t.anDecode(m.Content, &t.anBlocks); err != nil {
			return err
		}
		var sig llm.Raw // a Gemini signature for the next part (thoughtsig.go)
		for j := range t.anBlocks {
			b, err := t.anBlock(&t.anBlocks[j], true)
			if err != nil {
				return err
			}
			switch {
			case b.kind == kThinking:
				if s, ok := unmarkSig(&r.arena, b.sig); ok {
					// Gemini's: no other provider could verify the block.
					sig = s
					continue
				}
			case b.kind == kText || b.kind == kToolUse:
				b.sig, sig = sig, nil
			}
			r.add(ro, b)
		}
	}
	for i := range a.Tools {
		tl := &a.Tools[i]
		if tl.Type != "" && tl.Type != "custom" {
			return badRequest("server tool " + quoteForError(tl.Type) + " cannot be translated")
		}
		r.tools = append(r.tools, tool{name: tl.Name, desc: tl.Description, schema: tl.InputSchema, cache: tl.CacheControl})
	}
	switch a.ToolChoice.Type {
	case "":
	case "auto":
		r.choice = choiceAuto
	case "any":
		r.choice = choiceAny
	case "none":
		r.choice = choiceNone
	case "tool":
		r.choice, r.choiceName = choiceTool, a.ToolChoice.Name
	default:
		return badRequest("tool_choice " + quoteForError(a.ToolChoice.Type) + " cannot be translated")
	}
	r.noParallel = a.ToolChoice.DisableParallelToolUse
	return nil
}

func (t *translator) anDecode(content llm.Raw, dst *[]llm.AnthropicBlock) error {
	*dst = clearParts(*dst)
	if err := t.dec.DecodeTrusted(content, dst); err != nil {
		return requestError("content", content, err, false, func(b []byte) error {
			*dst = clearParts(*dst)
			return t.dec.DecodeTrusted(b, dst)
		})
	}
	return nil
}

// anBlock reads one content block; nested tool result content goes to
// req.sub.
func (t *translator) anBlock(a *llm.AnthropicBlock, top bool) (block, error) {
	switch a.Type {
	case "text":
		if !a.Text.IsString() {
			return block{}, errNoText
		}
		return block{kind: kText, text: a.Text, cache: a.CacheControl}, nil
	case "image":
		b := block{kind: kImage, cache: a.CacheControl}
		switch a.Source.Type {
		case "base64":
			data, err := llm.Text(nil, a.Source.Data)
			if err != nil {
				return b, badRequest("image data is not a string")
			}
			b.media, b.data = bytesOf(a.Source.MediaType), data
		case "url":
			if !a.Source.URL.IsString() {
				return b, badRequest("image url is not a string")
			}
			b.url = a.Source.URL
		default:
			return b, badRequest("image source " + quoteForError(a.Source.Type) + " cannot be translated")
		}
		return b, nil
	case "tool_use":
		if !top {
			break
		}
		return block{kind: kToolUse, id: a.ID, name: a.Name, input: a.Input, cache: a.CacheControl}, nil
	case "tool_result":
		if !top {
			break
		}
		b := block{kind: kToolResult, id: a.ToolUseID, isError: a.IsError, cache: a.CacheControl}
		switch {
		case a.Content.IsString():
			b.text = a.Content
		case a.Content.IsArray():
			if err := t.anDecode(a.Content, &t.anSub); err != nil {
				return b, err
			}
			b.sub = len(t.req.sub)
			for i := range t.anSub {
				s, err := t.anBlock(&t.anSub[i], false)
				if err != nil {
					return b, err
				}
				t.req.sub = append(t.req.sub, s)
			}
			b.nsub = len(t.req.sub) - b.sub
		}
		return b, nil
	case "thinking":
		if !top {
			break
		}
		return block{kind: kThinking, text: a.Thinking, sig: a.Signature}, nil
	case "redacted_thinking":
		if !top {
			break
		}
		return block{kind: kRedacted, text: a.Data}, nil
	}
	return block{}, badRequest("content block type " + quoteForError(a.Type) + " cannot be translated")
}

func (t *translator) writeAnthropicRequest(dst []byte, o *Options) ([]byte, error) {
	r := &t.req
	maxTokens := r.maxTokens
	if maxTokens <= 0 {
		maxTokens = o.DefaultMaxTokens
	}
	r.outMaxTokens = maxTokens
	dst = append(dst, `{"model":`...)
	dst = llm.AppendString(dst, r.model)
	dst = append(dst, `,"max_tokens":`...)
	dst = appendInt(dst, int64(maxTokens))
	if len(r.system) > 0 {
		dst = append(dst, `,"system":[`...)
		for i := range r.system {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = t.appendAnthropicBlock(dst, &r.system[i])
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"messages":[`...)
	for i, m := range r.messages {
		if i > 0 {
			dst = append(dst, ',')
		}
		if m.role == roleAssistant {
			dst = append(dst, `{"role":"assistant","content":[`...)
		} else {
			dst = append(dst, `{"role":"user","content":[`...)
		}
		blocks := r.msgBlocks(m)
		for j := range blocks {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = t.appendAnthropicBlock(dst, &blocks[j])
		}
		dst = append(dst, `]}`...)
	}
	dst = append(dst, ']')
	if r.stream {
		dst = append(dst, `,"stream":true`...)
	}
	dst = appendOptionalRaw(dst, `,"temperature":`, r.temperature)
	dst = appendOptionalRaw(dst, `,"top_p":`, r.topP)
	dst = appendOptionalRaw(dst, `,"top_k":`, r.topK)
	if r.stop.Present() {
		dst = append(dst, `,"stop_sequences":`...)
		dst = appendStringArray(dst, r.stop)
	}
	if len(r.tools) > 0 {
		dst = append(dst, `,"tools":[`...)
		for i := range r.tools {
			tl := &r.tools[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = llm.AppendString(dst, tl.name)
			dst = appendOptionalRaw(dst, `,"description":`, tl.desc)
			dst = append(dst, `,"input_schema":`...)
			dst = appendSchema(dst, tl.schema)
			dst = appendOptionalRaw(dst, `,"cache_control":`, tl.cache)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if r.choice != choiceUnset || r.noParallel {
		dst = append(dst, `,"tool_choice":{"type":`...)
		switch r.choice {
		case choiceAny:
			dst = append(dst, `"any"`...)
		case choiceNone:
			dst = append(dst, `"none"`...)
		case choiceTool:
			dst = append(dst, `"tool","name":`...)
			dst = llm.AppendString(dst, r.choiceName)
		default:
			dst = append(dst, `"auto"`...)
		}
		if r.noParallel && r.choice != choiceNone {
			dst = append(dst, `,"disable_parallel_tool_use":true`...)
		}
		dst = append(dst, '}')
	}
	if budget := thinkingBudget(r.thinkingBudget, maxTokens); budget > 0 {
		dst = append(dst, `,"thinking":{"type":"enabled","budget_tokens":`...)
		dst = appendInt(dst, int64(budget))
		dst = append(dst, '}')
	}
	if r.user != "" {
		dst = append(dst, `,"metadata":{"user_id":`...)
		dst = llm.AppendString(dst, r.user)
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// thinkingBudget fits a thinking budget to Anthropic's rules: at least 1024
// and below max_tokens (else no thinking).
func thinkingBudget(budget, maxTokens int) int {
	if budget >= maxTokens {
		budget = maxTokens - 1
	}
	if budget < 1024 {
		return 0
	}
	return budget
}

func (t *translator) appendAnthropicBlock(dst []byte, b *block) []byte {
	switch b.kind {
	case kText:
		dst = append(dst, `{"type":"text","text":`...)
		dst = append(dst, b.text...)
	case kImage:
		dst = append(dst, `{"type":"image","source":`...)
		if b.url != nil {
			dst = append(dst, `{"type":"url","url":`...)
			dst = append(dst, b.url...)
		} else {
			dst = append(dst, `{"type":"base64","media_type":`...)
			dst = llm.AppendString(dst, b.media)
			dst = append(dst, `,"data":`...)
			dst = llm.AppendString(dst, b.data)
		}
		dst = append(dst, '}')
	case kToolUse:
		dst = append(dst, `{"type":"tool_use","id":`...)
		dst = llm.AppendString(dst, b.id)
		dst = append(dst, `,"name":`...)
		dst = llm.AppendString(dst, b.name)
		dst = append(dst, `,"input":`...)
		dst = appendArgsObject(dst, b)
	case kToolResult:
		dst = append(dst, `{"type":"tool_result","tool_use_id":`...)
		dst = llm.AppendString(dst, b.id)
		if b.isError {
			dst = append(dst, `,"is_error":true`...)
		}
		if b.nsub > 0 {
			dst = append(dst, `,"content":[`...)
			for i, s := range t.req.subBlocks(b) {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = t.appendAnthropicBlock(dst, &s)
			}
			dst = append(dst, ']')
		} else if b.text.IsString() {
			dst = append(dst, `,"content":`...)
			dst = append(dst, b.text...)
		}
	case kThinking:
		dst = append(dst, `{"type":"thinking","thinking":`...)
		dst = appendTextOrEmpty(dst, b.text)
		dst = append(dst, `,"signature":`...)
		dst = appendTextOrEmpty(dst, b.sig)
	case kRedacted:
		dst = append(dst, `{"type":"redacted_thinking","data":`...)
		dst = appendTextOrEmpty(dst, b.text)
	}
	dst = appendOptionalRaw(dst, `,"cache_control":`, b.cache)
	return append(dst, '}')
}

// carriesSig reports a text or tool use block with a Gemini signature.
func carriesSig(b *block) bool {
	return (b.kind == kText || b.kind == kToolUse) && hasSig(b.sig)
}

// unsignedThinking reports a thinking block without a signature.
func unsignedThinking(b *block) bool { return b.kind == kThinking && !hasSig(b.sig) }

// appendSigThinking writes a thinking block of text (a string token, or
// none) whose signature is the Gemini signature sig of the part after it.
func appendSigThinking(dst []byte, text, sig llm.Raw) []byte {
	dst = append(dst, `{"type":"thinking","thinking":`...)
	dst = appendTextOrEmpty(dst, text)
	dst = append(dst, `,"signature":`...)
	dst = appendMarkedSig(dst, sig)
	return append(dst, '}')
}

func appendTextOrEmpty(dst []byte, tok llm.Raw) []byte {
	if tok.IsString() {
		return append(dst, tok...)
	}
	return append(dst, `""`...)
}

func (t *translator) readAnthropicResponse(body []byte) error {
	a := &t.anResp
	if err := a.Decode(&t.dec, body); err != nil {
		return providerInvalid(err)
	}
	if a.Type != "message" {
		if e := answerError(body, Messages); e != nil {
			return e
		}
	}
	r := &t.resp
	r.id, r.model = a.ID, a.Model
	r.usage = anthropicUsage(&a.Usage)
	r.stop, r.stopSeq = anthropicStop(a.StopReason), a.StopSequence
	for i := range a.Content {
		c := &a.Content[i]
		switch c.Type {
		case "text":
			r.blocks = append(r.blocks, block{kind: kText, text: c.Text})
		case "tool_use":
			r.blocks = append(r.blocks, block{kind: kToolUse, id: c.ID, name: c.Name, input: c.Input})
		case "thinking":
			r.blocks = append(r.blocks, block{kind: kThinking, text: c.Thinking, sig: c.Signature})
		case "redacted_thinking":
			r.blocks = append(r.blocks, block{kind: kRedacted, text: c.Data})
		}
		// Server tools' blocks (server_tool_use, web_search_tool_result, ...)
		// have no counterpart in the other formats.
	}
	return nil
}

func anthropicUsage(u *llm.AnthropicUsage) Usage {
	return Usage{
		InputTokens:           u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens:          u.OutputTokens,
		CachedInputTokens:     u.CacheReadInputTokens,
		CacheWriteInputTokens: u.CacheCreationInputTokens,
	}
}

func anthropicStop(reason string) stopReason {
	switch reason {
	case "":
		return stopNone
	case "max_tokens", "model_context_window_exceeded":
		return stopMaxTokens
	case "stop_sequence":
		return stopSequence
	case "tool_use":
		return stopToolUse
	case "refusal":
		return stopFilter
	case "pause_turn":
		return stopPause
	}
	return stopEnd
}

func anthropicStopName(s stopReason) string {
	switch s {
	case stopMaxTokens:
		return `"max_tokens"`
	case stopSequence:
		return `"stop_sequence"`
	case stopToolUse:
		return `"tool_use"`
	case stopFilter:
		return `"refusal"`
	case stopPause:
		return `"pause_turn"`
	case stopNone:
		return "null"
	}
	return `"end_turn"`
}

func (t *translator) writeAnthropicResponse(dst []byte) []byte {
	r := &t.resp
	dst = append(dst, `{"id":`...)
	if r.id != "" {
		dst = llm.AppendString(dst, r.id)
	} else {
		dst = append(dst, '"')
		dst = appendID(dst, "msg_")
		dst = append(dst, '"')
	}
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = llm.AppendString(dst, r.model)
	dst = append(dst, `,"content":[`...)
	n := 0
	for i := range r.blocks {
		b := &r.blocks[i]
		// A part's Gemini signature goes in the thinking block before it:
		// its thought's, when that has no signature of its own, else one
		// of its own (thoughtsig.go).
		if carriesSig(b) && (i == 0 || !unsignedThinking(&r.blocks[i-1])) {
			dst = comma(dst, &n)
			dst = appendSigThinking(dst, nil, b.sig)
		}
		dst = comma(dst, &n)
		if unsignedThinking(b) && i+1 < len(r.blocks) && carriesSig(&r.blocks[i+1]) {
			dst = appendSigThinking(dst, b.text, r.blocks[i+1].sig)
			continue
		}
		dst = t.appendAnthropicBlock(dst, t.mask.textBlock(b))
	}
	dst = append(dst, `],"stop_reason":`...)
	dst = append(dst, anthropicStopName(r.stop)...)
	dst = append(dst, `,"stop_sequence":`...)
	if r.stopSeq.IsString() {
		dst = append(dst, r.stopSeq...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"usage":`...)
	dst = appendAnthropicUsage(dst, r.usage)
	return append(dst, '}')
}

func appendAnthropicUsage(dst []byte, u Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, max(0, u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens))
	dst = append(dst, `,"output_tokens":`...)
	dst = appendInt(dst, u.OutputTokens)
	if u.CacheWriteInputTokens > 0 {
		dst = append(dst, `,"cache_creation_input_tokens":`...)
		dst = appendInt(dst, u.CacheWriteInputTokens)
	}
	if u.CachedInputTokens > 0 {
		dst = append(dst, `,"cache_read_input_tokens":`...)
		dst = appendInt(dst, u.CachedInputTokens)
	}
	return append(dst, '}')
}
