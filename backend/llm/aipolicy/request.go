package aipolicy

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/llm/tokens"
	"github.com/relaygate/gateway/policy/celrules"
)

// Errors of Request and Final; the server answers them with 400 and the
// message (Error()).
var (
	// ErrNotObject: the body is not a JSON object the decoder reads.
	ErrNotObject      = errors.New("the request body is not a JSON object (nested at most " + strconv.Itoa(llm.MaxDepth) + " deep)")
	errFinalNotObject = errors.New("the converted request body is not a JSON object")
	errTooLarge       = errors.New("the request body is too large to edit")
)

// maxBody is the largest body the policy edits (tape offsets are int32).
const maxBody = math.MaxInt32

// work is the scratch state of one call, pooled.
type work struct {
	staged []byte // the fields applied first (Request's slow path)
	arena  []byte // texts decoded or masked by the guards
	// partText, ends and cuts are guardParts': one message's text blocks
	// joined, where each ends in joined, and in its masked form.
	partText   []byte
	ends, cuts []int
	celOut     []byte // transformations' results
	results    []result
	seen       []bool
	texts      texts
	tape       tape
	depth      int // what tape indexes, 0 for nothing
	cursor     int // write's place in texts.spans
	// members are the top-level members write wrote, as offsets into what
	// it wrote (RequestMembers).
	members []Member
}

// Member is a top-level member of a body the policy returned: the offsets,
// from the body's first byte, of its name's string token and of its value.
type Member struct{ NameStart, NameEnd, ValueStart, ValueEnd int }

// index returns the tape of d, built to at least depth, reusing the last
// one when it indexes the same text deeply enough.
func (w *work) index(d []byte, depth int) *tape {
	tp := &w.tape
	if w.depth < depth || len(tp.d) != len(d) || len(d) == 0 || &tp.d[0] != &d[0] {
		tp.build(d, depth)
		w.depth = depth
	}
	return tp
}

// indexValid is index for a body that must be one JSON object
// (llm.ValidObject's rule), checked in the same pass: false when it is not.
func (w *work) indexValid(d []byte, depth int) (*tape, bool) {
	tp := &w.tape
	if !tp.buildValid(d, depth) {
		tp.d, w.depth = nil, 0 // not to be reused
		return tp, false
	}
	w.depth = depth
	return tp, true
}

// Pooled scratch is bounded: a call on a huge body does not leave its
// buffers pinned in the pool.
const (
	maxPooledBytes = 1 << 20
	maxPooledSpans = 1 << 14
	maxPooledNodes = 1 << 16
)

var works = sync.Pool{New: func() any { return new(work) }}

func getWork() *work {
	w := works.Get().(*work)
	w.texts.spans = w.texts.spans[:0]
	return w
}

func putWork(w *work) {
	for _, b := range []*[]byte{&w.staged, &w.arena, &w.celOut} {
		if cap(*b) > maxPooledBytes {
			*b = nil
		}
	}
	if cap(w.texts.spans) > maxPooledSpans {
		w.texts.spans = nil
	}
	if cap(w.members) > maxPooledSpans {
		w.members = nil
	}
	if cap(w.texts.keyBuf) > maxPooledBytes {
		w.texts.keyBuf = nil
	}
	if cap(w.tape.nodes) > maxPooledNodes {
		w.tape.nodes = nil
	}
	w.texts.tp, w.texts.d, w.tape.d, w.depth = nil, nil, nil, 0
	works.Put(w)
}

// Request applies the policy to a client's body in format f, in
// agentgateway's order (see the package comment): the body mutations
// (transformations evaluated on the client's body, overrides, the
// transformations' results, defaults), prompt enrichment, then the request
// guards. Enrichment and guards apply to Chat, Messages and Responses
// bodies; a body of another route type (embeddings, rerank, detect:
// pass convert.FormatUnknown) gets the mutations only, as in agentgateway.
//
// The result is appended to dst; when nothing changed it is body itself
// (no copy). rej is set, and out is dst, when a guard refused the request.
// in is the request's CEL input; nil reads as a request without
// attributes. The error, a short message without the body, is for a body
// that is not one valid JSON object, or one of 2 GiB or more.
//
// All edits land in one copy of the body (rewrite.go), unless a field
// names the conversation itself ("messages", "system", "input",
// "instructions"): then the fields are applied first, and the prompts and
// guards to their result.
func (p *Policy) Request(dst, body []byte, f convert.Format, in *celrules.Input) (out []byte, rej *Rejection, err error) {
	return p.RequestRemote(dst, body, f, in, nil)
}

// RequestRemote is Request with what the remote request guards need
// (remote; nil: context.Background and an empty guardrail.Input). Its
// error is a *GuardError when a cloud guard failed (the server answers
// 503), and the outcome of the remote guards is recorded in remote.
func (p *Policy) RequestRemote(dst, body []byte, f convert.Format, in *celrules.Input, remote *RemoteInput) (out []byte, rej *Rejection, err error) {
	return p.RequestMembers(dst, body, f, in, remote, nil)
}

// RequestMembers is RequestRemote that also sets *members (when members is
// not nil) to the top-level members of the body it returns, the part of out
// after dst's bytes, in order; none when it refuses or fails. A caller that
// needs them (the server reads the model and the stream flag) then does not
// walk the body again: the policy wrote it, or indexed it.
func (p *Policy) RequestMembers(dst, body []byte, f convert.Format, in *celrules.Input, remote *RemoteInput, members *[]Member) (out []byte, rej *Rejection, err error) {
	if members != nil {
		*members = (*members)[:0]
	}
	if len(body) > maxBody {
		return dst, nil, errTooLarge
	}
	w := getWork()
	defer putWork(w)
	chat := chatFormat(f)
	guarded := chat && len(p.guards) > 0
	var e edits
	if chat && !p.prompts[f].empty() {
		e = edits{prompts: &p.prompts[f], f: f}
	}
	depth := topLevel
	if guarded || len(p.request.transforms) > 0 {
		depth = allLevels // read all of it now, in case no field changes it
	}
	tp, valid := w.indexValid(body, depth)
	if !valid {
		return dst, nil, ErrNotObject
	}
	top, _ := tp.root()
	fs, cur := &p.request, body
	fs.evalTransforms(w, tp, top, in)
	if chat && p.touchesConversation[f] && (guarded || e.prompts != nil) {
		var changed bool
		if w.staged, changed = w.write(w.staged[:0], tp, top, fs, edits{}); changed {
			cur = w.staged
			tp = w.index(cur, allLevels)
			top, _ = tp.root()
		}
		fs = nil
	}
	masked := false
	if guarded {
		if masked, rej, err = p.guardTexts(w, tp, f, remote); rej != nil || err != nil {
			return dst, rej, err
		}
	}
	if masked || e.prompts != nil || fs.changes(w, tp, top) {
		if out, changed := w.write(dst, tp, top, fs, e); changed {
			if members != nil {
				*members = append(*members, w.members...)
			}
			return out, nil, nil
		}
	}
	if members != nil {
		// cur is what goes out, and tp its index.
		it := tp.walk(top)
		for name, v, ok := it.member(); ok; name, v, ok = it.member() {
			*members = append(*members, Member{name.start, name.end, v.start, v.end})
		}
	}
	if &cur[0] == &body[0] {
		return body, nil, nil
	}
	return append(dst, cur...), nil, nil
}

// chatFormat reports a client format that carries a conversation.
func chatFormat(f convert.Format) bool {
	return f == convert.Chat || f == convert.Messages || f == convert.Responses
}

// Final applies finalTransformations to a body already in the provider's
// format (llmRequest is that body), with Request's conventions: a failed
// expression removes its field, the result is appended to dst or is body
// itself when nothing changed; the error is for a body that is not a JSON
// object.
func (p *Policy) Final(dst, body []byte, in *celrules.Input) ([]byte, error) {
	if p.final.empty() {
		return body, nil
	}
	if len(body) > maxBody {
		return dst, errTooLarge
	}
	w := getWork()
	defer putWork(w)
	tp, valid := w.indexValid(body, allLevels)
	if !valid {
		return dst, errFinalNotObject
	}
	top, _ := tp.root()
	p.final.evalTransforms(w, tp, top, in)
	if !p.final.changes(w, tp, top) {
		return body, nil
	}
	out, _ := w.write(dst, tp, top, &p.final, edits{})
	return out, nil
}

// promptText appends the text of a body's system prompt and messages in
// format f to dst, one text after another with a line break between them
// and no JSON escapes: the texts PromptTokens counts, for the tests. It
// reads the texts a guard with the default scope reads (tool calls and
// their results aside). A body that is not valid JSON gives no text that
// means anything, but is read safely.
func promptText(dst, body []byte, f convert.Format) []byte {
	w := getWork()
	defer putWork(w)
	t := &w.texts
	t.reset(w.index(body, allLevels), scopeSystem|scopeMessages)
	t.walk(f)
	return appendSpanTexts(dst, body, t.spans)
}

// appendSpanTexts appends the texts of spans, string tokens of body, to
// dst, one after another with a line break between them and no JSON
// escapes (a token whose escapes do not decode adds nothing).
func appendSpanTexts(dst, body []byte, spans []textSpan) []byte {
	for i, s := range spans {
		if i > 0 {
			dst = append(dst, '\n')
		}
		quoted := body[s.start:s.end]
		if inner := quoted[1 : len(quoted)-1]; !hasBackslash(inner) {
			dst = append(dst, inner...)
			continue
		}
		mark := len(dst)
		var err error
		if dst, err = llm.AppendUnquoted(dst, quoted); err != nil {
			dst = dst[:mark]
		}
	}
	return dst
}

// PromptTokens estimates the prompt tokens of a body in format f, in
// encoding e, by OpenAI's formula as agentgateway's tokenize uses it
// (crates/llm/src/tokenizer.rs): each message (a system prompt is one) takes
// 4 tokens and its text's, and the answer's priming 3 more. A message's
// texts count as one, joined by line breaks. Unlike agentgateway, which
// counts the system prompt and message texts only, the texts of tool
// results and tool-call arguments count too (the strings the guards' tool
// scopes read), and so do the tool definitions, as their JSON text: an
// agent's prompt is often mostly tool output and tool schemas, which the
// provider bills, and a limit that did not see them would let such a
// prompt past its up-front refusal. Each text is counted through
// tokens.CountCached, so that the history a conversation sends again with
// every turn is counted once. scratch holds the texts that had to be
// decoded or joined; it is returned, grown, for reuse.
func PromptTokens(scratch, body []byte, f convert.Format, e tokens.Encoding) (int, []byte) {
	w := getWork()
	defer putWork(w)
	t := &w.texts
	t.reset(w.index(body, allLevels), scopeSystem|scopeMessages|scopeToolOutput|scopeToolInput)
	t.walk(f)
	n := 3 + t.toolDefinitionTokens(f, e)
	for i := 0; i < len(t.spans); {
		j := i + 1
		for j < len(t.spans) && t.spans[j].msg == t.spans[i].msg {
			j++
		}
		var text []byte
		if s := t.spans[i]; j == i+1 && !hasBackslash(body[s.start+1:s.end-1]) {
			text = body[s.start+1 : s.end-1] // one plain text: no copy
		} else {
			scratch = appendSpanTexts(scratch[:0], body, t.spans[i:j])
			text = scratch
		}
		n += 4 + tokens.CountCached(e, text)
		i = j
	}
	return n, scratch
}

// Model reads the body's "model" member: "" when it is absent or not a
// string (Gemini bodies have none). When the body has two, the last one
// counts, as codec/llm's decoder reads it. The string aliases body unless
// the name holds escapes: copy it to keep it longer than body.
func Model(body []byte) string {
	w := getWork()
	defer putWork(w)
	tp := w.index(body, topLevel)
	top, ok := tp.root()
	if !ok || !top.is(body, '{') {
		return ""
	}
	var model tok
	it := tp.walk(top)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if nameIs(body, n, "model") {
			model = v
		}
	}
	if !model.is(body, '"') || model.end-model.start <= 2 {
		return ""
	}
	inner := body[model.start+1 : model.end-1]
	if !hasBackslash(inner) {
		return unsafe.String(&inner[0], len(inner))
	}
	text, err := llm.AppendUnquoted(nil, body[model.start:model.end])
	if err != nil {
		return ""
	}
	return string(text)
}
