package guardrail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy/celrules"
)

// webhook is agentgateway's guardrail webhook: the texts are POSTed to
// /request ({"body":{"messages":[...]}}) or /response
// ({"body":{"choices":[{"message":...}]}}), and the answer's action
// passes, masks (the texts again, changed) or rejects (a status and body).
type webhook struct {
	svc     *service
	phase   phase
	path    string
	forward []forwardMatch
	headers []celHeader // sorted by name
}

// forwardMatch is one of forwardHeaderMatches: the client's header name
// (every value is forwarded when one matches value).
type forwardMatch struct {
	name  []byte
	exact *string
	re    *regexp.Regexp // anchored
}

// celHeader is one of headers: a header, or the :path, :method or
// :authority of the call, computed by CEL.
type celHeader struct {
	name string // canonical; ":path", ":method", ":authority" for pseudo-headers
	prog cel.Program
}

// Webhook paths (agentgateway's REQUEST_PATH and RESPONSE_PATH).
const (
	webhookPromptPath = "/request"
	webhookAnswerPath = "/response"
)

func (g *Guard) compileWebhook(c *config.WebhookGuard, ph phase, opts *Options) error {
	g.kind, g.unit, g.callsOnEmpty, g.hasFailureMode = "webhook", PerMessage, true, true
	g.failOpen = c.FailureMode == "failOpen"
	addr := c.Target.Host
	if c.Target.Backend != "" {
		var ok bool
		if opts.ResolveBackend != nil {
			addr, ok = opts.ResolveBackend(c.Target.Backend)
		}
		if !ok {
			return fieldError("webhook.target.backend", "no backend named "+strconv.Quote(c.Target.Backend)+" that a webhook can call (a top-level host backend)")
		}
	}
	if addr == "" {
		return fieldError("webhook.target", "a host or a backend is required")
	}
	svc, err := newService(serviceTarget{addr: addr, host: addr}, nil, "webhook", opts)
	if err != nil {
		return err
	}
	w := &webhook{svc: svc, phase: ph, path: webhookPromptPath}
	if ph == answerPhase {
		w.path = webhookAnswerPath
	}
	for i, m := range c.ForwardHeaderMatches {
		fm, err := compileForward(m)
		if err != nil {
			err.Path = "webhook.forwardHeaderMatches[" + strconv.Itoa(i) + "]." + err.Path
			return err
		}
		w.forward = append(w.forward, fm)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		h, readsLLM, err := compileCELHeader(name, string(c.Headers[name]))
		if err != nil {
			return fieldError(decode.JoinKey("webhook.headers", name), err.Error())
		}
		// Answers' expressions see no llmRequest, as in agentgateway.
		g.needsLLM = g.needsLLM || readsLLM && ph == promptPhase
		w.headers = append(w.headers, h)
	}
	g.checker = w
	g.services = append(g.services, svc)
	return nil
}

// unforwardable are headers a webhook call cannot carry from the client:
// they frame the message or belong to one connection, or the call sets
// them itself.
var unforwardable = []string{"content-length", "transfer-encoding", "connection", "keep-alive",
	"proxy-connection", "upgrade", "te", "trailer", "content-type"}

// compileForward compiles a header match; an error's path is relative to
// the match.
func compileForward(m config.ValueMatch) (forwardMatch, *decode.FieldError) {
	name := strings.ToLower(m.Name)
	if strings.HasPrefix(name, ":") {
		return forwardMatch{}, fieldError("name", "a pseudo-header cannot be forwarded (agentgateway skips it)")
	}
	if slices.Contains(unforwardable, name) {
		return forwardMatch{}, fieldError("name", "header "+strconv.Quote(m.Name)+" cannot be forwarded: the call sets it, or it belongs to one connection")
	}
	fm := forwardMatch{name: []byte(name), exact: m.Value.Exact}
	switch {
	case m.Value.Regex != nil:
		re, err := regexp.Compile(`\A(?:` + m.Value.Regex.String() + `)\z`)
		if err != nil {
			return forwardMatch{}, fieldError("value.regex", err.Error())
		}
		fm.re = re
	case m.Value.Exact == nil:
		return forwardMatch{}, fieldError("value", "exact or regex is required")
	}
	return fm, nil
}

// compileCELHeader compiles a header expression and reports whether it
// reads llmRequest.
func compileCELHeader(name, expr string) (celHeader, bool, error) {
	lower := strings.ToLower(name)
	switch lower {
	case ":path", ":method", ":authority":
		name = lower
	case ":scheme", ":status":
		return celHeader{}, false, errors.New("only :path, :method and :authority can be set on a webhook call")
	}
	prog, err := config.CompileLLMExpression(expr)
	if err != nil {
		return celHeader{}, false, err
	}
	readsLLM, err := readsLLMRequest(expr)
	if err != nil {
		return celHeader{}, false, err
	}
	return celHeader{name: name, prog: prog}, readsLLM, nil
}

// readsLLMRequest reports whether a checked expression refers to the
// llmRequest variable.
func readsLLMRequest(expr string) (bool, error) {
	env, err := config.LLMCELEnv()
	if err != nil {
		return false, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return false, iss.Err()
	}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == "llmRequest" {
			return true, nil
		}
	}
	return false, nil
}

func (w *webhook) check(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	c := newCall(w.path)
	defer c.release()
	c.body = appendWebhookBody(c.body[:0], w.phase, msgs)
	w.svc.prepare(c)
	w.forwardHeaders(&c.req.Header, in.Header)
	w.setHeaders(c.req, in)
	answer, err := w.svc.send(ctx, c, in)
	if err != nil {
		return Verdict{}, err
	}
	return decodeWebhookAnswer(answer, w.phase, len(msgs))
}

// appendWebhookBody appends the call's body: the messages of a prompt, or
// one choice per text of an answer.
func appendWebhookBody(dst []byte, ph phase, msgs []Message) []byte {
	if ph == promptPhase {
		dst = append(dst, `{"body":{"messages":[`...)
	} else {
		dst = append(dst, `{"body":{"choices":[`...)
	}
	for i := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if ph == answerPhase {
			dst = append(dst, `{"message":`...)
		}
		dst = appendMessage(dst, &msgs[i])
		if ph == answerPhase {
			dst = append(dst, '}')
		}
	}
	return append(dst, "]}}"...)
}

func appendMessage(dst []byte, m *Message) []byte {
	dst = append(dst, `{"role":`...)
	dst = llm.AppendString(dst, m.Role)
	dst = append(dst, `,"content":`...)
	dst = llm.AppendString(dst, m.Content)
	return append(dst, '}')
}

// forwardHeaders copies the client's headers that forwardHeaderMatches
// select: all the values of a header one of whose values matches.
func (w *webhook) forwardHeaders(dst *fasthttp.RequestHeader, src Headers) {
	if len(w.forward) == 0 || src == nil {
		return
	}
	var done [][]byte
	for i := range w.forward {
		m := &w.forward[i]
		if slices.ContainsFunc(done, func(n []byte) bool { return bytes.Equal(n, m.name) }) || !m.matchesAny(src) {
			continue
		}
		done = append(done, m.name)
		dst.DelBytes(m.name)
		for k, v := range src.All() {
			if equalFold(k, m.name) {
				dst.AddBytesKV(k, v)
			}
		}
	}
}

func (m *forwardMatch) matchesAny(src Headers) bool {
	for k, v := range src.All() {
		if !equalFold(k, m.name) {
			continue
		}
		if m.re != nil && m.re.Match(v) || m.exact != nil && string(v) == *m.exact {
			return true
		}
	}
	return false
}

// setHeaders evaluates the header expressions against the client's
// request and sets their values; a header whose expression fails or gives
// no string is removed (so that a failure cannot leave a forwarded value
// in its place), a pseudo-header is then left as it is.
func (w *webhook) setHeaders(req *fasthttp.Request, in *Input) {
	var llmRequest map[string]any
	if w.phase == promptPhase {
		llmRequest = in.LLMRequest
	}
	for i := range w.headers {
		h := &w.headers[i]
		value, ok := evalHeader(h.prog, in.Request, llmRequest)
		switch h.name {
		case ":path":
			if ok && validPath(value) {
				req.SetRequestURIBytes(value)
			}
		case ":method":
			if ok && validToken(value) {
				req.Header.SetMethodBytes(value)
			}
		case ":authority":
			if ok && validAuthority(value) {
				req.Header.SetHostBytes(value)
			}
		default:
			if ok && strings.EqualFold(h.name, "host") {
				if validAuthority(value) {
					req.Header.SetHostBytes(value)
				}
				continue
			}
			req.Header.Del(h.name)
			if ok && validFieldValue(value) {
				req.Header.SetBytesV(h.name, value)
			}
		}
	}
}

// evalHeader evaluates a header expression: a string or bytes result is
// the value; anything else is none.
func evalHeader(p cel.Program, in *celrules.Input, llmRequest map[string]any) ([]byte, bool) {
	v, err := celrules.EvalLLM(p, in, llmRequest)
	if err != nil {
		return nil, false
	}
	switch x := v.Value().(type) {
	case string:
		return []byte(x), true
	case []byte:
		return x, true
	}
	return nil, false
}

// webhookAction is the "action" of an answer: agentgateway's untagged
// Mask | Reject | Pass.
type webhookAction struct {
	Body       json.RawMessage `json:"body"`
	StatusCode json.RawMessage `json:"status_code"`
	Reason     *string         `json:"reason"`
}

// maxReason bounds the reason kept from an answer.
const maxReason = 256

// decodeWebhookAnswer decides from a webhook's answer to sent messages.
//
// agentgateway reads the action as the first of Mask ({body: {messages}}
// or {body: {choices}}, reason), Reject ({body: "text", status_code},
// reason) and Pass ({reason}) that fits, and any object fits Pass. Here an
// action with a body or status_code that fits neither Mask nor Reject is
// an invalid answer (so the failure mode decides, not a silent pass); a
// mask must give back as many texts as were sent, and a rejection's status
// must be 200 to 599.
func decodeWebhookAnswer(body []byte, ph phase, sent int) (Verdict, error) {
	var answer struct {
		Action json.RawMessage `json:"action"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return Verdict{}, errors.New("invalid answer: " + err.Error())
	}
	if len(answer.Action) == 0 || answer.Action[0] != '{' {
		return Verdict{}, errors.New("invalid answer: no action object")
	}
	var a webhookAction
	if err := json.Unmarshal(answer.Action, &a); err != nil {
		return Verdict{}, errors.New("invalid answer: " + err.Error())
	}
	reason := ""
	if a.Reason != nil {
		reason = truncate(*a.Reason, maxReason)
	}
	switch first(a.Body) {
	case 0, 'n': // absent or null
		if len(a.StatusCode) > 0 && !isNull(a.StatusCode) {
			return Verdict{}, errors.New("invalid answer: a status_code without a rejection body")
		}
		return Verdict{Action: Pass, Reason: reason}, nil
	case '{':
		msgs, err := decodeMaskBody(a.Body, ph)
		if err != nil {
			return Verdict{}, err
		}
		if len(msgs) != sent {
			return Verdict{}, errors.New("invalid answer: the mask has " + strconv.Itoa(len(msgs)) + " texts for the " + strconv.Itoa(sent) + " sent")
		}
		return Verdict{Action: Mask, Messages: msgs, Reason: reason}, nil
	case '"':
		var text string
		var status int
		if json.Unmarshal(a.Body, &text) != nil || json.Unmarshal(a.StatusCode, &status) != nil || status < 200 || status > 599 {
			return Verdict{}, errors.New("invalid answer: a rejection needs a body text and a status_code from 200 to 599")
		}
		return Verdict{Action: Reject, Rejection: &Rejection{Status: status, Body: []byte(text)}, Reason: reason}, nil
	}
	return Verdict{}, errors.New("invalid answer: the action's body is neither a mask nor a rejection")
}

// decodeMaskBody reads a mask's texts: {messages: [...]} for a prompt,
// {choices: [{message}]} for an answer.
func decodeMaskBody(raw json.RawMessage, ph phase) ([]Message, error) {
	var body struct {
		Messages []wireMessage `json:"messages"`
		Choices  []struct {
			Message *wireMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, errors.New("invalid mask: " + err.Error())
	}
	var out []Message
	switch {
	case ph == promptPhase && body.Messages != nil:
		out = make([]Message, len(body.Messages))
		for i, m := range body.Messages {
			if m.Role == nil || m.Content == nil {
				return nil, errors.New("invalid mask: a message needs a role and a content")
			}
			out[i] = Message{Role: *m.Role, Content: *m.Content}
		}
	case ph == answerPhase && body.Choices != nil:
		out = make([]Message, len(body.Choices))
		for i, c := range body.Choices {
			if c.Message == nil || c.Message.Role == nil || c.Message.Content == nil {
				return nil, errors.New("invalid mask: a choice needs a message with a role and a content")
			}
			out[i] = Message{Role: *c.Message.Role, Content: *c.Message.Content}
		}
	case ph == promptPhase:
		return nil, errors.New("invalid mask: a prompt's mask needs messages")
	default:
		return nil, errors.New("invalid mask: an answer's mask needs choices")
	}
	return out, nil
}

// wireMessage is agentgateway's SimpleChatCompletionMessage.
type wireMessage struct {
	Role    *string `json:"role"`
	Content *string `json:"content"`
}

// first is the first byte of a raw JSON value (0 when absent).
func first(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func isNull(raw json.RawMessage) bool { return first(raw) == 'n' }

var _ checker = (*webhook)(nil)
