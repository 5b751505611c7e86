package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// The OpenAI Responses API as a client format: requests are read into the
// common form (so Responses clients can use Anthropic, Bedrock, Gemini and
// Chat providers), responses written (streams: stream_responses.go).

func (t *translator) readResponsesRequest(body []byte) error {
	q := &t.rsReq
	if err := q.Decode(&t.dec, body); err != nil {
		return requestError("responses request", body, err, true, func(b []byte) error { return q.Decode(&t.dec, b) })
	}
	r := &t.req
	var err error
	if r.maxTokens, err = outputBound([]byte("max_output_tokens"), q.MaxOutputTokens); err != nil {
		return badRequest("invalid responses request: " + err.Error())
	}
	r.model, r.stream = q.Model, q.Stream
	r.temperature, r.topP, r.user = q.Temperature, q.TopP, q.User
	if asksLogprobs(q.TopLogprobs) {
		return badRequest("top_logprobs is not supported when translating")
	}
	r.thinkingBudget = budgetForEffort(q.Reasoning.Effort)
	if string(q.ParallelToolCalls) == "false" {
		r.noParallel = true
	}
	if q.PreviousResponseID != "" {
		return badRequest("previous_response_id needs a provider that stores responses; send the whole conversation in input")
	}
	// A conversation or a prompt template stored at OpenAI: another
	// provider would answer the input alone.
	if q.Conversation.Present() {
		return badRequest("conversation needs a provider that stores conversations; send the whole conversation in input")
	}
	if q.Prompt.Present() {
		return badRequest("prompt (a template stored at OpenAI) cannot be translated; send its text in instructions and input")
	}
	if q.Text.Present() {
		if f, err := llm.Lookup(q.Text, "format"); err != nil || f.Present() && !isTextFormat(f) {
			return badRequest("text.format is not supported when translating yet")
		}
	}
	if q.Instructions.IsString() {
		r.system = append(r.system, block{kind: kText, text: q.Instructions})
	}
	switch {
	case q.Input.IsString():
		r.add(roleUser, block{kind: kText, text: q.Input})
	case q.Input.IsArray():
		t.rsItems = clearParts(t.rsItems)
		if err := t.dec.DecodeTrusted(q.Input, &t.rsItems); err != nil {
			return requestError("input", q.Input, err, false, func(b []byte) error {
				t.rsItems = clearParts(t.rsItems)
				return t.dec.DecodeTrusted(b, &t.rsItems)
			})
		}
		for i := range t.rsItems {
			if err := t.responsesItem(&t.rsItems[i]); err != nil {
				return err
			}
		}
	default:
		return badRequest("input is required")
	}
	for i := range q.Tools {
		tl := &q.Tools[i]
		if tl.Type != "function" {
			return badRequest("tool type " + quoteForError(tl.Type) + " cannot be translated")
		}
		r.tools = append(r.tools, tool{name: tl.Name, desc: tl.Description, schema: tl.Parameters, strict: tl.Strict})
	}
	switch c := q.ToolChoice; string(c) {
	case "", "null":
	case `"auto"`:
		r.choice = choiceAuto
	case `"required"`:
		r.choice = choiceAny
	case `"none"`:
		r.choice = choiceNone
	default:
		var v struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := t.dec.DecodeTrusted(c, &v); err != nil || v.Type != "function" || v.Name == "" {
			return badRequest("tool_choice cannot be translated")
		}
		r.choice, r.choiceName = choiceTool, v.Name
	}
	return nil
}

func isTextFormat(f llm.Raw) bool {
	v, err := llm.Lookup(f, "type")
	return err == nil && string(v) == `"text"`
}

func (t *translator) responsesItem(it *llm.ResponsesItem) error {
	r := &t.req
	typ := it.Type
	if typ == "" && it.Role != "" {
		typ = "message"
	}
	switch typ {
	case "message":
		switch it.Role {
		case "system", "developer":
			return t.responsesContent(it.Content, roleUser, true)
		case "user":
			return t.responsesContent(it.Content, roleUser, false)
		case "assistant":
			return t.responsesContent(it.Content, roleAssistant, false)
		}
		return badRequest("message role " + quoteForError(it.Role) + " cannot be translated")
	case "function_call":
		id, sig := splitThoughtID(&r.arena, it.CallID)
		r.add(roleAssistant, block{kind: kToolUse, id: id, name: it.Name, args: it.Arguments, sig: sig})
	case "function_call_output":
		b := block{kind: kToolResult, id: thoughtIDBase(it.CallID)}
		if it.Output.IsString() {
			b.text = it.Output
		} else if it.Output.IsArray() {
			t.rsParts = clearParts(t.rsParts)
			if err := t.dec.DecodeTrusted(it.Output, &t.rsParts); err != nil {
				return requestError("function_call_output", it.Output, err, false, func(b []byte) error {
					t.rsParts = clearParts(t.rsParts)
					return t.dec.DecodeTrusted(b, &t.rsParts)
				})
			}
			b.sub = len(r.sub)
			for i := range t.rsParts {
				p := &t.rsParts[i]
				switch p.Type {
				case "input_text", "output_text":
					if !p.Text.IsString() {
						return errNoText
					}
					r.sub = append(r.sub, block{kind: kText, text: p.Text})
				case "input_image":
					ib, err := imageBlock(p.ImageURL)
					if err != nil {
						return err
					}
					r.sub = append(r.sub, ib)
				default:
					return badRequest("output part type " + quoteForError(p.Type) + " cannot be translated")
				}
			}
			b.nsub = len(r.sub) - b.sub
		}
		r.add(roleUser, b)
	case "reasoning":
		// OpenAI's reasoning items (encrypted or summarised) cannot be
		// replayed to another provider; the turn's text and calls remain.
	default:
		return badRequest("input item type " + quoteForError(typ) + " cannot be translated")
	}
	return nil
}

func (t *translator) responsesContent(content llm.Raw, ro role, system bool) error {
	r := &t.req
	if content.IsString() {
		b := block{kind: kText, text: content}
		if system {
			r.system = append(r.system, b)
		} else {
			r.add(ro, b)
		}
		return nil
	}
	if !content.IsArray() {
		return badRequest("message without content")
	}
	t.rsParts = clearParts(t.rsParts)
	if err := t.dec.DecodeTrusted(content, &t.rsParts); err != nil {
		return requestError("message content", content, err, false, func(b []byte) error {
			t.rsParts = clearParts(t.rsParts)
			return t.dec.DecodeTrusted(b, &t.rsParts)
		})
	}
	for i := range t.rsParts {
		p := &t.rsParts[i]
		var b block
		switch p.Type {
		case "input_text", "output_text", "refusal":
			b = block{kind: kText, text: p.Text}
			if p.Type == "refusal" {
				b.text = p.Refusal
			}
			if !b.text.IsString() {
				return errNoText
			}
		case "input_image":
			if p.FileID != "" || !p.ImageURL.IsString() {
				return badRequest("input_image by file_id cannot be translated")
			}
			var err error
			if b, err = imageBlock(p.ImageURL); err != nil {
				return err
			}
		default:
			return badRequest("content part type " + quoteForError(p.Type) + " cannot be translated yet")
		}
		if system {
			if b.kind != kText {
				return badRequest("system messages hold text only")
			}
			r.system = append(r.system, b)
			continue
		}
		r.add(ro, b)
	}
	return nil
}

func (t *translator) readResponsesUsage(body []byte) error {
	var q llm.ResponsesResponse
	if err := q.Decode(&t.dec, body); err != nil {
		return providerInvalid(err)
	}
	t.resp.usage = responsesUsage(&q.Usage)
	return nil
}

func responsesUsage(u *llm.ResponsesUsage) Usage {
	return Usage{
		InputTokens:       u.InputTokens,
		OutputTokens:      u.OutputTokens,
		CachedInputTokens: u.InputTokensDetails.CachedTokens,
		ReasoningTokens:   u.OutputTokensDetails.ReasoningTokens,
	}
}

// responsesStatus is a response's status and incomplete reason.
func responsesStatus(s stopReason) (status, reason string) {
	switch s {
	case stopMaxTokens:
		return "incomplete", "max_output_tokens"
	case stopFilter:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

func (t *translator) writeResponsesResponse(dst []byte) []byte {
	r := &t.resp
	dst = append(dst, `{"id":"`...)
	idStart := len(dst)
	if r.id != "" {
		dst = append(dst, "resp_"...)
		dst = appendEscapedText(dst, bytesOf(r.id))
	} else {
		dst = appendID(dst, "resp_")
	}
	id := dst[idStart:]
	created := r.created
	if created == 0 {
		created = nowUnix()
	}
	status, reason := responsesStatus(r.stop)
	dst = append(dst, `","object":"response","created_at":`...)
	dst = appendInt(dst, created)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","model":`...)
	dst = llm.AppendString(dst, r.model)
	dst = append(dst, `,"output":[`...)
	n := 0
	for i := range r.blocks {
		b := &r.blocks[i]
		switch b.kind {
		case kText:
			dst = comma(dst, &n)
			dst = appendResponsesMessage(dst, id, i, t.mask.token(b.text).Inner())
		case kThinking:
			dst = comma(dst, &n)
			dst = appendResponsesReasoning(dst, id, i, b.text.Inner())
		case kToolUse:
			dst = comma(dst, &n)
			id := b.id
			if hasSig(b.sig) {
				start := len(r.names)
				r.names = appendThoughtID(r.names, b.id, b.sig)
				id = stringOf(r.names[start:])
			}
			dst = appendResponsesCall(dst, id, b.name, "completed")
			dst = append(dst, `,"arguments":`...)
			dst = appendArgsString(dst, b)
			dst = append(dst, '}')
		}
	}
	dst = append(dst, `],"incomplete_details":`...)
	dst = appendIncomplete(dst, reason)
	dst = append(dst, `,"usage":`...)
	if !r.usage.Reported() {
		// (none invented when the provider reported none)
		return append(dst, "null}"...)
	}
	dst = appendResponsesUsage(dst, r.usage)
	return append(dst, '}')
}

func appendIncomplete(dst []byte, reason string) []byte {
	if reason == "" {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"reason":"`...)
	dst = append(dst, reason...)
	return append(dst, `"}`...)
}

// appendItemID writes an item id derived from the response's: prefix, the
// response id's suffix, and the item's position.
func appendItemID(dst []byte, prefix string, respID []byte, i int) []byte {
	dst = append(dst, '"')
	dst = append(dst, prefix...)
	if len(respID) > 5 && string(respID[:5]) == "resp_" {
		respID = respID[5:]
	}
	dst = append(dst, respID...)
	dst = append(dst, '_')
	dst = appendInt(dst, int64(i))
	return append(dst, '"')
}

// appendResponsesMessage writes a completed message item; text is escaped
// string content without quotes.
func appendResponsesMessage(dst, respID []byte, i int, text []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendItemID(dst, "msg_", respID, i)
	dst = append(dst, `,"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"`...)
	dst = append(dst, text...)
	return append(dst, `","annotations":[]}]}`...)
}

func appendResponsesReasoning(dst, respID []byte, i int, text []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendItemID(dst, "rs_", respID, i)
	dst = append(dst, `,"type":"reasoning","summary":[{"type":"summary_text","text":"`...)
	dst = append(dst, text...)
	return append(dst, `"}]}`...)
}

// appendResponsesCall writes a function call item up to its arguments.
func appendResponsesCall(dst []byte, callID, name, status string) []byte {
	dst = append(dst, `{"id":"fc_`...)
	dst = appendEscapedText(dst, bytesOf(callID))
	dst = append(dst, `","type":"function_call","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","call_id":`...)
	dst = llm.AppendString(dst, callID)
	dst = append(dst, `,"name":`...)
	return llm.AppendString(dst, name)
}

func appendResponsesUsage(dst []byte, u Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, u.InputTokens)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, u.CachedInputTokens)
	dst = append(dst, `},"output_tokens":`...)
	dst = appendInt(dst, u.OutputTokens)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = appendInt(dst, u.ReasoningTokens)
	dst = append(dst, `},"total_tokens":`...)
	dst = appendInt(dst, u.TotalTokens())
	return append(dst, '}')
}
