package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// OpenAI Chat Completions: requests and responses (streams: stream_chat.go).

func (t *translator) readChatRequest(body []byte) error {
	c := &t.chatReq
	if err := c.Decode(&t.dec, body); err != nil {
		return requestError("chat completions request", body, err, true, func(b []byte) error { return c.Decode(&t.dec, b) })
	}
	r := &t.req
	r.model, r.stream, r.includeUsage = c.Model, c.Stream, c.StreamOptions.IncludeUsage
	maxTokens, err := outputBound([]byte("max_tokens"), c.MaxTokens)
	if err != nil {
		return badRequest("invalid chat completions request: " + err.Error())
	}
	// max_completion_tokens, or max_tokens (deprecated by OpenAI, still
	// what most compatible providers read) when that is unset.
	if r.maxTokens, err = outputBound([]byte("max_completion_tokens"), c.MaxCompletionTokens); err != nil {
		return badRequest("invalid chat completions request: " + err.Error())
	}
	if r.maxTokens == 0 {
		r.maxTokens = maxTokens
	}
	r.temperature, r.topP, r.stop = c.Temperature, c.TopP, c.Stop
	r.seed, r.frequencyPenalty, r.presencePenalty = c.Seed, c.FrequencyPenalty, c.PresencePenalty
	r.user = c.User
	if c.N > 1 {
		return badRequest("n > 1 is not supported when translating")
	}
	// What the answer would carry: no other format returns it.
	if string(c.Logprobs) == "true" {
		return badRequest("logprobs is not supported when translating")
	}
	if asksLogprobs(c.TopLogprobs) {
		return badRequest("top_logprobs is not supported when translating")
	}
	if c.Audio.Present() {
		return badRequest("audio output is not supported when translating")
	}
	if c.WebSearchOptions.Present() {
		return badRequest("web_search_options (OpenAI's web search) cannot be translated")
	}
	if rf := c.ResponseFormat; rf.Present() {
		if v, err := llm.Lookup(rf, "type"); err != nil || string(v) != `"text"` {
			return badRequest("response_format is not supported when translating yet")
		}
	}
	r.thinkingBudget = budgetForEffort(c.ReasoningEffort)
	if string(c.ParallelToolCalls) == "false" {
		r.noParallel = true
	}
	for i := range c.Messages {
		m := &c.Messages[i]
		switch m.Role {
		case "system", "developer":
			if err := t.chatText(m.Content, &r.system, "system message"); err != nil {
				return err
			}
		case "user":
			if err := t.chatUserContent(m.Content); err != nil {
				return err
			}
		case "assistant":
			if err := t.chatAssistant(m); err != nil {
				return err
			}
		case "tool":
			b := block{kind: kToolResult, id: m.ToolCallID}
			if m.Content.IsString() {
				b.text = m.Content
			} else if m.Content.IsArray() {
				b.sub = len(r.sub)
				if err := t.chatText(m.Content, &r.sub, "tool message"); err != nil {
					return err
				}
				b.nsub = len(r.sub) - b.sub
			}
			r.add(roleUser, b)
		default:
			return badRequest("message role " + quoteForError(m.Role) + " cannot be translated")
		}
	}
	for i := range c.Tools {
		tl := &c.Tools[i]
		if tl.Type != "function" {
			return badRequest("tool type " + quoteForError(tl.Type) + " cannot be translated")
		}
		r.tools = append(r.tools, tool{name: tl.Function.Name, desc: tl.Function.Description, schema: tl.Function.Parameters, strict: tl.Function.Strict})
	}
	return t.chatToolChoice(c.ToolChoice)
}

// chatText appends the text of a string or array content to dst as blocks.
func (t *translator) chatText(content llm.Raw, dst *[]block, what string) error {
	switch {
	case content.IsString():
		*dst = append(*dst, block{kind: kText, text: content})
	case content.IsArray():
		if err := t.chatDecodeParts(content); err != nil {
			return err
		}
		for i := range t.chatParts {
			p := &t.chatParts[i]
			if p.Type != "text" {
				return badRequest(what + " part type " + quoteForError(p.Type) + " cannot be translated")
			}
			if !p.Text.IsString() {
				return errNoText
			}
			*dst = append(*dst, block{kind: kText, text: p.Text})
		}
	}
	return nil
}

func (t *translator) chatDecodeParts(content llm.Raw) error {
	t.chatParts = clearParts(t.chatParts)
	if err := t.dec.DecodeTrusted(content, &t.chatParts); err != nil {
		return requestError("message content", content, err, false, func(b []byte) error {
			t.chatParts = clearParts(t.chatParts)
			return t.dec.DecodeTrusted(b, &t.chatParts)
		})
	}
	return nil
}

var errNoText = badRequest("text part without a text string")

func clearParts[T any](s []T) []T {
	clear(s[:cap(s)])
	return s[:0]
}

func (t *translator) chatUserContent(content llm.Raw) error {
	r := &t.req
	if content.IsString() {
		r.add(roleUser, block{kind: kText, text: content})
		return nil
	}
	if !content.IsArray() {
		return badRequest("user message without content")
	}
	if err := t.chatDecodeParts(content); err != nil {
		return err
	}
	for i := range t.chatParts {
		p := &t.chatParts[i]
		switch p.Type {
		case "text":
			if !p.Text.IsString() {
				return errNoText
			}
			r.add(roleUser, block{kind: kText, text: p.Text})
		case "image_url":
			b, err := imageBlock(p.ImageURL.URL)
			if err != nil {
				return err
			}
			r.add(roleUser, b)
		default:
			return badRequest("content part type " + quoteForError(p.Type) + " cannot be translated yet")
		}
	}
	return nil
}

func (t *translator) chatAssistant(m *llm.ChatMessage) error {
	r := &t.req
	switch {
	case m.Content.IsString():
		if !m.Content.Blank() {
			r.add(roleAssistant, block{kind: kText, text: m.Content})
		}
	case m.Content.IsArray():
		if err := t.chatDecodeParts(m.Content); err != nil {
			return err
		}
		for i := range t.chatParts {
			p := &t.chatParts[i]
			text := p.Text
			if p.Type == "refusal" {
				text = p.Refusal
			}
			if text.IsString() && !text.Blank() {
				r.add(roleAssistant, block{kind: kText, text: text})
			}
		}
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		r.add(roleAssistant, block{kind: kToolUse, id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments,
			sig: tc.ExtraContent.Google.ThoughtSignature})
	}
	return nil
}

func (t *translator) chatToolChoice(v llm.Raw) error {
	r := &t.req
	switch string(v) {
	case "", "null":
	case `"auto"`:
		r.choice = choiceAuto
	case `"required"`:
		r.choice = choiceAny
	case `"none"`:
		r.choice = choiceNone
	default:
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := t.dec.DecodeTrusted(v, &c); err != nil || c.Type != "function" || c.Function.Name == "" {
			return badRequest("tool_choice cannot be translated")
		}
		r.choice, r.choiceName = choiceTool, c.Function.Name
	}
	return nil
}

// writeChatRequest writes the request for an OpenAI-compatible provider.
func (t *translator) writeChatRequest(dst []byte) ([]byte, error) {
	r := &t.req
	dst = append(dst, `{"model":`...)
	dst = llm.AppendString(dst, r.model)
	dst = append(dst, `,"messages":[`...)
	n := 0
	for i := range r.system {
		dst = comma(dst, &n)
		dst = append(dst, `{"role":"system","content":`...)
		dst = append(dst, r.system[i].text...)
		dst = append(dst, '}')
	}
	for _, m := range r.messages {
		blocks := r.msgBlocks(m)
		if m.role == roleAssistant {
			dst = comma(dst, &n)
			var err error
			if dst, err = t.appendChatAssistant(dst, blocks); err != nil {
				return dst, err
			}
			continue
		}
		// Tool results become tool messages, which must follow the
		// assistant's message; the rest of the turn a user message.
		rest := 0
		for i := range blocks {
			b := &blocks[i]
			if b.kind != kToolResult {
				rest++
				continue
			}
			dst = comma(dst, &n)
			dst = append(dst, `{"role":"tool","tool_call_id":`...)
			dst = llm.AppendString(dst, b.id)
			dst = append(dst, `,"content":`...)
			var err error
			if dst, err = t.appendToolResultText(dst, b); err != nil {
				return dst, err
			}
			dst = append(dst, '}')
		}
		if rest == 0 {
			continue
		}
		dst = comma(dst, &n)
		dst = append(dst, `{"role":"user","content":[`...)
		k := 0
		for i := range blocks {
			b := &blocks[i]
			switch b.kind {
			case kText:
				if k > 0 {
					dst = append(dst, ',')
				}
				k++
				dst = append(dst, `{"type":"text","text":`...)
				dst = append(dst, b.text...)
				dst = append(dst, '}')
			case kImage:
				if k > 0 {
					dst = append(dst, ',')
				}
				k++
				dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
				dst = appendDataURL(dst, b)
				dst = append(dst, `}}`...)
			case kToolResult:
			default:
				return dst, unsupported("a user content block", Chat)
			}
		}
		dst = append(dst, `]}`...)
	}
	dst = append(dst, ']')
	if r.maxTokens > 0 {
		dst = append(dst, `,"max_completion_tokens":`...)
		dst = appendInt(dst, int64(r.maxTokens))
		r.outMaxTokens = r.maxTokens
	}
	if r.stream {
		dst = append(dst, `,"stream":true`...)
		// Messages and Responses clients always get usage.
		dst = append(dst, `,"stream_options":{"include_usage":true}`...)
	}
	dst = appendOptionalRaw(dst, `,"temperature":`, r.temperature)
	dst = appendOptionalRaw(dst, `,"top_p":`, r.topP)
	if r.stop.Present() {
		dst = append(dst, `,"stop":`...)
		dst = appendStringArray(dst, r.stop)
	}
	if len(r.tools) > 0 {
		dst = append(dst, `,"tools":[`...)
		for i := range r.tools {
			tl := &r.tools[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":"function","function":{"name":`...)
			dst = llm.AppendString(dst, tl.name)
			dst = appendOptionalRaw(dst, `,"description":`, tl.desc)
			dst = append(dst, `,"parameters":`...)
			dst = appendSchema(dst, tl.schema)
			dst = appendOptionalRaw(dst, `,"strict":`, tl.strict)
			dst = append(dst, `}}`...)
		}
		dst = append(dst, ']')
		if r.noParallel {
			dst = append(dst, `,"parallel_tool_calls":false`...)
		}
	}
	switch r.choice {
	case choiceAuto:
		dst = append(dst, `,"tool_choice":"auto"`...)
	case choiceAny:
		dst = append(dst, `,"tool_choice":"required"`...)
	case choiceNone:
		dst = append(dst, `,"tool_choice":"none"`...)
	case choiceTool:
		dst = append(dst, `,"tool_choice":{"type":"function","function":{"name":`...)
		dst = llm.AppendString(dst, r.choiceName)
		dst = append(dst, `}}`...)
	}
	if r.thinkingBudget > 0 {
		dst = append(dst, `,"reasoning_effort":`...)
		dst = append(dst, effortForBudget(r.thinkingBudget)...)
	}
	if r.user != "" {
		dst = append(dst, `,"user":`...)
		dst = llm.AppendString(dst, r.user)
	}
	return append(dst, '}'), nil
}

func effortForBudget(budget int) string {
	switch {
	case budget <= 1024:
		return `"low"`
	case budget <= 2048:
		return `"medium"`
	}
	return `"high"`
}

func appendOptionalRaw(dst []byte, key string, v llm.Raw) []byte {
	if !v.Present() {
		return dst
	}
	dst = append(dst, key...)
	return append(dst, v...)
}

// appendSchema writes a tool's input schema ({"type":"object"} when none).
func appendSchema(dst []byte, schema llm.Raw) []byte {
	if schema.Present() {
		return append(dst, schema...)
	}
	return append(dst, `{"type":"object","properties":{}}`...)
}

// appendChatAssistant writes an assistant turn: its text and tool calls.
// Thinking is left out (OpenAI cannot verify another provider's, as with
// Gemini); an image, which an assistant message cannot hold, is refused.
func (t *translator) appendChatAssistant(dst []byte, blocks []block) ([]byte, error) {
	if countKind(blocks, kImage) > 0 {
		return dst, unsupported("an image in an assistant turn", Chat)
	}
	dst = append(dst, `{"role":"assistant","content":`...)
	if countKind(blocks, kText) > 0 {
		dst = appendConcat(dst, blocks, kText)
	} else {
		dst = append(dst, "null"...)
	}
	if countKind(blocks, kToolUse) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		k := 0
		for i := range blocks {
			b := &blocks[i]
			if b.kind != kToolUse {
				continue
			}
			if k > 0 {
				dst = append(dst, ',')
			}
			k++
			dst = appendChatToolCall(dst, b, nil)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

// appendChatToolCall writes a tool call, with the Gemini signature sig
// when it has one (a client's; a provider is not sent it).
func appendChatToolCall(dst []byte, b *block, sig llm.Raw) []byte {
	dst = append(dst, `{"id":`...)
	dst = llm.AppendString(dst, b.id)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = llm.AppendString(dst, b.name)
	dst = append(dst, `,"arguments":`...)
	dst = appendArgsString(dst, b)
	dst = append(dst, '}')
	if hasSig(sig) {
		dst = appendChatExtraContent(dst, sig)
	}
	return append(dst, '}')
}

// appendToolResultText writes a tool result's content as one string token.
// OpenAI tool messages carry text only: a result holding an image is
// refused, not sent without it.
func (t *translator) appendToolResultText(dst []byte, b *block) ([]byte, error) {
	if b.nsub == 0 {
		if b.text.IsString() {
			return append(dst, b.text...), nil
		}
		return append(dst, `""`...), nil
	}
	sub := t.req.subBlocks(b)
	if countKind(sub, kText) != len(sub) {
		return dst, unsupported("a tool result's non-text content", Chat)
	}
	return appendConcat(dst, sub, kText), nil
}

func (t *translator) readChatResponse(body []byte) error {
	c := &t.chatResp
	if err := c.Decode(&t.dec, body); err != nil {
		return providerInvalid(err)
	}
	r := &t.resp
	r.id, r.model, r.created = c.ID, c.Model, c.Created
	r.usage = chatUsage(&c.Usage)
	if len(c.Choices) == 0 {
		if e := answerError(body, Chat); e != nil {
			return e
		}
		return nil
	}
	ch := &c.Choices[0]
	m := &ch.Message
	if m.ReasoningContent.IsString() {
		r.blocks = append(r.blocks, block{kind: kThinking, text: m.ReasoningContent})
	}
	if m.Content.IsString() {
		// An empty content beside tool calls ("content": "", as some
		// OpenAI-compatible servers send) is no text block: an Anthropic
		// client sending the turn back would have it refused, and a
		// Responses client would get an empty message item.
		if len(m.Content) > 2 || len(m.ToolCalls) == 0 {
			r.blocks = append(r.blocks, block{kind: kText, text: m.Content})
		}
	} else if m.Refusal.IsString() {
		r.blocks = append(r.blocks, block{kind: kText, text: m.Refusal})
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		r.blocks = append(r.blocks, block{kind: kToolUse, id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments})
	}
	r.stop = chatStop(ch.FinishReason)
	return nil
}

func chatUsage(u *llm.ChatUsage) Usage {
	return Usage{
		InputTokens:       u.PromptTokens,
		OutputTokens:      u.CompletionTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
	}
}

func chatStop(reason string) stopReason {
	switch reason {
	case "":
		return stopNone
	case "length":
		return stopMaxTokens
	case "tool_calls", "function_call":
		return stopToolUse
	case "content_filter":
		return stopFilter
	}
	return stopEnd
}

func chatFinish(s stopReason) string {
	switch s {
	case stopMaxTokens:
		return `"length"`
	case stopToolUse:
		return `"tool_calls"`
	case stopFilter:
		return `"content_filter"`
	case stopNone:
		return "null"
	}
	return `"stop"`
}

func (t *translator) writeChatResponse(dst []byte) []byte {
	r := &t.resp
	dst = append(dst, `{"id":`...)
	if r.id != "" {
		dst = llm.AppendString(dst, r.id)
	} else {
		dst = append(dst, '"')
		dst = appendID(dst, "chatcmpl-")
		dst = append(dst, '"')
	}
	dst = append(dst, `,"object":"chat.completion","created":`...)
	created := r.created
	if created == 0 {
		created = nowUnix()
	}
	dst = appendInt(dst, created)
	dst = append(dst, `,"model":`...)
	dst = llm.AppendString(dst, r.model)
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if countKind(r.blocks, kText) > 0 {
		dst = t.appendChatContent(dst)
	} else {
		dst = append(dst, "null"...)
	}
	if countKind(r.blocks, kThinking) > 0 {
		dst = append(dst, `,"reasoning_content":`...)
		dst = appendConcat(dst, r.blocks, kThinking)
	}
	if countKind(r.blocks, kToolUse) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		k := 0
		for i := range r.blocks {
			if b := &r.blocks[i]; b.kind == kToolUse {
				if k > 0 {
					dst = append(dst, ',')
				}
				k++
				dst = appendChatToolCall(dst, b, b.sig)
			}
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"finish_reason":`...)
	dst = append(dst, chatFinish(r.stop)...)
	dst = append(dst, `}]`...)
	if r.usage.Reported() {
		// (none invented when the provider reported none: the member is
		// optional)
		dst = append(dst, `,"usage":`...)
		dst = appendChatUsage(dst, r.usage)
	}
	return append(dst, '}')
}

func appendChatUsage(dst []byte, u Usage) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = appendInt(dst, u.InputTokens)
	dst = append(dst, `,"completion_tokens":`...)
	dst = appendInt(dst, u.OutputTokens)
	dst = append(dst, `,"total_tokens":`...)
	dst = appendInt(dst, u.TotalTokens())
	if u.CachedInputTokens > 0 {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = appendInt(dst, u.CachedInputTokens)
		dst = append(dst, '}')
	}
	if u.ReasoningTokens > 0 {
		dst = append(dst, `,"completion_tokens_details":{"reasoning_tokens":`...)
		dst = appendInt(dst, u.ReasoningTokens)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// quoteForError quotes a client-supplied name for an error message, cut
// short.
func quoteForError(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return string(llm.AppendString(nil, s))
}

func providerInvalid(err error) error {
	return &Error{Status: 502, Message: "invalid response from provider: " + err.Error()}
}
