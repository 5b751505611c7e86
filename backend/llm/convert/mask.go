package convert

import (
	"bytes"
	"slices"
	"unicode/utf8"
	"unsafe"

	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/codec/llm"
)

// Masking a whole response's answer text with a response guard
// (RequestInfo.Mask); streams are in stream_mask.go.
//
// Translated responses are masked by their writers: Chat's one content
// string (the text blocks joined, so a match across two blocks is found),
// each Messages text block, each Responses output_text; thinking and tool
// calls' arguments are masked in the blocks before they are written
// (maskBlocks).
//
// Same formats are not translated: the provider's body is copied with only
// the text tokens replaced (a splice), every other byte as the provider sent
// it. What is masked: Chat's choices[].message.content (a string, or its text
// parts), reasoning_content and tool_calls[].function.arguments; Messages'
// text and thinking blocks and tool_use inputs; Responses' output_text parts
// of message items, the output_text convenience member, reasoning items'
// summary and reasoning text, and function calls' arguments. Refusals,
// citations and redacted (encrypted) thinking are not.
//
// Reasoning is masked because the guard is about what the client is sent,
// and a model's reasoning often repeats the prompt's data. A signed
// thinking block (Anthropic, Bedrock) keeps its signature, which then no
// longer matches its masked text: Anthropic refuses such a block when the
// client sends it back in a later turn, so a client that replays thinking
// has to drop a masked one. Only a block that held a match is changed.
//
// Tool calls' arguments are JSON: only the text of their strings is
// masked, so they stay JSON (mask_json.go).
//
// The splice needs to know where each token lies in the body: the wire
// types' Raw values alias the body they were decoded from (codec/llm).
// Sonic decodes a body holding invalid UTF-8 from a repaired copy instead,
// so such a body is repaired first (each invalid byte becomes U+FFFD) and
// the repaired copy is what is decoded and spliced.

// answerMask is the masking state of one response or stream.
type answerMask struct {
	g *guard.Guard
	// plain and masked hold a token's text and its masked text; tok the
	// last masked token (token's result).
	plain, masked, tok []byte
	concat             []byte
	block              block
	sp                 splice
	valid              []byte // the last body repaired to valid UTF-8
	chatParts          []llm.ChatContentPart
	rsParts            []llm.ResponsesContent
	rs                 rsPassResponse
	dups               llm.DuplicateCheck
	// arena holds the masked thinking and tool calls of a translated
	// answer (maskBlocks); edits say which block takes which.
	arena []byte
	edits []blockEdit
}

// blockEdit: block i's thinking text or tool input/arguments is
// arena[from:to].
type blockEdit struct{ i, from, to int }

// maxKeptScratch bounds the scratch a pooled translator or stream keeps
// between uses, so that one large answer does not pin its size in the pool.
const maxKeptScratch = 64 << 10

func keepScratch(b []byte) []byte {
	if cap(b) > maxKeptScratch {
		return nil
	}
	return b[:0]
}

// release drops the references to the last body and the guard.
func (m *answerMask) release() {
	m.g = nil
	m.block = block{}
	m.plain, m.masked, m.tok = keepScratch(m.plain), keepScratch(m.masked), keepScratch(m.tok)
	m.concat, m.valid = keepScratch(m.concat), keepScratch(m.valid)
	m.arena, m.edits = keepScratch(m.arena), m.edits[:0]
	m.sp.edits, m.sp.repl = m.sp.edits[:0], keepScratch(m.sp.repl)
	m.chatParts = clearParts(m.chatParts)
	m.rsParts = clearParts(m.rsParts)
	m.rs.reset()
}

// appendMasked appends the string token tok with its text masked; it
// reports false, appending nothing, when nothing in it matched.
func (m *answerMask) appendMasked(dst []byte, tok llm.Raw) ([]byte, bool) {
	if m.g == nil || !tok.IsString() || len(tok) == 2 {
		return dst, false
	}
	var err error
	if m.plain, err = llm.AppendUnquoted(m.plain[:0], tok); err != nil {
		// Tokens come from validated JSON: not reached.
		return dst, false
	}
	masked, ok := m.g.AppendMask(m.masked[:0], m.plain)
	if !ok {
		return dst, false
	}
	m.masked = masked
	return llm.AppendString(dst, masked), true
}

// token returns tok with its text masked (valid until the next call), or
// tok itself when there is no guard or nothing matched.
func (m *answerMask) token(tok llm.Raw) llm.Raw {
	out, ok := m.appendMasked(m.tok[:0], tok)
	if !ok {
		return tok
	}
	m.tok = out
	return out
}

// textBlock returns b, or a copy of it with its text masked when b is a
// text block (valid until the next call).
func (m *answerMask) textBlock(b *block) *block {
	if m.g == nil || b.kind != kText {
		return b
	}
	m.block = *b
	m.block.text = m.token(b.text)
	return &m.block
}

// maskBlocks masks the thinking and the tool calls' arguments of a
// translated answer's blocks in place (the writers mask its text).
func (m *answerMask) maskBlocks(blocks []block) {
	if m.g == nil {
		return
	}
	m.arena, m.edits = m.arena[:0], m.edits[:0]
	for i := range blocks {
		b := &blocks[i]
		from := len(m.arena)
		var ok bool
		switch {
		case b.kind == kThinking:
			m.arena, ok = m.appendMasked(m.arena, b.text)
		case b.kind == kToolUse && b.input.Present():
			m.arena, ok = m.maskJSON(m.arena, b.input)
		case b.kind == kToolUse:
			m.arena, ok = m.argsToken(m.arena, b.args)
		}
		if ok {
			m.edits = append(m.edits, blockEdit{i: i, from: from, to: len(m.arena)})
		}
	}
	// (Set once the arena stopped growing.)
	for _, e := range m.edits {
		b := &blocks[e.i]
		v := llm.Raw(m.arena[e.from:e.to])
		switch {
		case b.kind == kThinking:
			b.text = v
		case b.input.Present():
			b.input = v
		default:
			b.args = v
		}
	}
}

// appendChatContent writes the text blocks as one string token, Chat's
// content, masked.
func (t *translator) appendChatContent(dst []byte) []byte {
	m := &t.mask
	if m.g == nil {
		return appendConcat(dst, t.resp.blocks, kText)
	}
	m.concat = appendConcat(m.concat[:0], t.resp.blocks, kText)
	return append(dst, m.token(m.concat)...)
}

// maskedPassResponse is Response for same formats with a mask: body copied
// with its answer text masked (see the file comment).
func (t *translator) maskedPassResponse(dst, body []byte, f Format) ([]byte, Usage, error) {
	m := &t.mask
	body = m.repaired(body)
	if m.dups.Has(body) {
		// The mask rewrites what the decoder read (the last of a member
		// given twice); a client reading the first would get it unmasked.
		return dst, Usage{}, errDuplicateMembers
	}
	m.sp.reset()
	ok := true
	switch f {
	case Chat:
		if err := t.readChatResponse(body); err != nil {
			return dst, Usage{}, err
		}
		for i := range t.chatResp.Choices {
			ok = ok && m.maskChatMessage(&t.dec, body, &t.chatResp.Choices[i].Message)
		}
	case Messages:
		if err := t.readAnthropicResponse(body); err != nil {
			return dst, Usage{}, err
		}
		ok = m.maskAnthropicBlocks(body, t.anResp.Content)
	case Responses:
		r := &m.rs
		r.reset()
		if err := t.dec.Decode(body, r); err != nil {
			return dst, Usage{}, providerInvalid(err)
		}
		if len(r.Output) == 0 {
			if e := answerError(body, Responses); e != nil {
				return dst, Usage{}, e
			}
		}
		t.resp.usage = responsesUsage(&r.Usage)
		ok = m.maskResponsesOutput(&t.dec, body, r)
	default:
		return dst, Usage{}, errMaskFormat(f)
	}
	if !ok {
		return dst, Usage{}, errMaskFailed
	}
	return m.sp.appendTo(dst, body), t.resp.usage, nil
}

func errMaskFormat(f Format) *Error {
	return &Error{Status: 500, Message: "response masking is not supported for " + f.String() + " clients"}
}

// errDuplicateMembers refuses an answer to be masked in which a member is
// given twice in one object: parsers read it differently (the decoder
// keeps the last, others the first), and the client's reading may be the
// one the mask did not see.
var errDuplicateMembers = &Error{Status: 502, Message: "invalid response from provider: a member given twice in one object"}

// errMaskFailed: a token was not where its decoding said (not reached; the
// answer is refused rather than sent unmasked).
var errMaskFailed = &Error{Status: 500, Message: "the response's text could not be masked"}

// repaired returns body, or when it holds invalid UTF-8 a copy with each
// invalid byte replaced by U+FFFD (see the file comment).
func (m *answerMask) repaired(body []byte) []byte {
	if utf8.Valid(body) {
		return body
	}
	m.valid = m.valid[:0]
	for len(body) > 0 {
		r, n := utf8.DecodeRune(body)
		if r == utf8.RuneError && n == 1 {
			m.valid = append(m.valid, "\uFFFD"...)
		} else {
			m.valid = append(m.valid, body[:n]...)
		}
		body = body[n:]
	}
	return m.valid
}

// maskIn records the masked form of tok, a string token inside text, in
// the splice. It reports false when tok does not lie in text.
func (m *answerMask) maskIn(text []byte, tok llm.Raw) bool {
	from := len(m.sp.repl)
	var ok bool
	if m.sp.repl, ok = m.appendMasked(m.sp.repl, tok); !ok {
		return true
	}
	return m.sp.replace(text, tok, from)
}

// maskChatMessage masks a Chat message inside text: its content, its
// reasoning and its tool calls' arguments.
func (m *answerMask) maskChatMessage(dec *llm.Decoder, text []byte, msg *llm.ChatMessage) bool {
	if !m.maskChatContent(dec, text, msg.Content) || !m.maskIn(text, msg.ReasoningContent) {
		return false
	}
	for i := range msg.ToolCalls {
		if !m.maskArgsIn(text, msg.ToolCalls[i].Function.Arguments) {
			return false
		}
	}
	return true
}

// maskArgsIn records the masked form of a tool call's arguments inside
// text: a string token whose text is JSON (OpenAI's arguments), or a JSON
// object (Anthropic's input).
func (m *answerMask) maskArgsIn(text []byte, args llm.Raw) bool {
	from := len(m.sp.repl)
	var ok bool
	if args.IsString() {
		m.sp.repl, ok = m.argsToken(m.sp.repl, args)
	} else if args.IsObject() {
		m.sp.repl, ok = m.maskJSON(m.sp.repl, args)
	}
	if !ok {
		return true
	}
	return m.sp.replace(text, args, from)
}

// maskChatContent masks a Chat message's content inside text: a string, or
// the text of its text parts.
func (m *answerMask) maskChatContent(dec *llm.Decoder, text []byte, content llm.Raw) bool {
	if content.IsString() {
		return m.maskIn(text, content)
	}
	if !content.IsArray() {
		return true
	}
	m.chatParts = clearParts(m.chatParts)
	if dec.DecodeTrusted(content, &m.chatParts) != nil {
		return true // not parts the format knows: no text of ours
	}
	for i := range m.chatParts {
		if p := &m.chatParts[i]; p.Type == "text" && !m.maskIn(text, p.Text) {
			return false
		}
	}
	return true
}

// maskAnthropicBlocks masks the text and thinking blocks and tool calls
// of a Messages content inside text.
func (m *answerMask) maskAnthropicBlocks(text []byte, blocks []llm.AnthropicBlock) bool {
	for i := range blocks {
		ok := true
		switch b := &blocks[i]; b.Type {
		case "text":
			ok = m.maskIn(text, b.Text)
		case "thinking":
			ok = m.maskIn(text, b.Thinking)
		case "tool_use":
			ok = m.maskArgsIn(text, b.Input)
		}
		if !ok {
			return false
		}
	}
	return true
}

// rsPassResponse is what masking reads of a Responses response object (a
// response, or the response of a stream event).
type rsPassResponse struct {
	Model  string       `json:"model"`
	Output []rsPassItem `json:"output"`
	// OutputText is the SDKs' convenience member, when a provider sends it.
	OutputText llm.Raw            `json:"output_text"`
	Usage      llm.ResponsesUsage `json:"usage"`
}

func (r *rsPassResponse) reset() { *r = rsPassResponse{Output: clearParts(r.Output)} }

// rsPassItem is an output item; a message's Content is an array of parts,
// and so are a reasoning item's Content and Summary; a function call has
// its Arguments.
type rsPassItem struct {
	Type      string  `json:"type"`
	Content   llm.Raw `json:"content"`
	Summary   llm.Raw `json:"summary"`
	Arguments llm.Raw `json:"arguments"`
}

// maskResponsesOutput masks a Responses response's output text inside text.
func (m *answerMask) maskResponsesOutput(dec *llm.Decoder, text []byte, r *rsPassResponse) bool {
	for i := range r.Output {
		if !m.maskResponsesItem(dec, text, &r.Output[i]) {
			return false
		}
	}
	return m.maskIn(text, r.OutputText)
}

// maskResponsesItem masks an output item inside text: a message's
// output_text parts, a reasoning item's summary and text, a function
// call's arguments.
func (m *answerMask) maskResponsesItem(dec *llm.Decoder, text []byte, it *rsPassItem) bool {
	switch it.Type {
	case "message":
		return m.maskResponsesParts(dec, text, it.Content, "output_text")
	case "reasoning":
		return m.maskResponsesParts(dec, text, it.Summary, "summary_text") &&
			m.maskResponsesParts(dec, text, it.Content, "reasoning_text")
	case "function_call":
		return m.maskArgsIn(text, it.Arguments)
	}
	return true
}

// maskResponsesParts masks the text of the parts of type typ of the array
// parts inside text.
func (m *answerMask) maskResponsesParts(dec *llm.Decoder, text []byte, parts llm.Raw, typ string) bool {
	if !parts.IsArray() {
		return true
	}
	m.rsParts = clearParts(m.rsParts)
	if dec.DecodeTrusted(parts, &m.rsParts) != nil {
		return true // not parts the format knows: no text of ours
	}
	for i := range m.rsParts {
		if p := &m.rsParts[i]; p.Type == typ && !m.maskIn(text, p.Text) {
			return false
		}
	}
	return true
}

// splice is an edited copy of a JSON text in the making: tokens of the
// text replaced, every other byte copied as it is.
type splice struct {
	edits []spliceEdit
	repl  []byte // the replacements, one after the other
}

// spliceEdit replaces text[at:end] with repl[from:to].
type spliceEdit struct{ at, end, from, to int }

func (sp *splice) reset() {
	sp.edits, sp.repl = sp.edits[:0], sp.repl[:0]
}

// replace records that tok, a slice of text, is to be written as
// sp.repl[from:], which the caller appended. It reports false (dropping the
// replacement) when tok is not a slice of text.
func (sp *splice) replace(text, tok []byte, from int) bool {
	at, ok := offsetIn(text, tok)
	if !ok {
		sp.repl = sp.repl[:from]
		return false
	}
	if bytes.Equal(sp.repl[from:], tok) {
		sp.repl = sp.repl[:from] // unchanged: the provider's bytes stay
		return true
	}
	sp.edits = append(sp.edits, spliceEdit{at: at, end: at + len(tok), from: from, to: len(sp.repl)})
	return true
}

// appendTo appends text with the recorded replacements to dst.
func (sp *splice) appendTo(dst, text []byte) []byte {
	slices.SortFunc(sp.edits, func(a, b spliceEdit) int { return a.at - b.at })
	at := 0
	for _, e := range sp.edits {
		dst = append(dst, text[at:e.at]...)
		dst = append(dst, sp.repl[e.from:e.to]...)
		at = e.end
	}
	return append(dst, text[at:]...)
}

// offsetIn returns where tok starts in text, when tok is a slice of text.
// Only addresses are compared: nothing is read through them.
func offsetIn(text, tok []byte) (int, bool) {
	if len(tok) == 0 || len(tok) > len(text) {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(text)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(tok)))
	if p < base || p-base > uintptr(len(text)-len(tok)) {
		return 0, false
	}
	return int(p - base), true
}
