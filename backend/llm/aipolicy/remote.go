package aipolicy

import (
	"context"
	"errors"
	"strings"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/codec/llm"
)

// This file runs the remote guards (backend/llm/guardrail) among the regex
// ones: it turns the texts the guards before left into the Messages a
// remote guard judges (one per message, or one per text of its scope, as
// its Unit says) and writes a mask's replacements back into those texts.

// RemoteInput is what the remote guards of one exchange need from the
// server, and what they did.
type RemoteInput struct {
	// Ctx bounds the calls (its deadline; nil: context.Background).
	Ctx context.Context
	// Input is what a webhook reads of the exchange. For a request, when a
	// guard needs LLMRequest and it is nil, it is decoded from the body the
	// guard judges.
	Input guardrail.Input
	// Masked and FailedOpen report that a remote guard masked a text, or
	// failed and let the exchange pass (a webhook's failOpen).
	Masked, FailedOpen bool
}

func (r *RemoteInput) ctx() context.Context {
	if r == nil || r.Ctx == nil {
		return context.Background()
	}
	return r.Ctx
}

// GuardError is a remote guard that could not judge (a cloud guard's
// failure: the server answers 503, as agentgateway does).
type GuardError struct{ Err error }

func (e *GuardError) Error() string { return "prompt guard unavailable: " + e.Err.Error() }
func (e *GuardError) Unwrap() error { return e.Err }

// HasRemoteRequestGuards reports whether a request guard is remote: the
// server then passes a RemoteInput (and runs Request once per client
// request, not per attempt).
func (p *Policy) HasRemoteRequestGuards() bool { return p.remoteRequest }

// HasRemoteResponseGuards reports whether Response has guards to run.
func (p *Policy) HasRemoteResponseGuards() bool { return len(p.remoteResponse) > 0 }

// GuardsStreams reports promptGuard.streaming: Enabled.
func (p *Policy) GuardsStreams() bool { return p.streaming }

// RemoteResponseGuards are the remote response guards in order (for
// guarding streams).
func (p *Policy) RemoteResponseGuards() []*guardrail.Guard { return p.remoteResponse }

// Close closes the idle connections of the pools the remote guards keep
// themselves (a policy compiled without guardrail.Options.Pool).
func (p *Policy) Close() {
	for _, g := range p.guards {
		if g.remote != nil {
			g.remote.Close()
		}
	}
	for _, g := range p.remoteResponse {
		g.Close()
	}
}

// askRemote asks g about the texts of its scope in w.texts, as the guards
// before it left them, and applies its verdict: a mask rewrites the texts
// (masked reports it), a reject gives the rejection, a cloud guard's
// failure a *GuardError.
func (w *work) askRemote(g *guardrail.Guard, sc scope, remote *RemoteInput) (masked bool, rej *Rejection, err error) {
	if remote == nil {
		remote = &RemoteInput{}
	}
	if g.NeedsLLMRequest() && remote.Input.LLMRequest == nil && w.texts.tp != nil {
		if top, ok := w.texts.tp.root(); ok && top.is(w.texts.d, '{') {
			remote.Input.LLMRequest = decodeObject(w.texts.tp, top)
		}
	}
	msgs := w.guardMessages(sc, g.Unit())
	v, err := g.Check(remote.ctx(), msgs, &remote.Input)
	if err != nil {
		return false, nil, &GuardError{Err: err}
	}
	if v.Failed && v.Action == guardrail.Pass {
		remote.FailedOpen = true
	}
	switch v.Action {
	case guardrail.Reject:
		return false, &Rejection{remote: v.Rejection}, nil
	case guardrail.Mask:
		if len(v.Messages) != len(msgs) {
			return false, nil, &GuardError{Err: errors.New(g.Kind() + " guard: a mask of another number of texts")}
		}
		if w.replaceMessages(sc, g.Unit(), v.Messages) {
			remote.Masked = true
			return true, nil, nil
		}
	}
	return false, nil, nil
}

// guardMessages makes the Messages of the texts in scope sc: one per text
// (PerText) or one per message, its texts joined with a space as
// agentgateway's get_messages joins text parts (PerMessage).
func (w *work) guardMessages(sc scope, unit guardrail.Unit) []guardrail.Message {
	var msgs []guardrail.Message
	var b strings.Builder
	last := int32(-1)
	flush := func(role string) {
		msgs = append(msgs, guardrail.Message{Role: role, Content: b.String()})
		b.Reset()
	}
	role := ""
	spans := w.texts.spans
	for i := range spans {
		s := &spans[i]
		if s.scope&sc == 0 {
			continue
		}
		text := w.spanText(w.texts.d, s)
		if unit == guardrail.PerText {
			msgs = append(msgs, guardrail.Message{Role: s.role, Content: string(text)})
			continue
		}
		if s.msg != last {
			if last >= 0 {
				flush(role)
			}
			last, role = s.msg, s.role
		} else {
			b.WriteByte(' ')
		}
		b.Write(text)
	}
	if unit == guardrail.PerMessage && last >= 0 {
		flush(role)
	}
	return msgs
}

// replaceMessages writes a mask's replacements into the texts guardMessages
// read (same scope and unit, so the same order): a text takes its
// replacement; a message of several texts whose joined text changed takes
// the replacement whole in its first text and empties the others
// (agentgateway collapses them into one). It reports whether any text
// changed.
func (w *work) replaceMessages(sc scope, unit guardrail.Unit, repl []guardrail.Message) bool {
	spans := w.texts.spans
	changed := false
	mi := -1
	for i := 0; i < len(spans); i++ {
		if spans[i].scope&sc == 0 {
			continue
		}
		mi++
		if unit == guardrail.PerText {
			changed = w.setText(&spans[i], repl[mi].Content) || changed
			continue
		}
		// The message's texts in scope: i and the ones after it of the
		// same message.
		end := i + 1
		for end < len(spans) && spans[end].msg == spans[i].msg {
			end++
		}
		if w.joined(sc, i, end) != repl[mi].Content {
			first := true
			for j := i; j < end; j++ {
				if spans[j].scope&sc == 0 {
					continue
				}
				text := ""
				if first {
					text, first = repl[mi].Content, false
				}
				changed = w.setText(&spans[j], text) || changed
			}
		}
		i = end - 1
	}
	return changed
}

// joined is the text of spans[from:to] in scope sc, joined as
// guardMessages joins them.
func (w *work) joined(sc scope, from, to int) string {
	var b strings.Builder
	for j := from; j < to; j++ {
		s := &w.texts.spans[j]
		if s.scope&sc == 0 {
			continue
		}
		if j > from {
			b.WriteByte(' ')
		}
		b.Write(w.spanText(w.texts.d, s))
	}
	return b.String()
}

// setText replaces s's text with text, reporting whether it changed.
func (w *work) setText(s *textSpan, text string) bool {
	if string(w.spanText(w.texts.d, s)) == text {
		return false
	}
	start := len(w.arena)
	w.arena = append(w.arena, text...)
	s.off, s.n, s.own, s.masked, s.escape = start, len(w.arena)-start, true, true, true
	return true
}

// Response runs the remote response guards in order on a whole answer in
// the client's format f (after translation): one Message per choice, role
// "assistant" (PerMessage), or one per text (PerText). A mask rewrites the
// answer's texts (appended to dst; body itself when nothing changed), a
// reject gives the rejection, a cloud guard's failure a *GuardError. A body
// that is not a JSON object is returned as it is.
func (p *Policy) Response(dst, body []byte, f convert.Format, remote *RemoteInput) (out []byte, rej *Rejection, err error) {
	if len(p.remoteResponse) == 0 || len(body) > maxBody || !llm.ValidObject(body) {
		return body, nil, nil
	}
	w := getWork()
	defer putWork(w)
	tp := w.index(body, allLevels)
	t := &w.texts
	t.reset(tp, scopeMessages)
	t.answer(f)
	w.arena = w.arena[:0]
	if remote == nil {
		remote = &RemoteInput{}
	}
	masked := false
	for _, g := range p.remoteResponse {
		m, rej, err := w.askRemote(g, scopeMessages, remote)
		if rej != nil || err != nil {
			return dst, rej, err
		}
		masked = masked || m
	}
	if !masked {
		return body, nil, nil
	}
	top, _ := tp.root()
	out, _ = w.write(dst, tp, top, nil, edits{})
	return out, nil, nil
}

// answer collects the texts of an answer in format f, each choice one
// message of role "assistant": Chat's choices[].message.content, Messages'
// text blocks, Responses' output messages (output_text and refusal parts).
func (t *texts) answer(f convert.Format) {
	top, ok := t.tp.root()
	if !ok || !top.is(t.d, '{') {
		return
	}
	it := t.tp.walk(top)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		switch {
		case f == convert.Chat && t.key(n) == "choices" && v.is(t.d, '['):
			choices := t.tp.walk(v)
			for c, ok := choices.element(); ok; c, ok = choices.element() {
				if c.is(t.d, '{') {
					t.message("assistant")
					t.addAt(c, "message", "content", scopeMessages)
				}
			}
		case f == convert.Messages && t.key(n) == "content":
			t.message("assistant")
			t.textOrParts(v, scopeMessages, isTextBlock)
		case f == convert.Responses && t.key(n) == "output" && v.is(t.d, '['):
			t.message("assistant")
			items := t.tp.walk(v)
			for item, ok := items.element(); ok; item, ok = items.element() {
				if item.is(t.d, '{') {
					t.outputMessage(item)
				}
			}
		}
	}
}

// outputMessage reads a Responses output item of type "message".
func (t *texts) outputMessage(item tok) {
	isMessage := false
	it := t.tp.walk(item)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) == "type" && t.key(v) == "message" {
			isMessage = true
		}
	}
	if !isMessage {
		return
	}
	it = t.tp.walk(item)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) != "content" || !v.is(t.d, '[') {
			continue
		}
		parts := t.tp.walk(v)
		for p, ok := parts.element(); ok; p, ok = parts.element() {
			if p.is(t.d, '{') {
				t.responsesPart(p, scopeMessages)
			}
		}
	}
}

// LLMRequest decodes a JSON object as webhook header expressions read it
// (llmRequest), numbers as CEL's llmRequest has them; an error for a body
// that is not one JSON object.
func LLMRequest(body []byte) (map[string]any, error) {
	if len(body) > maxBody || !llm.ValidObject(body) {
		return nil, ErrNotObject
	}
	w := getWork()
	defer putWork(w)
	tp := w.index(body, allLevels)
	top, _ := tp.root()
	return decodeObject(tp, top), nil
}
