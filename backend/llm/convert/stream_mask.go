package convert

import (
	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/sse"
)

// Masking a streamed answer's text with a response guard (RequestInfo.Mask).
//
// Every text being streamed has a slot with its own guard.StreamMasker,
// which releases what no later delta can change and holds back the rest
// (at most the last word, or a user pattern's window); what it holds back
// goes out as one last delta before the text ends. The client therefore
// gets the same text, masked, shifted by what is held back.
//
// Translated streams mask in the event layer: a text delta carries what its
// block's masker released (no event when it released nothing), and closing
// a text block (before its stop event, and before the stop reason, the end
// or an error, which close it too) flushes the masker as a last delta.
//
// Same formats (Chat, Messages, Responses) are not translated: each
// provider event is written again with only its answer text replaced and
// every other member byte for byte (a splice, mask.go). Going through the
// translator instead would lose what it does not carry (Messages' server
// tool blocks and citations, Chat's logprobs, other choices and
// system_fingerprint), and Responses providers have no translator at all.
// What differs from the provider's stream:
//
//   - The SSE framing is ours: an "event:" line when the event named a
//     type, data lines, a blank line. Comments, id and retry are dropped.
//   - Chat: a chunk whose text masked to nothing stays, with "content":""
//     (it may carry logprobs, other choices, a finish reason). A choice's
//     text ends at its finish_reason or its first tool call: the held-back
//     tail is a chunk of its own before that chunk (or, when that chunk has
//     content, the end of its content), made of the first chunk's id,
//     created and model.
//   - Messages: a text, thinking or input_json delta that masked to nothing
//     is dropped; the tail is a content_block_delta before
//     content_block_stop (a thinking's before its signature_delta).
//   - Responses: a delta (output_text, reasoning_summary_text,
//     reasoning_text, function_call_arguments) that masked to nothing is
//     dropped and the tail is a delta of its kind before its done event, so
//     sequence_number is renumbered to stay contiguous. The text of
//     output_text.done, of parts, items and the final response is masked
//     whole (Guard.AppendMask), which is what the deltas join up to.
//   - An event that cannot be read ends the stream with an error event, as
//     a translated stream does, instead of relaying the rest of the
//     provider's bytes (their text would go out unmasked).
//   - Messages' message_start, end and error events, and Responses'
//     response.completed/failed/incomplete and error, first flush every
//     text still open.
//
// Thinking (Chat's reasoning_content, Messages' thinking_delta, Responses'
// reasoning summary and reasoning text) and tool call arguments (Chat's
// tool_calls[].function.arguments, Messages' input_json_delta, Responses'
// function_call_arguments) are masked as text is, each with a slot of its
// own: the arguments through a JSON layer that masks only the text of
// their strings, however the pieces cut them (mask_json.go). A thinking
// text ends before its signature; a Chat tool call's arguments end with
// the choice's finish_reason, its reasoning where its text or tool calls
// begin. Refusals are not masked. Same-format Gemini and Bedrock streams
// are refused with a mask (they are no client's format).

// maxMaskSlots bounds the texts streamed at once (Chat's n is at most 128);
// a stream that opens more fails.
const maxMaskSlots = 128

// streamMask is a Stream's masking state.
type streamMask struct {
	answerMask
	pass  bool // same formats: events rewritten one by one
	slots []maskSlot
	spare []byte // a closed slot's ref buffer
	out   []byte // a masker's output
	js    []byte // a JSON text's masked piece
	ev    []byte // an event's data rewritten
	// head is Chat's `{"id":...,"object":...,"created":...,"model":...`
	// for the chunks the gateway adds.
	head []byte
	// Responses: our sequence numbers are the provider's + seqShift;
	// lastSeq is the last one written (-1: none yet; OpenAI's first is 0).
	seqShift, lastSeq int64
	rs                rsPassEvent
	// tap, when set, collects the text the maskers release (stream_tap.go).
	tap *[]byte
}

// maskSlot is one text being streamed: a block of a translated stream, a
// Chat choice, a Messages text block, a Responses output_text part.
type maskSlot struct {
	key int
	m   *guard.StreamMasker
	// kind is what the slot masks: answer text (the only kind the tap
	// collects), thinking, or a tool call's arguments (JSON, in js).
	kind slotKind
	js   jsonMask
	// ref is a Responses part's `"item_id":...,"output_index":...,
	// "content_index":...`, for the delta that flushes it.
	ref []byte
}

type slotKind uint8

const (
	slotText slotKind = iota
	slotThinking
	slotSummary // a Responses reasoning summary (same-format streams)
	slotArgs
)

// Same-format streams key their slots by choice (Chat) or part
// (Responses), and by kind: a choice's or an item's text, reasoning and
// tool calls are texts of their own.
const (
	keyChatReasoning = 1 << 24
	keyChatCall      = 2 << 24
	keyKindShift     = 40
)

func chatCallKey(choice, call int) int {
	return keyChatCall | (choice&0xfff)<<12 | call&0xfff
}

// slotChoice is the Chat choice of a same-format slot's key.
func slotChoice(sl *maskSlot) int {
	switch sl.kind {
	case slotThinking:
		return sl.key &^ keyChatReasoning
	case slotArgs:
		return sl.key >> 12 & 0xfff
	}
	return sl.key
}

// rsPassEvent is what masking reads of a Responses stream event.
type rsPassEvent struct {
	Type           string               `json:"type"`
	SequenceNumber llm.Raw              `json:"sequence_number"`
	ItemID         llm.Raw              `json:"item_id"`
	OutputIndex    llm.Raw              `json:"output_index"`
	ContentIndex   llm.Raw              `json:"content_index"`
	SummaryIndex   llm.Raw              `json:"summary_index"`
	Delta          llm.Raw              `json:"delta"`
	Text           llm.Raw              `json:"text"`
	Arguments      llm.Raw              `json:"arguments"`
	Part           llm.ResponsesContent `json:"part"`
	Item           rsPassItem           `json:"item"`
	Response       rsPassResponse       `json:"response"`
	Message        llm.Raw              `json:"message"`
}

func (e *rsPassEvent) reset() {
	*e = rsPassEvent{Response: rsPassResponse{Output: clearParts(e.Response.Output)}}
}

// reset prepares for a new stream masked by g (nil: none).
func (k *streamMask) reset(g *guard.Guard, pass bool) {
	k.closeAll()
	k.g = g
	k.pass = pass && g != nil
	k.head = k.head[:0]
	k.seqShift, k.lastSeq = 0, -1
}

// release drops the maskers and the references to the last bytes fed.
func (k *streamMask) release() {
	k.closeAll()
	k.answerMask.release()
	k.pass = false
	k.rs.reset()
	k.out, k.ev, k.js = keepScratch(k.out), keepScratch(k.ev), keepScratch(k.js)
}

func (k *streamMask) find(key int) int {
	for j := range k.slots {
		if k.slots[j].key == key {
			return j
		}
	}
	return -1
}

// open returns the text slot of key, opening it if need be; false when
// maxMaskSlots are open.
func (k *streamMask) open(key int) (int, bool) { return k.openKind(key, slotText) }

// openKind returns the slot of key, opening it as one of kind if need be.
func (k *streamMask) openKind(key int, kind slotKind) (int, bool) {
	if j := k.find(key); j >= 0 {
		return j, true
	}
	if len(k.slots) >= maxMaskSlots {
		return -1, false
	}
	ref := k.spare
	k.spare = nil
	k.slots = append(k.slots, maskSlot{key: key, m: guard.AcquireStreamMasker(k.g), kind: kind, ref: ref[:0]})
	return len(k.slots) - 1, true
}

// close ends slot j (its masker flushed or abandoned).
func (k *streamMask) close(j int) {
	guard.ReleaseStreamMasker(k.slots[j].m)
	if k.spare == nil {
		k.spare = k.slots[j].ref[:0]
	}
	copy(k.slots[j:], k.slots[j+1:])
	k.slots[len(k.slots)-1] = maskSlot{}
	k.slots = k.slots[:len(k.slots)-1]
}

func (k *streamMask) closeAll() {
	for len(k.slots) > 0 {
		k.close(len(k.slots) - 1)
	}
}

// write feeds the text of the string token tok to slot j's masker and
// returns what it released (valid until the next call).
func (k *streamMask) write(j int, tok llm.Raw) []byte {
	var err error
	if k.plain, err = llm.AppendUnquoted(k.plain[:0], tok); err != nil {
		k.plain = k.plain[:0] // not a string: no text
	}
	if k.slots[j].kind == slotArgs {
		return k.writeArgs(j, k.plain)
	}
	k.out = k.slots[j].m.Write(k.out[:0], k.plain)
	if k.tap != nil && k.slots[j].kind == slotText {
		*k.tap = append(*k.tap, k.out...)
	}
	return k.out
}

// writeArgs feeds a piece of the JSON text of slot j (a tool call's
// arguments) and returns the JSON text it released (valid until the next
// call).
func (k *streamMask) writeArgs(j int, piece []byte) []byte {
	sl := &k.slots[j]
	k.js = sl.js.write(k.js[:0], jsonScratch{m: sl.m, out: &k.out}, piece)
	return k.js
}

// flush appends what slot j's masker held back to released (what write
// returned for the slot, or empty) and returns it; the slot stays open.
func (k *streamMask) flush(j int, released []byte) []byte {
	if sl := &k.slots[j]; sl.kind == slotArgs {
		// released is what writeArgs returned (k.js's content), or empty.
		k.js = sl.js.finish(k.js[:len(released)], jsonScratch{m: sl.m, out: &k.out})
		return k.js
	}
	k.out = k.slots[j].m.Flush(released)
	if k.tap != nil && k.slots[j].kind == slotText {
		*k.tap = append(*k.tap, k.out[len(released):]...)
	}
	return k.out
}

// replaceWith records in the splice that tok, a string token of text,
// becomes the string token of plain.
func (k *streamMask) replaceWith(text []byte, tok llm.Raw, plain []byte) bool {
	from := len(k.sp.repl)
	k.sp.repl = llm.AppendString(k.sp.repl, plain)
	return k.sp.replace(text, tok, from)
}

// maskDelta passes the delta tok (text, thinking, or a piece of a tool
// call's arguments) of block i of a translated stream through the block's
// masker: it returns the token of what was released, nil when nothing was.
func (s *Stream) maskDelta(i int, d deltaKind, tok llm.Raw) (llm.Raw, bool) {
	k := &s.mk
	kind := slotText
	switch d {
	case dThinking:
		kind = slotThinking
	case dArgs:
		kind = slotArgs
	}
	j, ok := k.openKind(i, kind)
	if !ok {
		return nil, false
	}
	plain := k.write(j, tok)
	if len(plain) == 0 {
		return nil, true
	}
	k.tok = llm.AppendString(k.tok[:0], plain)
	return k.tok, true
}

// flushText ends the masking of a translated stream's open block (text,
// thinking or a tool call): what its masker held back goes out as one last
// delta.
func (s *Stream) flushText(dst []byte) []byte {
	k := &s.mk
	if k.g == nil || k.pass || s.rd.open < 0 {
		return dst
	}
	j := k.find(s.rd.open)
	if j < 0 {
		return dst
	}
	d := dText
	switch k.slots[j].kind {
	case slotThinking:
		d = dThinking
	case slotArgs:
		d = dArgs
	}
	tail := k.flush(j, k.out[:0])
	k.close(j)
	if len(tail) == 0 {
		return dst
	}
	k.tok = llm.AppendString(k.tok[:0], tail)
	s.ev = event{kind: evDelta, index: s.rd.open, delta: d, text: k.tok}
	return s.emit(dst)
}

// maskFailed ends the stream when its text cannot be masked (too many
// texts at once, or not reached: a token not where its decoding said).
func (s *Stream) maskFailed(dst []byte) []byte {
	dst, _ = s.fail(dst, 502, "api_error", "the response's text could not be masked")
	return dst
}

// maskedPassEvent rewrites one event of a masked same-format stream.
func (s *Stream) maskedPassEvent(dst []byte, ev sseEvent) []byte {
	data := s.mk.repaired(ev.data)
	if s.mk.dups.Has(data) {
		dst, _ = s.fail(dst, errDuplicateMembers.Status, "api_error", errDuplicateMembers.Message)
		return dst
	}
	s.mk.sp.reset()
	switch s.info.Provider {
	case Chat:
		return s.chatPass(dst, ev.typ, data)
	case Messages:
		return s.anthropicPass(dst, ev.typ, data)
	case Responses:
		return s.responsesPass(dst, ev.typ, data)
	}
	dst, _ = s.fail(dst, 500, "api_error", "response masking is not supported for "+s.info.Provider.String())
	return dst
}

// appendSpliced writes the event typ with data and the splice's edits.
func (k *streamMask) appendSpliced(dst, typ, data []byte) []byte {
	if len(k.sp.edits) > 0 {
		k.ev = k.sp.appendTo(k.ev[:0], data)
		data = k.ev
	}
	if len(typ) > 0 && string(typ) != "message" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	return sse.AppendEvent(dst, sse.Event{Data: data})
}

// passFlush flushes slot j of a masked same-format stream as the client's
// last delta of that text, and closes it.
func (s *Stream) passFlush(dst []byte, j int) []byte {
	k := &s.mk
	if tail := k.flush(j, k.out[:0]); len(tail) > 0 {
		sl := &k.slots[j]
		switch s.info.Client {
		case Chat:
			dst = k.appendChatChunk(dst, sl, tail)
		case Messages:
			dst = appendBlockDeltaEvent(dst, sl.key, sl.kind, tail)
		case Responses:
			dst = k.appendResponsesDelta(dst, sl.ref, sl.kind, tail)
		}
	}
	k.close(j)
	return dst
}

// passFlushAll flushes every open text of a masked same-format stream.
func (s *Stream) passFlushAll(dst []byte) []byte {
	if !s.mk.pass {
		return dst
	}
	for len(s.mk.slots) > 0 {
		dst = s.passFlush(dst, 0)
	}
	return dst
}

// chatPass rewrites a Chat chunk: each choice's content through its masker.
func (s *Stream) chatPass(dst, typ, data []byte) []byte {
	if string(data) == "[DONE]" {
		dst = s.passFlushAll(dst)
		dst = s.chatEvent(dst, data)
		return s.mk.appendSpliced(dst, typ, data)
	}
	dst = s.chatEvent(dst, data) // usage, end, errors
	if s.err != nil {
		return dst
	}
	c := &s.chunk
	k := &s.mk
	switch {
	case c.Error.Present():
		dst = s.passFlushAll(dst)
		return k.appendSpliced(dst, typ, data)
	case len(c.Choices) == 0 && c.Usage.Present() && !s.info.IncludeUsage:
		return dst // the usage chunk the client did not ask for
	}
	if len(k.head) == 0 && len(c.Choices) > 0 {
		k.setChatHead(c)
	}
	for j := range c.Choices {
		var ok bool
		if dst, ok = s.chatPassChoice(dst, data, &c.Choices[j]); !ok {
			return s.maskFailed(dst)
		}
	}
	return k.appendSpliced(dst, typ, data)
}

// chatPassChoice masks one choice of a chunk: its content, its reasoning
// and its tool calls' arguments each go through a masker of their own. The
// text ends where the choice finishes or its tool calls begin (as a
// translated text block would), the reasoning where text, tool calls or
// the finish come, the arguments at the finish: that chunk carries the
// held-back tail, or is preceded by a chunk that does.
func (s *Stream) chatPassChoice(dst, data []byte, ch *llm.ChatChoice) ([]byte, bool) {
	k := &s.mk
	d := &ch.Delta
	fin := ch.FinishReason != ""
	calls := len(d.ToolCalls) > 0
	var ok bool
	reasoningEnds := fin || calls || len(d.Content.Inner()) > 0 || d.Content.IsArray()
	if dst, ok = s.chatPassText(dst, data, keyChatReasoning|ch.Index, slotThinking, d.ReasoningContent, reasoningEnds); !ok {
		return dst, false
	}
	if d.Content.IsArray() {
		// Parts are not streamed by OpenAI; a provider that does gets each
		// part masked whole.
		if !k.maskChatContent(&s.dec, data, d.Content) {
			return dst, false
		}
	}
	if dst, ok = s.chatPassText(dst, data, ch.Index, slotText, d.Content, fin || calls); !ok {
		return dst, false
	}
	for t := range d.ToolCalls {
		args := d.ToolCalls[t].Function.Arguments
		if dst, ok = s.chatPassText(dst, data, chatCallKey(ch.Index, d.ToolCalls[t].Index), slotArgs, args, fin); !ok {
			return dst, false
		}
	}
	if fin {
		// Calls streamed in earlier chunks end too.
		for j := 0; j < len(k.slots); {
			if sl := &k.slots[j]; slotChoice(sl) == ch.Index {
				dst = s.passFlush(dst, j)
				continue
			}
			j++
		}
	}
	return dst, true
}

// chatPassText passes tok, a string token of a chunk (content, reasoning
// or a piece of arguments), through the masker of slot key; with ends the
// text ends with this chunk (an open slot is flushed before the chunk when
// tok carries nothing).
func (s *Stream) chatPassText(dst, data []byte, key int, kind slotKind, tok llm.Raw, ends bool) ([]byte, bool) {
	k := &s.mk
	if !tok.IsString() {
		if ends {
			if j := k.find(key); j >= 0 {
				dst = s.passFlush(dst, j)
			}
		}
		return dst, true
	}
	j, ok := k.openKind(key, kind)
	if !ok {
		return dst, false
	}
	plain := k.write(j, tok)
	if ends {
		plain = k.flush(j, plain)
		k.close(j)
	}
	return dst, k.replaceWith(data, tok, plain)
}

func (k *streamMask) setChatHead(c *llm.ChatChunk) {
	h := append(k.head[:0], `{"id":`...)
	h = llm.AppendString(h, c.ID)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = appendInt(h, c.Created)
	h = append(h, `,"model":`...)
	k.head = llm.AppendString(h, c.Model)
}

// appendChatChunk writes a chunk with text, the tail of slot sl: content,
// reasoning_content, or a piece of a tool call's arguments.
func (k *streamMask) appendChatChunk(dst []byte, sl *maskSlot, text []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, k.head...)
	dst = append(dst, `,"choices":[{"index":`...)
	dst = appendInt(dst, int64(slotChoice(sl)))
	switch sl.kind {
	case slotThinking:
		dst = append(dst, `,"delta":{"reasoning_content":`...)
	case slotArgs:
		dst = append(dst, `,"delta":{"tool_calls":[{"index":`...)
		dst = appendInt(dst, int64(sl.key&0xfff))
		dst = append(dst, `,"function":{"arguments":`...)
		dst = llm.AppendString(dst, text)
		return append(dst, "}}]},\"finish_reason\":null}]}\n\n"...)
	default:
		dst = append(dst, `,"delta":{"content":`...)
	}
	dst = llm.AppendString(dst, text)
	return append(dst, "},\"finish_reason\":null}]}\n\n"...)
}

// anthropicPass rewrites a Messages event: text blocks' text through their
// block's masker.
func (s *Stream) anthropicPass(dst, typ, data []byte) []byte {
	dst = s.anthropicEvent(dst, data) // usage, end, errors
	if s.err != nil {
		return dst
	}
	k := &s.mk
	e := &s.an
	ok := true
	switch e.Type {
	case "message_start":
		ok = k.maskAnthropicBlocks(data, e.Message.Content)
	case "content_block_start":
		b := &e.ContentBlock
		switch b.Type {
		case "text":
			var j int
			if j, ok = k.open(e.Index); ok && b.Text.IsString() && len(b.Text) > 2 {
				ok = k.replaceWith(data, b.Text, k.write(j, b.Text))
			}
		case "thinking":
			var j int
			if j, ok = k.openKind(e.Index, slotThinking); ok && b.Thinking.IsString() && len(b.Thinking) > 2 {
				ok = k.replaceWith(data, b.Thinking, k.write(j, b.Thinking))
			}
		case "tool_use":
			// The input the deltas build starts anew; this one is whole.
			ok = k.maskArgsIn(data, b.Input)
		}
	case "content_block_delta":
		var tok llm.Raw
		kind := slotText
		switch e.Delta.Type {
		case "text_delta":
			tok = e.Delta.Text
		case "thinking_delta":
			tok, kind = e.Delta.Thinking, slotThinking
		case "input_json_delta":
			tok, kind = e.Delta.PartialJSON, slotArgs
		case "signature_delta":
			// The thinking's text ends before its signature.
			if j := k.find(e.Index); j >= 0 {
				dst = s.passFlush(dst, j)
			}
		}
		if tok == nil {
			break
		}
		var j int
		if j, ok = k.openKind(e.Index, kind); ok {
			plain := k.write(j, tok)
			if len(plain) == 0 {
				return dst // all held back for now
			}
			ok = k.replaceWith(data, tok, plain)
		}
	case "content_block_stop":
		if j := k.find(e.Index); j >= 0 {
			dst = s.passFlush(dst, j)
		}
	case "message_delta", "message_stop", "error":
		dst = s.passFlushAll(dst)
	}
	if !ok {
		return s.maskFailed(dst)
	}
	return k.appendSpliced(dst, typ, data)
}

// appendBlockDeltaEvent writes a Messages delta of block index: a
// text_delta, thinking_delta or input_json_delta by kind.
func appendBlockDeltaEvent(dst []byte, index int, kind slotKind, text []byte) []byte {
	dst = appendNamedEvent(dst, "content_block_delta")
	dst = append(dst, `{"type":"content_block_delta","index":`...)
	dst = appendInt(dst, int64(index))
	switch kind {
	case slotThinking:
		dst = append(dst, `,"delta":{"type":"thinking_delta","thinking":`...)
	case slotArgs:
		dst = append(dst, `,"delta":{"type":"input_json_delta","partial_json":`...)
	default:
		dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
	}
	dst = llm.AppendString(dst, text)
	return append(dst, "}}\n\n"...)
}

// responsesPass rewrites a Responses event: the deltas of output_text,
// reasoning summaries, reasoning text and function call arguments through
// their part's masker, every other text masked whole, sequence numbers
// kept contiguous.
func (s *Stream) responsesPass(dst, typ, data []byte) []byte {
	k := &s.mk
	e := &k.rs
	e.reset()
	if err := s.dec.Decode(data, e); err != nil {
		return s.invalid(dst, err)
	}
	kind, isDelta, isDone := responsesTextEvent(e.Type)
	// Texts that end with this event are flushed before it.
	switch {
	case isDone:
		if j := k.find(e.partKey(kind)); j >= 0 {
			dst = s.passFlush(dst, j)
		}
	case e.Type == "response.content_part.done", e.Type == "response.reasoning_summary_part.done":
		kind := slotText
		if e.Type != "response.content_part.done" {
			kind = slotSummary
		}
		if j := k.find(e.partKey(kind)); j >= 0 {
			dst = s.passFlush(dst, j)
		}
	case e.Type == "response.output_item.done":
		out := rawIndex(e.OutputIndex)
		for j := 0; j < len(k.slots); {
			if k.slots[j].key>>16&(1<<(keyKindShift-16)-1) == out {
				dst = s.passFlush(dst, j)
				continue
			}
			j++
		}
	case e.Type == "response.completed", e.Type == "response.incomplete", e.Type == "response.failed", e.Type == "error":
		dst = s.passFlushAll(dst)
	}
	s.noteModel(e.Response.Model)
	dst = s.responsesRead(dst, e.Type, responsesUsage(&e.Response.Usage), e.Message)
	if s.err != nil {
		return dst
	}
	ok := true
	switch {
	case isDelta:
		j, opened := k.openPart(e, kind)
		if !opened {
			return s.maskFailed(dst)
		}
		plain := k.write(j, e.Delta)
		if len(plain) == 0 {
			k.seqShift-- // the event is dropped
			return dst
		}
		ok = k.replaceWith(data, e.Delta, plain)
	case isDone && kind == slotArgs:
		ok = k.maskArgsIn(data, e.Arguments)
	case isDone:
		ok = k.maskIn(data, e.Text)
	case e.Type == "response.content_part.added", e.Type == "response.content_part.done",
		e.Type == "response.reasoning_summary_part.added", e.Type == "response.reasoning_summary_part.done":
		switch e.Part.Type {
		case "output_text", "summary_text", "reasoning_text":
			ok = k.maskIn(data, e.Part.Text)
		}
	case e.Type == "response.output_item.added", e.Type == "response.output_item.done":
		ok = k.maskResponsesItem(&s.dec, data, &e.Item)
	default:
		ok = k.maskResponsesOutput(&s.dec, data, &e.Response)
	}
	if !ok || !k.renumber(data, e.SequenceNumber) {
		return s.maskFailed(dst)
	}
	return k.appendSpliced(dst, typ, data)
}

// responsesTextEvent says whether a Responses event type is the delta or
// the done of a streamed text, and what text.
func responsesTextEvent(typ string) (kind slotKind, delta, done bool) {
	switch typ {
	case "response.output_text.delta":
		return slotText, true, false
	case "response.output_text.done":
		return slotText, false, true
	case "response.reasoning_summary_text.delta":
		return slotSummary, true, false
	case "response.reasoning_summary_text.done":
		return slotSummary, false, true
	case "response.reasoning_text.delta":
		return slotThinking, true, false
	case "response.reasoning_text.done":
		return slotThinking, false, true
	case "response.function_call_arguments.delta":
		return slotArgs, true, false
	case "response.function_call_arguments.done":
		return slotArgs, false, true
	}
	return slotText, false, false
}

// partKey is the slot key of the text of kind the event is about.
func (e *rsPassEvent) partKey(kind slotKind) int {
	sub := e.ContentIndex
	switch kind {
	case slotSummary:
		sub = e.SummaryIndex
	case slotArgs:
		sub = nil
	}
	return int(kind)<<keyKindShift | partKey(e.OutputIndex, sub)
}

// openPart returns the slot of a delta's part.
func (k *streamMask) openPart(e *rsPassEvent, kind slotKind) (int, bool) {
	key := e.partKey(kind)
	if j := k.find(key); j >= 0 {
		return j, true
	}
	j, ok := k.openKind(key, kind)
	if !ok {
		return j, false
	}
	ref := append(k.slots[j].ref[:0], `"item_id":`...)
	ref = appendRawOr(ref, e.ItemID, `""`)
	ref = append(ref, `,"output_index":`...)
	ref = appendRawOr(ref, e.OutputIndex, "0")
	switch kind {
	case slotSummary:
		ref = append(ref, `,"summary_index":`...)
		ref = appendRawOr(ref, e.SummaryIndex, "0")
	case slotText, slotThinking:
		ref = append(ref, `,"content_index":`...)
		ref = appendRawOr(ref, e.ContentIndex, "0")
	}
	k.slots[j].ref = ref
	return j, true
}

func appendRawOr(dst []byte, v llm.Raw, or string) []byte {
	if v.Present() {
		return append(dst, v...)
	}
	return append(dst, or...)
}

// partKey is a slot key for a Responses part: output and content index.
func partKey(output, content llm.Raw) int {
	return rawIndex(output)<<16 | rawIndex(content)&0xffff
}

// rawIndex reads a small non-negative integer (0 when it is not one).
func rawIndex(v llm.Raw) int {
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' || n > 1<<20 {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// renumber rewrites the event's sequence number to follow the events
// written before it (some were dropped, some added).
func (k *streamMask) renumber(data []byte, seq llm.Raw) bool {
	if len(seq) == 0 || len(seq) > 18 {
		return true // no number (or none we can shift): nothing to keep in order
	}
	n := int64(0)
	for _, c := range seq {
		if c < '0' || c > '9' {
			return true
		}
		n = n*10 + int64(c-'0')
	}
	n += k.seqShift
	k.lastSeq = n
	if k.seqShift == 0 {
		return true
	}
	from := len(k.sp.repl)
	k.sp.repl = appendInt(k.sp.repl, n)
	return k.sp.replace(data, seq, from)
}

// appendResponsesDelta writes the delta event of the text of kind in the
// part ref names, numbered after the last event written.
func (k *streamMask) appendResponsesDelta(dst, ref []byte, kind slotKind, text []byte) []byte {
	k.lastSeq++
	k.seqShift++
	typ := "response.output_text.delta"
	switch kind {
	case slotSummary:
		typ = "response.reasoning_summary_text.delta"
	case slotThinking:
		typ = "response.reasoning_text.delta"
	case slotArgs:
		typ = "response.function_call_arguments.delta"
	}
	dst = appendNamedEvent(dst, typ)
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","sequence_number":`...)
	dst = appendInt(dst, k.lastSeq)
	dst = append(dst, ',')
	dst = append(dst, ref...)
	dst = append(dst, `,"delta":`...)
	dst = llm.AppendString(dst, text)
	if kind == slotText {
		dst = append(dst, `,"logprobs":[]`...)
	}
	return append(dst, "}\n\n"...)
}

// numberOurs makes the Responses writer number an event of ours (an error)
// after the provider's events written so far.
func (k *streamMask) numberOurs(w *responsesWriter) {
	w.seq = k.lastSeq + 1
}
