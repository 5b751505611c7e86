package aipolicy

import (
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm"
)

// This file writes a request out once with everything the policy changes:
// the fields' members, the prompts inserted into the conversation and the
// masked strings. All three are edits of one body: the fields change
// top-level members other than the conversation (Request takes the slow
// path otherwise), the prompts and masks land inside it.

// edits is what write changes besides the fields: the prompts of the
// body's format (nil: none) and w.texts.spans, whose masked texts replace
// theirs.
type edits struct {
	prompts *enrichment
	f       convert.Format
}

// conversation is the role a top-level member plays in format f.
type conversation uint8

const (
	otherMember  conversation = iota
	turnsMember               // the messages (Chat, Messages) or input items (Responses)
	systemMember              // Messages' system prompt
)

func memberRole(body []byte, name tok, f convert.Format) conversation {
	switch f {
	case convert.Chat:
		if nameIs(body, name, "messages") {
			return turnsMember
		}
	case convert.Messages:
		if nameIs(body, name, "messages") {
			return turnsMember
		}
		if nameIs(body, name, "system") {
			return systemMember
		}
	case convert.Responses:
		if nameIs(body, name, "input") {
			return turnsMember
		}
	}
	return otherMember
}

// wrapping turns a string (or null) conversation member into the items of
// an array: prefix + the string token + suffix, or nothing for null.
type wrapping struct {
	prefix, suffix string
	drop           bool
}

var (
	// Responses' text input is one user message.
	userInputItem = &wrapping{prefix: `{"type":"message","role":"user","content":[{"type":"input_text","text":`, suffix: `}]}`}
	// Messages' string system prompt is one text block.
	systemTextBlock = &wrapping{prefix: `{"type":"text","text":`, suffix: `}`}
	// A null system prompt is no block.
	noItem = &wrapping{drop: true}
)

// write appends the object top of tp to dst with the fields' actions (fs
// may be nil) and the edits applied, and reports whether anything changed
// (when not, what it appended is meaningless). Unchanged members are copied
// byte for byte, name to value.
func (w *work) write(dst []byte, tp *tape, top tok, fs *fieldSet, e edits) ([]byte, bool) {
	body := tp.d
	w.cursor = 0
	if !fs.empty() {
		fs.begin(w)
	}
	base := len(dst) // the members' offsets count from here
	w.members = w.members[:0]
	dst = append(dst, '{')
	n, changed, hasSystem := 0, false, false
	it := tp.walk(top)
	for name, v, ok := it.member(); ok; name, v, ok = it.member() {
		if !fs.empty() {
			act, val := fs.memberAction(w, body, name, v)
			switch act {
			case dropMember:
				changed = true
				continue
			case replaceMember:
				dst = appendMember(dst, n, body[name.start:name.end], val)
				w.noteMember(base, len(dst)-len(val)-1-(name.end-name.start), name.end-name.start, len(dst)-len(val), len(dst))
				n, changed = n+1, true
				continue
			}
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		// The name and what follows it up to the value are copied as they
		// are, so the value starts as far from the name as in body.
		at, valueAt := len(dst), len(dst)+v.start-name.start
		var pre, post []byte
		var wrap *wrapping
		if e.prompts != nil {
			switch memberRole(body, name, e.f) {
			case turnsMember:
				pre, post = e.prompts.pre, e.prompts.post
				if e.f == convert.Responses && v.is(body, '"') {
					wrap = userInputItem
				}
			case systemMember:
				hasSystem = true
				pre, post = e.prompts.sysPre, e.prompts.sysPost
				switch {
				case v.is(body, '"'):
					wrap = systemTextBlock
				case v.is(body, 'n'):
					wrap = noItem
				}
			}
		}
		if (pre != nil || post != nil) && (wrap != nil || v.is(body, '[')) {
			dst = append(dst, body[name.start:v.start]...)
			dst = w.appendItems(dst, body, v, pre, post, wrap)
			w.noteMember(base, at, name.end-name.start, valueAt, len(dst))
			changed = true
			continue
		}
		var masked bool
		dst, masked = w.appendMasked(dst, body, name.start, v.end)
		w.noteMember(base, at, name.end-name.start, valueAt, len(dst))
		changed = changed || masked
	}
	if !fs.empty() {
		for i := range fs.fields {
			if val, set := fs.added(w, i); set {
				if n > 0 {
					dst = append(dst, ',')
				}
				at := len(dst)
				dst = llm.AppendString(dst, fs.fields[i].name)
				nameLen := len(dst) - at
				dst = append(dst, ':')
				dst = append(dst, val...)
				w.noteMember(base, at, nameLen, at+nameLen+1, len(dst))
				n, changed = n+1, true
			}
		}
	}
	if p := e.prompts; p != nil && e.f == convert.Messages && !hasSystem && (p.sysPre != nil || p.sysPost != nil) {
		if n > 0 {
			dst = append(dst, ',')
		}
		at := len(dst)
		dst = append(dst, `"system":`...)
		dst = w.appendItems(dst, body, tok{}, p.sysPre, p.sysPost, noItem)
		w.noteMember(base, at, len(`"system"`), at+len(`"system":`), len(dst))
		changed = true
	}
	return append(dst, '}'), changed
}

// noteMember records a member write wrote: its name's token is
// dst[at:at+nameLen], its value dst[valueAt:valueEnd]; offsets are kept
// from base, where the body starts.
func (w *work) noteMember(base, at, nameLen, valueAt, valueEnd int) {
	w.members = append(w.members, Member{at - base, at - base + nameLen, valueAt - base, valueEnd - base})
}

// appendItems writes the array pre + v's items + post, where v is an array
// or, with wrap, a value wrap turns into items.
func (w *work) appendItems(dst, body []byte, v tok, pre, post []byte, wrap *wrapping) []byte {
	dst = append(dst, '[')
	opened := len(dst)
	dst = append(dst, pre...)
	mark := len(dst)
	if mark > opened {
		dst = append(dst, ',')
	}
	before := len(dst)
	switch {
	case wrap == nil:
		from, to := arrayInner(body, v)
		dst, _ = w.appendMasked(dst, body, from, to)
	case !wrap.drop:
		dst = append(dst, wrap.prefix...)
		dst, _ = w.appendMasked(dst, body, v.start, v.end)
		dst = append(dst, wrap.suffix...)
	}
	if len(dst) == before {
		dst = dst[:mark] // nothing in between: no comma after pre
	}
	if post != nil {
		if len(dst) > opened {
			dst = append(dst, ',')
		}
		dst = append(dst, post...)
	}
	return append(dst, ']')
}

// arrayInner is the span between an array's brackets, spaces trimmed.
func arrayInner(body []byte, v tok) (from, to int) {
	from, to = skipWS(body, v.start+1), v.end-1
	for to > from && (body[to-1] == ' ' || body[to-1] == '\n' || body[to-1] == '\r' || body[to-1] == '\t') {
		to--
	}
	return from, to
}

// appendMasked appends body[from:to] with the masked texts within it
// written in place of their strings, and reports whether there were any.
// Calls must come in body order: w.cursor walks the spans (sorted) once.
func (w *work) appendMasked(dst, body []byte, from, to int) ([]byte, bool) {
	spans := w.texts.spans
	at, masked := from, false
	for ; w.cursor < len(spans) && spans[w.cursor].start < to; w.cursor++ {
		s := &spans[w.cursor]
		if !s.masked || s.start < at {
			continue // unchanged, or a string read twice
		}
		dst = append(dst, body[at:s.start]...)
		if text := w.arena[s.off : s.off+s.n]; s.escape {
			dst = llm.AppendString(dst, text)
		} else {
			// The token's own bytes with plain labels put in: no
			// escaping needed, none to redo.
			dst = append(append(append(dst, '"'), text...), '"')
		}
		at, masked = s.end, true
	}
	return append(dst, body[at:to]...), masked
}
