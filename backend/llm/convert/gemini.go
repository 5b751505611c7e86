package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// Gemini generateContent as a provider format: requests written, responses
// read (streams: stream_gemini.go).

func (t *translator) writeGeminiRequest(dst []byte) ([]byte, error) {
	r := &t.req
	dst = append(dst, `{"contents":[`...)
	n := 0
	for _, m := range r.messages {
		blocks := r.msgBlocks(m)
		start := len(dst)
		dst = comma(dst, &n)
		if m.role == roleAssistant {
			dst = append(dst, `{"role":"model","parts":[`...)
		} else {
			dst = append(dst, `{"role":"user","parts":[`...)
		}
		k := 0
		for i := range blocks {
			var err error
			if dst, err = t.appendGeminiPart(dst, &blocks[i], &k); err != nil {
				return dst, err
			}
		}
		if k == 0 { // nothing Gemini can take (thinking only): drop the turn
			dst = dst[:start]
			n--
			continue
		}
		dst = append(dst, `]}`...)
	}
	dst = append(dst, ']')
	if len(r.system) > 0 {
		dst = append(dst, `,"systemInstruction":{"parts":[`...)
		for i := range r.system {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"text":`...)
			dst = append(dst, r.system[i].text...)
			dst = append(dst, '}')
		}
		dst = append(dst, `]}`...)
	}
	if len(r.tools) > 0 {
		dst = append(dst, `,"tools":[{"functionDeclarations":[`...)
		for i := range r.tools {
			tl := &r.tools[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = llm.AppendString(dst, tl.name)
			dst = appendOptionalRaw(dst, `,"description":`, tl.desc)
			// parametersJsonSchema takes JSON Schema as clients write it;
			// parameters would take only Google's OpenAPI subset.
			dst = append(dst, `,"parametersJsonSchema":`...)
			dst = appendSchema(dst, tl.schema)
			dst = append(dst, '}')
		}
		dst = append(dst, `]}]`...)
	}
	if r.choice != choiceUnset {
		dst = append(dst, `,"toolConfig":{"functionCallingConfig":{"mode":`...)
		switch r.choice {
		case choiceAuto:
			dst = append(dst, `"AUTO"`...)
		case choiceAny:
			dst = append(dst, `"ANY"`...)
		case choiceNone:
			dst = append(dst, `"NONE"`...)
		case choiceTool:
			dst = append(dst, `"ANY","allowedFunctionNames":[`...)
			dst = llm.AppendString(dst, r.choiceName)
			dst = append(dst, ']')
		}
		dst = append(dst, `}}`...)
	}
	g := 0
	dst = append(dst, `,"generationConfig":{`...)
	if r.maxTokens > 0 {
		dst = comma(dst, &g)
		dst = append(dst, `"maxOutputTokens":`...)
		dst = appendInt(dst, int64(r.maxTokens))
		r.outMaxTokens = r.maxTokens
	}
	for _, f := range [...]struct {
		key string
		v   llm.Raw
	}{{`"temperature":`, r.temperature}, {`"topP":`, r.topP}, {`"topK":`, r.topK},
		{`"seed":`, r.seed}, {`"presencePenalty":`, r.presencePenalty}, {`"frequencyPenalty":`, r.frequencyPenalty}} {
		if f.v.Present() {
			dst = comma(dst, &g)
			dst = append(dst, f.key...)
			dst = append(dst, f.v...)
		}
	}
	if r.stop.Present() {
		dst = comma(dst, &g)
		dst = append(dst, `"stopSequences":`...)
		dst = appendStringArray(dst, r.stop)
	}
	if r.thinkingBudget > 0 {
		dst = comma(dst, &g)
		dst = append(dst, `"thinkingConfig":{"thinkingBudget":`...)
		dst = appendInt(dst, int64(r.thinkingBudget))
		dst = append(dst, `,"includeThoughts":true}`...)
	}
	if g == 0 {
		dst = dst[:len(dst)-len(`,"generationConfig":{`)]
		return append(dst, '}'), nil
	}
	return append(dst, `}}`...), nil
}

func (t *translator) appendGeminiPart(dst []byte, b *block, k *int) ([]byte, error) {
	switch b.kind {
	case kText:
		dst = comma(dst, k)
		dst = append(dst, `{"text":`...)
		dst = append(dst, b.text...)
		dst = appendOptionalSig(dst, b.sig)
	case kImage:
		dst = comma(dst, k)
		if b.url != nil {
			url, err := llm.Text(nil, b.url)
			if err != nil {
				return dst, badRequest("image url is not a string")
			}
			dst = append(dst, `{"fileData":{"mimeType":"`...)
			dst = append(dst, mimeFromURL(url)...)
			dst = append(dst, `","fileUri":`...)
			dst = append(dst, b.url...)
		} else {
			dst = append(dst, `{"inlineData":{"mimeType":`...)
			dst = llm.AppendString(dst, b.media)
			dst = append(dst, `,"data":`...)
			dst = llm.AppendString(dst, b.data)
		}
		dst = append(dst, '}')
	case kToolUse:
		dst = comma(dst, k)
		dst = append(dst, `{"functionCall":{"name":`...)
		dst = llm.AppendString(dst, b.name)
		dst = append(dst, `,"args":`...)
		dst = appendArgsObject(dst, b)
		dst = append(dst, '}')
		dst = appendOptionalSig(dst, b.sig)
	case kToolResult:
		dst = comma(dst, k)
		// Gemini pairs a response with its call by name (and position);
		// OpenAI and Anthropic results name only the call's id.
		name := t.req.toolNameFor(b.id)
		dst = append(dst, `{"functionResponse":{"name":`...)
		dst = llm.AppendString(dst, name)
		if b.isError {
			dst = append(dst, `,"response":{"error":`...)
		} else {
			dst = append(dst, `,"response":{"content":`...)
		}
		if b.nsub > 0 {
			for _, s := range t.req.subBlocks(b) {
				if s.kind != kText {
					return dst, unsupported("a tool result's non-text content", Gemini)
				}
			}
			dst = appendConcat(dst, t.req.subBlocks(b), kText)
		} else {
			dst = appendTextOrEmpty(dst, b.text)
		}
		dst = append(dst, `}}`...)
	case kThinking, kRedacted:
		// A thought's text is not needed back, and a signature of another
		// provider's thinking is not Gemini's: the history drops them.
		// Gemini's signatures come back on the parts they were given with
		// (thoughtsig.go).
		return dst, nil
	}
	return append(dst, '}'), nil
}

// appendOptionalSig writes a part's thoughtSignature when it has one.
func appendOptionalSig(dst []byte, sig llm.Raw) []byte {
	if !hasSig(sig) {
		return dst
	}
	dst = append(dst, `,"thoughtSignature":`...)
	return append(dst, sig...)
}

func (t *translator) readGeminiResponse(body []byte) error {
	g := &t.gmResp
	if err := g.Decode(&t.dec, body); err != nil {
		return providerInvalid(err)
	}
	r := &t.resp
	r.id, r.model = g.ResponseID, g.ModelVersion
	r.usage = geminiUsage(&g.UsageMetadata)
	if len(g.Candidates) == 0 {
		if e := answerError(body, Gemini); e != nil {
			return e
		}
		r.stop = stopFilter // a blocked prompt has no candidates
		return nil
	}
	c := &g.Candidates[0]
	calls := 0
	for i := range c.Content.Parts {
		p := &c.Content.Parts[i]
		switch {
		case p.FunctionCall.Name != "":
			calls++
			b := block{kind: kToolUse, name: p.FunctionCall.Name, input: p.FunctionCall.Args, id: p.FunctionCall.ID, sig: p.ThoughtSignature}
			if b.id == "" {
				start := len(r.names)
				r.names = appendID(r.names, "call_")
				b.id = string(r.names[start:])
			}
			r.blocks = append(r.blocks, b)
		case emptyPart(p):
			// No block for an empty text part (Gemini often ends with one);
			// a signature it carries goes to the text before it.
			if n := len(r.blocks); n > 0 && !p.Thought && r.blocks[n-1].kind == kText && hasSig(p.ThoughtSignature) && !hasSig(r.blocks[n-1].sig) {
				r.blocks[n-1].sig = p.ThoughtSignature
			}
		case p.Text.IsString() && p.Thought:
			r.addText(kThinking, p.Text, p.ThoughtSignature)
		case p.Text.IsString():
			r.addText(kText, p.Text, p.ThoughtSignature)
		}
	}
	r.stop = geminiStop(c.FinishReason, calls > 0)
	return nil
}

// emptyPart reports a text part with no text (and, for a thought, no
// signature either): nothing a client's block or item could carry.
func emptyPart(p *llm.GeminiPart) bool {
	return p.FunctionCall.Name == "" && p.Text.IsString() && len(p.Text) == 2 &&
		(!p.Thought || !p.ThoughtSignature.IsString() || len(p.ThoughtSignature) == 2)
}

func geminiUsage(u *llm.GeminiUsage) Usage {
	return Usage{
		InputTokens:       u.PromptTokenCount,
		OutputTokens:      u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedInputTokens: u.CachedContentTokenCount,
		ReasoningTokens:   u.ThoughtsTokenCount,
	}
}

func geminiStop(reason string, calls bool) stopReason {
	switch reason {
	case "":
		return stopNone
	case "MAX_TOKENS":
		return stopMaxTokens
	case "SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return stopFilter
	}
	if calls {
		return stopToolUse
	}
	return stopEnd
}

// addText appends a text or thinking part, joined to the block before when
// that is of the same kind (Gemini splits text into parts freely).
func (r *response) addText(k kind, tok, sig llm.Raw) {
	n := len(r.blocks)
	if n == 0 || r.blocks[n-1].kind != k {
		r.blocks = append(r.blocks, block{kind: k, text: tok, sig: sig})
		return
	}
	prev := &r.blocks[n-1]
	start := len(r.names)
	r.names = append(r.names, '"')
	r.names = append(r.names, prev.text.Inner()...)
	r.names = append(r.names, tok.Inner()...)
	r.names = append(r.names, '"')
	prev.text = r.names[start:len(r.names):len(r.names)]
	if hasSig(sig) {
		prev.sig = sig
	}
}
