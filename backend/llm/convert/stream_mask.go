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
//   - Messages: a text_delta that masked to nothing is dropped; the tail is
//     a content_block_delta before content_block_stop.
//   - Responses: an output_text.delta that masked to nothing is dropped and
//     the tail is an output_text.delta before output_text.done, so
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
// Only answer text is masked: not thinking, tool call arguments or
// refusals. Same-format Gemini and Bedrock streams are refused with a mask
// (they are no client's format).

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
	// ref is a Responses part's `"item_id":...,"output_index":...,
	// "content_index":...`, for the delta that flushes it.
	ref []byte
}

// rsPassEvent is what masking reads of a Responses stream event.
type rsPassEvent struct {
	Type           string               `json:"type"`
	SequenceNumber llm.Raw              `json:"sequence_number"`
	ItemID         llm.Raw              `json:"item_id"`
	OutputIndex    llm.Raw              `json:"output_index"`
	ContentIndex   llm.Raw              `json:"content_index"`
	Delta          llm.Raw              `json:"delta"`
	Text           llm.Raw              `json:"text"`
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
	k.out, k.ev = keepScratch(k.out), keepScratch(k.ev)
}

func (k *streamMask) find(key int) int {
	for j := range k.slots {
		if k.slots[j].key == key {
			return j
		}
	}
	return -1
}

// open returns the slot of key, opening it if need be; false when
// maxMaskSlots are open.
func (k *streamMask) open(key int) (int, bool) {
	if j := k.find(key); j >= 0 {
		return j, true
	}
	if len(k.slots) >= maxMaskSlots {
		return -1, false
	}
	ref := k.spare
	k.spare = nil
	k.slots = append(k.slots, maskSlot{key: key, m: guard.AcquireStreamMasker(k.g), ref: ref[:0]})
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
	k.out = k.slots[j].m.Write(k.out[:0], k.plain)
	if k.tap != nil {
		*k.tap = append(*k.tap, k.out...)
	}
	return k.out
}

// flush appends what slot j's masker held back to released (k.out's
// content) and returns it; the slot stays open.
func (k *streamMask) flush(j int, released []byte) []byte {
	k.out = k.slots[j].m.Flush(released)
	if k.tap != nil {
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

// maskDelta passes the text delta tok of block i of a translated stream
// through the block's masker: it returns the token of what was released,
// nil when nothing was.
func (s *Stream) maskDelta(i int, tok llm.Raw) (llm.Raw, bool) {
	k := &s.mk
	j, ok := k.open(i)
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

// flushText ends the masking of a translated stream's open text block:
// what its masker held back goes out as one last delta.
func (s *Stream) flushText(dst []byte) []byte {
	k := &s.mk
	if k.g == nil || k.pass || s.rd.open < 0 || s.rd.openKind != kText {
		return dst
	}
	j := k.find(s.rd.open)
	if j < 0 {
		return dst
	}
	tail := k.flush(j, k.out[:0])
	k.close(j)
	if len(tail) == 0 {
		return dst
	}
	k.tok = llm.AppendString(k.tok[:0], tail)
	s.ev = event{kind: evDelta, index: s.rd.open, delta: dText, text: k.tok}
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
		switch s.info.Client {
		case Chat:
			dst = k.appendChatChunk(dst, k.slots[j].key, tail)
		case Messages:
			dst = appendTextDeltaEvent(dst, k.slots[j].key, tail)
		case Responses:
			dst = k.appendOutputTextDelta(dst, k.slots[j].ref, tail)
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

// chatPassChoice masks one choice of a chunk: its content goes through the
// choice's masker. The text ends where the choice finishes or its tool
// calls begin (as a translated text block would): that chunk carries the
// held-back tail, or is preceded by a chunk that does.
func (s *Stream) chatPassChoice(dst, data []byte, ch *llm.ChatChoice) ([]byte, bool) {
	k := &s.mk
	content := ch.Delta.Content
	ends := ch.FinishReason != "" || len(ch.Delta.ToolCalls) > 0
	switch {
	case content.IsString():
		j, ok := k.open(ch.Index)
		if !ok {
			return dst, false
		}
		plain := k.write(j, content)
		if ends {
			plain = k.flush(j, plain)
			k.close(j)
		}
		return dst, k.replaceWith(data, content, plain)
	case content.IsArray():
		// Parts are not streamed by OpenAI; a provider that does gets each
		// part masked whole.
		if !k.maskChatContent(&s.dec, data, content) {
			return dst, false
		}
	}
	if ends {
		if j := k.find(ch.Index); j >= 0 {
			dst = s.passFlush(dst, j)
		}
	}
	return dst, true
}

func (k *streamMask) setChatHead(c *llm.ChatChunk) {
	h := append(k.head[:0], `{"id":`...)
	h = llm.AppendString(h, c.ID)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = appendInt(h, c.Created)
	h = append(h, `,"model":`...)
	k.head = llm.AppendString(h, c.Model)
}

// appendChatChunk writes a chunk of choice index with content text.
func (k *streamMask) appendChatChunk(dst []byte, index int, text []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, k.head...)
	dst = append(dst, `,"choices":[{"index":`...)
	dst = appendInt(dst, int64(index))
	dst = append(dst, `,"delta":{"content":`...)
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
		if e.ContentBlock.Type != "text" {
			break
		}
		var j int
		if j, ok = k.open(e.Index); ok && e.ContentBlock.Text.IsString() && len(e.ContentBlock.Text) > 2 {
			ok = k.replaceWith(data, e.ContentBlock.Text, k.write(j, e.ContentBlock.Text))
		}
	case "content_block_delta":
		if e.Delta.Type != "text_delta" {
			break
		}
		var j int
		if j, ok = k.open(e.Index); ok {
			plain := k.write(j, e.Delta.Text)
			if len(plain) == 0 {
				return dst // all held back for now
			}
			ok = k.replaceWith(data, e.Delta.Text, plain)
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

// appendTextDeltaEvent writes a Messages text_delta of block index.
func appendTextDeltaEvent(dst []byte, index int, text []byte) []byte {
	dst = appendNamedEvent(dst, "content_block_delta")
	dst = append(dst, `{"type":"content_block_delta","index":`...)
	dst = appendInt(dst, int64(index))
	dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
	dst = llm.AppendString(dst, text)
	return append(dst, "}}\n\n"...)
}

// responsesPass rewrites a Responses event: output_text deltas through
// their part's masker, every other text masked whole, sequence numbers
// kept contiguous.
func (s *Stream) responsesPass(dst, typ, data []byte) []byte {
	k := &s.mk
	e := &k.rs
	e.reset()
	if err := s.dec.Decode(data, e); err != nil {
		return s.invalid(dst, err)
	}
	// Texts that end with this event are flushed before it.
	switch e.Type {
	case "response.output_text.done", "response.content_part.done":
		if j := k.find(partKey(e.OutputIndex, e.ContentIndex)); j >= 0 {
			dst = s.passFlush(dst, j)
		}
	case "response.output_item.done":
		out := rawIndex(e.OutputIndex)
		for j := 0; j < len(k.slots); {
			if k.slots[j].key>>16 == out {
				dst = s.passFlush(dst, j)
				continue
			}
			j++
		}
	case "response.completed", "response.incomplete", "response.failed", "error":
		dst = s.passFlushAll(dst)
	}
	dst = s.responsesRead(dst, e.Type, responsesUsage(&e.Response.Usage), e.Message)
	if s.err != nil {
		return dst
	}
	ok := true
	switch e.Type {
	case "response.output_text.delta":
		j, opened := k.openPart(e)
		if !opened {
			return s.maskFailed(dst)
		}
		plain := k.write(j, e.Delta)
		if len(plain) == 0 {
			k.seqShift-- // the event is dropped
			return dst
		}
		ok = k.replaceWith(data, e.Delta, plain)
	case "response.output_text.done":
		ok = k.maskIn(data, e.Text)
	case "response.content_part.added", "response.content_part.done":
		if e.Part.Type == "output_text" {
			ok = k.maskIn(data, e.Part.Text)
		}
	case "response.output_item.added", "response.output_item.done":
		ok = k.maskResponsesItem(&s.dec, data, &e.Item)
	default:
		ok = k.maskResponsesOutput(&s.dec, data, &e.Response)
	}
	if !ok || !k.renumber(data, e.SequenceNumber) {
		return s.maskFailed(dst)
	}
	return k.appendSpliced(dst, typ, data)
}

// openPart returns the slot of an output_text delta's part.
func (k *streamMask) openPart(e *rsPassEvent) (int, bool) {
	key := partKey(e.OutputIndex, e.ContentIndex)
	if j := k.find(key); j >= 0 {
		return j, true
	}
	j, ok := k.open(key)
	if !ok {
		return j, false
	}
	ref := append(k.slots[j].ref[:0], `"item_id":`...)
	ref = appendRawOr(ref, e.ItemID, `""`)
	ref = append(ref, `,"output_index":`...)
	ref = appendRawOr(ref, e.OutputIndex, "0")
	ref = append(ref, `,"content_index":`...)
	k.slots[j].ref = appendRawOr(ref, e.ContentIndex, "0")
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

// appendOutputTextDelta writes an output_text.delta of the part ref names,
// numbered after the last event written.
func (k *streamMask) appendOutputTextDelta(dst, ref, text []byte) []byte {
	k.lastSeq++
	k.seqShift++
	dst = appendNamedEvent(dst, "response.output_text.delta")
	dst = append(dst, `{"type":"response.output_text.delta","sequence_number":`...)
	dst = appendInt(dst, k.lastSeq)
	dst = append(dst, ',')
	dst = append(dst, ref...)
	dst = append(dst, `,"delta":`...)
	dst = llm.AppendString(dst, text)
	return append(dst, ",\"logprobs\":[]}\n\n"...)
}

// numberOurs makes the Responses writer number an event of ours (an error)
// after the provider's events written so far.
func (k *streamMask) numberOurs(w *responsesWriter) {
	w.seq = k.lastSeq + 1
}
