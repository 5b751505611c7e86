package convert

import (
	"strings"
	"unsafe"

	"github.com/relaygate/gateway/codec/llm"
)

// Responses API streams: named SSE events (response.created,
// response.output_item.added, response.output_text.delta, ...,
// response.completed), each with a sequence_number.

// responsesEvent reads a Responses provider's stream, which only a
// Responses client receives (as it is): for its usage and end.
func (s *Stream) responsesEvent(dst, data []byte) []byte {
	e := &s.rs
	if err := e.Decode(&s.dec, data); err != nil {
		return s.invalid(dst, err)
	}
	if len(e.Delta) > 2 && e.Delta.IsString() && strings.HasSuffix(e.Type, ".delta") {
		s.countDelta(e.Delta)
	}
	s.noteModel(e.Response.Model)
	return s.responsesRead(dst, e.Type, responsesUsage(&e.Response.Usage), e.Message)
}

// responsesRead reads what a Responses event of type typ says of the
// stream: its usage and end, or the provider's error message.
func (s *Stream) responsesRead(dst []byte, typ string, u Usage, message llm.Raw) []byte {
	switch typ {
	case "response.completed", "response.incomplete", "response.failed":
		if typ == "response.failed" && s.failed.Status == 0 {
			// The provider's own failure, for ProviderFailure; the stream
			// still ends as it says.
			s.failMsg = append(s.failMsg[:0], "the provider's response failed"...)
			s.failed = StreamFailure{Status: 500, Message: s.failMsg}
		}
		s.addUsage(u)
		s.rd.stopped = true
		return s.end(dst)
	case "error":
		msg, _ := llm.Text(nil, message)
		return s.providerError(dst, 500, "", msg)
	}
	return dst
}

type rsItem struct {
	kind   kind
	id     []byte // item id
	callID []byte // string token
	name   []byte // string token
	text   []byte // escaped text (no quotes): text, arguments or summary
	done   bool
}

// rsItemBytes is what an item costs kept, its text and names aside
// (Stream.keep): its buffers' headers and its place in the writer's
// slices, so that an endless stream of empty calls is bounded too.
const rsItemBytes = int(unsafe.Sizeof(rsItem{})) + 64

type responsesWriter struct {
	id      []byte // resp_...
	model   []byte // string token
	created int64
	seq     int64 // the next event's sequence_number (from 0, as OpenAI's)
	items   []rsItem
	item    []int // block index -> item index (-1: none)
	stop    stopReason
}

func (w *responsesWriter) reset() {
	items := w.items[:0]
	*w = responsesWriter{id: w.id[:0], model: w.model[:0], items: items, item: w.item[:0]}
}

// newItem appends an item, reusing a former one's buffers.
func (w *responsesWriter) newItem(k kind) *rsItem {
	n := len(w.items)
	if n < cap(w.items) {
		w.items = w.items[:n+1]
		it := &w.items[n]
		*it = rsItem{kind: k, id: it.id[:0], callID: it.callID[:0], name: it.name[:0], text: it.text[:0]}
		return it
	}
	w.items = append(w.items, rsItem{kind: k})
	return &w.items[n]
}

// begin writes an event's name and the data's start up to its sequence
// number.
func (w *responsesWriter) begin(dst []byte, name string) []byte {
	dst = appendNamedEvent(dst, name)
	dst = append(dst, `{"type":"`...)
	dst = append(dst, name...)
	dst = append(dst, `","sequence_number":`...)
	dst = appendInt(dst, w.seq)
	w.seq++
	return dst
}

func (w *responsesWriter) appendItemRef(dst []byte, i int) []byte {
	dst = append(dst, `,"item_id":"`...)
	dst = append(dst, w.items[i].id...)
	dst = append(dst, `","output_index":`...)
	return appendInt(dst, int64(i))
}

// appendResponse writes the response object with its status, the items so
// far, and (when final) usage.
func (s *Stream) appendResponse(dst []byte, status, reason string, final bool) []byte {
	w := &s.rsW
	dst = append(dst, `,"response":{"id":"`...)
	dst = append(dst, w.id...)
	dst = append(dst, `","object":"response","created_at":`...)
	dst = appendInt(dst, w.created)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","model":`...)
	dst = append(dst, w.model...)
	dst = append(dst, `,"output":[`...)
	for i := range w.items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = w.appendItem(dst, i, "completed")
	}
	dst = append(dst, `],"incomplete_details":`...)
	dst = appendIncomplete(dst, reason)
	dst = append(dst, `,"usage":`...)
	if final {
		dst = appendResponsesUsage(dst, s.usage)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// appendItem writes item i as the output holds it.
func (w *responsesWriter) appendItem(dst []byte, i int, status string) []byte {
	it := &w.items[i]
	dst = append(dst, `{"id":"`...)
	dst = append(dst, it.id...)
	switch it.kind {
	case kToolUse:
		dst = append(dst, `","type":"function_call","status":"`...)
		dst = append(dst, status...)
		dst = append(dst, `","call_id":`...)
		dst = append(dst, it.callID...)
		dst = append(dst, `,"name":`...)
		dst = append(dst, it.name...)
		dst = append(dst, `,"arguments":"`...)
		dst = append(dst, it.text...)
		return append(dst, `"}`...)
	case kThinking:
		dst = append(dst, `","type":"reasoning","summary":[`...)
		if it.done || len(it.text) > 0 {
			dst = append(dst, `{"type":"summary_text","text":"`...)
			dst = append(dst, it.text...)
			dst = append(dst, `"}`...)
		}
		return append(dst, "]}"...)
	}
	dst = append(dst, `","type":"message","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","role":"assistant","content":[`...)
	if status != "in_progress" {
		dst = append(dst, `{"type":"output_text","text":"`...)
		dst = append(dst, it.text...)
		dst = append(dst, `","annotations":[]}`...)
	}
	return append(dst, "]}"...)
}

func (s *Stream) responsesWrite(dst []byte, ev *event) []byte {
	w := &s.rsW
	switch ev.kind {
	case evStart:
		w.id = append(w.id[:0], "resp_"...)
		if ev.id != "" {
			w.id = appendEscapedText(w.id, bytesOf(ev.id))
		} else {
			w.id = appendID(w.id, "")
		}
		if ev.model != "" {
			w.model = llm.AppendString(w.model[:0], ev.model)
		} else {
			w.model = llm.AppendString(w.model[:0], s.model)
		}
		w.created = nowUnix()
		dst = w.begin(dst, "response.created")
		dst = s.appendResponse(dst, "in_progress", "", false)
		dst = append(dst, "}\n\n"...)
		dst = w.begin(dst, "response.in_progress")
		dst = s.appendResponse(dst, "in_progress", "", false)
		return append(dst, "}\n\n"...)
	case evBlockStart:
		for len(w.item) <= ev.index {
			w.item = append(w.item, -1)
		}
		if ev.block == kRedacted || ev.block == kImage {
			return dst
		}
		if !s.keep(rsItemBytes + len(ev.id) + len(ev.name)) {
			return s.keptTooMuch(dst)
		}
		i := len(w.items)
		w.item[ev.index] = i
		it := w.newItem(ev.block)
		switch ev.block {
		case kToolUse:
			it.id = append(it.id, "fc_"...)
			it.id = appendEscapedText(it.id, bytesOf(ev.id))
			it.callID = llm.AppendString(it.callID, ev.id)
			it.name = llm.AppendString(it.name, ev.name)
		case kThinking:
			it.id = appendItemIDText(it.id, "rs_", w.id, i)
		default:
			it.id = appendItemIDText(it.id, "msg_", w.id, i)
		}
		dst = w.begin(dst, "response.output_item.added")
		dst = append(dst, `,"output_index":`...)
		dst = appendInt(dst, int64(i))
		dst = append(dst, `,"item":`...)
		dst = w.appendItem(dst, i, "in_progress")
		dst = append(dst, "}\n\n"...)
		switch ev.block {
		case kText:
			dst = w.begin(dst, "response.content_part.added")
			dst = w.appendItemRef(dst, i)
			dst = append(dst, `,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`+"\n\n"...)
		case kThinking:
			dst = w.begin(dst, "response.reasoning_summary_part.added")
			dst = w.appendItemRef(dst, i)
			dst = append(dst, `,"summary_index":0,"part":{"type":"summary_text","text":""}}`+"\n\n"...)
		}
		return dst
	case evDelta:
		i := -1
		if ev.index < len(w.item) {
			i = w.item[ev.index]
		}
		if i < 0 {
			return dst
		}
		it := &w.items[i]
		if d, ok := deltaOf(it.kind); !ok || ev.delta != d {
			return dst
		}
		if !s.keep(len(ev.text) - 2) {
			return s.keptTooMuch(dst)
		}
		switch it.kind {
		case kText:
			dst = w.begin(dst, "response.output_text.delta")
			dst = w.appendItemRef(dst, i)
			dst = append(dst, `,"content_index":0,"delta":`...)
		case kToolUse:
			dst = w.begin(dst, "response.function_call_arguments.delta")
			dst = w.appendItemRef(dst, i)
			dst = append(dst, `,"delta":`...)
		case kThinking:
			dst = w.begin(dst, "response.reasoning_summary_text.delta")
			dst = w.appendItemRef(dst, i)
			dst = append(dst, `,"summary_index":0,"delta":`...)
		}
		it.text = append(it.text, ev.text.Inner()...)
		dst = append(dst, ev.text...)
		return append(dst, "}\n\n"...)
	case evBlockStop:
		if ev.index >= len(w.item) || w.item[ev.index] < 0 {
			return dst
		}
		return s.responsesItemDone(dst, w.item[ev.index])
	case evStop:
		w.stop = ev.stop
	case evEnd:
		for i := range w.items {
			if !w.items[i].done {
				dst = s.responsesItemDone(dst, i)
			}
		}
		status, reason := responsesStatus(w.stop)
		name := "response.completed"
		if status == "incomplete" {
			name = "response.incomplete"
		}
		dst = w.begin(dst, name)
		dst = s.appendResponse(dst, status, reason, true)
		return append(dst, "}\n\n"...)
	case evError:
		dst = w.begin(dst, "error")
		dst = append(dst, `,"code":`...)
		dst = llm.AppendString(dst, ev.errType)
		dst = append(dst, `,"message":`...)
		dst = llm.AppendString(dst, ev.errMsg)
		return append(dst, `,"param":null}`+"\n\n"...)
	}
	return dst
}

// deltaOf is the delta an item of kind k takes, if any.
func deltaOf(k kind) (deltaKind, bool) {
	switch k {
	case kText:
		return dText, true
	case kToolUse:
		return dArgs, true
	case kThinking:
		return dThinking, true
	}
	return 0, false
}

func (s *Stream) responsesItemDone(dst []byte, i int) []byte {
	w := &s.rsW
	it := &w.items[i]
	if it.done {
		return dst
	}
	it.done = true
	switch it.kind {
	case kText:
		dst = w.begin(dst, "response.output_text.done")
		dst = w.appendItemRef(dst, i)
		dst = append(dst, `,"content_index":0,"text":"`...)
		dst = append(dst, it.text...)
		dst = append(dst, "\"}\n\n"...)
		dst = w.begin(dst, "response.content_part.done")
		dst = w.appendItemRef(dst, i)
		dst = append(dst, `,"content_index":0,"part":{"type":"output_text","text":"`...)
		dst = append(dst, it.text...)
		dst = append(dst, "\",\"annotations\":[]}}\n\n"...)
	case kToolUse:
		if len(it.text) == 0 {
			// A call without arguments (Anthropic's empty partial_json,
			// Bedrock's none) has the empty object, as a whole answer
			// does.
			it.text = append(it.text, "{}"...)
			dst = w.begin(dst, "response.function_call_arguments.delta")
			dst = w.appendItemRef(dst, i)
			dst = append(dst, `,"delta":"{}"}`+"\n\n"...)
		}
		dst = w.begin(dst, "response.function_call_arguments.done")
		dst = w.appendItemRef(dst, i)
		dst = append(dst, `,"arguments":"`...)
		dst = append(dst, it.text...)
		dst = append(dst, "\"}\n\n"...)
	case kThinking:
		dst = w.begin(dst, "response.reasoning_summary_text.done")
		dst = w.appendItemRef(dst, i)
		dst = append(dst, `,"summary_index":0,"text":"`...)
		dst = append(dst, it.text...)
		dst = append(dst, "\"}\n\n"...)
		dst = w.begin(dst, "response.reasoning_summary_part.done")
		dst = w.appendItemRef(dst, i)
		dst = append(dst, `,"summary_index":0,"part":{"type":"summary_text","text":"`...)
		dst = append(dst, it.text...)
		dst = append(dst, "\"}}\n\n"...)
	}
	dst = w.begin(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = appendInt(dst, int64(i))
	dst = append(dst, `,"item":`...)
	dst = w.appendItem(dst, i, "completed")
	return append(dst, "}\n\n"...)
}

// appendItemIDText writes an item id (no quotes) derived from the response
// id: prefix, the id without "resp_", and the item's position.
func appendItemIDText(dst []byte, prefix string, respID []byte, i int) []byte {
	dst = append(dst, prefix...)
	if len(respID) > 5 && string(respID[:5]) == "resp_" {
		respID = respID[5:]
	}
	dst = append(dst, respID...)
	dst = append(dst, '_')
	return appendInt(dst, int64(i))
}
