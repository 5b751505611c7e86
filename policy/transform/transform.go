// Package transform owns the transformations policy: request headers and
// body set, added, removed or replaced by CEL before the request is
// forwarded, and response headers, status and body after the answer comes
// back.
package transform

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// Options are what the policy takes from the server.
type Options struct {
	// MaxBuffer bounds a body read whole for request.body or
	// response.body (frontendPolicies.http.maxBufferSize); 0 is 2 MiB.
	MaxBuffer int
	// Logger tells of responses answered 502 because their body could
	// not be read; nil logs nothing.
	Logger *zap.Logger
	// RawPaths keeps a :path as computed, as request paths are kept
	// (frontendPolicies.http.pathNormalization: raw); by default it is
	// normalized as they are (policy.NormalizeTarget).
	RawPaths bool
}

// Transformations is the compiled policy; immutable and safe for
// concurrent use.
type Transformations struct {
	request, response *edits
	maxBuffer         int
	log               *zap.Logger
	rawPaths          bool
	// readsRequest: an expression (of either direction) reads
	// request.body, so the request's body is read whole before the
	// request's edits.
	readsRequest bool
}

// edits is one direction's compiled Transform.
type edits struct {
	replace  cel.Program
	set, add []headerExpr // sorted by name
	remove   []string
	body     cel.Program  // nil: the body is left alone
	metadata []headerExpr // sorted by name: values for CEL's metadata
	// readsResponse: an expression of the response's edits reads
	// response.body, so the response's body is read whole first.
	readsResponse bool
}

type headerExpr struct {
	name string
	prog cel.Program
}

// New compiles the policy with default Options.
func New(cfg *config.Transformations) (*Transformations, error) {
	return NewWith(cfg, Options{})
}

// NewWith compiles the policy. Errors are *policy.FieldError naming the
// field below transformations.
func NewWith(cfg *config.Transformations, o Options) (*Transformations, error) {
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = 2 << 20
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	out := &Transformations{maxBuffer: o.MaxBuffer, log: o.Logger, rawPaths: o.RawPaths}
	var err error
	if out.request, err = out.compile("request", cfg.Request); err != nil {
		return nil, err
	}
	if out.response, err = out.compile("response", cfg.Response); err != nil {
		return nil, err
	}
	return out, nil
}

func (out *Transformations) compile(field string, t *config.Transform) (*edits, error) {
	if t == nil {
		return nil, nil
	}
	e := &edits{remove: t.Remove}
	// prog compiles one expression and notes which bodies it reads.
	prog := func(name string, expr config.CELExpression) (cel.Program, error) {
		p, ast, err := config.CompileLLMExpressionAst(string(expr))
		if err != nil {
			return nil, &policy.FieldError{Field: field + "." + name, Msg: err.Error()}
		}
		if celrules.ReadsBody(ast, "request") {
			out.readsRequest = true
		}
		if field == "response" && celrules.ReadsBody(ast, "response") {
			e.readsResponse = true
		}
		return p, nil
	}
	var err error
	if t.Replace != nil {
		if e.replace, err = prog("replace", *t.Replace); err != nil {
			return nil, err
		}
	}
	if t.Body != nil {
		if e.body, err = prog("body", *t.Body); err != nil {
			return nil, err
		}
	}
	for _, m := range []struct {
		name string
		src  map[string]config.CELExpression
		dst  *[]headerExpr
	}{{"set", t.Set, &e.set}, {"add", t.Add, &e.add}, {"metadata", t.Metadata, &e.metadata}} {
		for name, expr := range m.src {
			p, err := prog(m.name+"."+name, expr)
			if err != nil {
				return nil, err
			}
			key := name
			if m.name != "metadata" {
				key = strings.ToLower(name)
			}
			*m.dst = append(*m.dst, headerExpr{name: key, prog: p})
		}
		sort.Slice(*m.dst, func(i, j int) bool { return (*m.dst)[i].name < (*m.dst)[j].name })
	}
	return e, nil
}

// ReadsRequestBody reports whether the policy reads the request's body
// (policy.BodyReader): an expression reads request.body, or the request's
// body is replaced. Either way the policy must run once the body is
// there (after 100 Continue), so that the client's body does not arrive
// after it and take the replacement's place.
func (t *Transformations) ReadsRequestBody() bool {
	return t.readsRequest || t.request != nil && t.request.body != nil
}

// headers is what an edit changes: a request's or a response's headers,
// their pseudo-headers, and its body.
type headers interface {
	Set(key, value string)
	Add(key, value string)
	Del(key string)
	reset()
	pseudo(name, value string) bool
	// setBody replaces the body (and its Content-Length).
	setBody(b []byte)
}

// OnRequest reads the request's body when an expression reads it, then
// edits the request's headers and body. A body larger than maxBufferSize
// is answered 413 (one the client failed to send, 400 or 408).
func (t *Transformations) OnRequest(c *policy.Ctx) policy.Result {
	if t.readsRequest {
		if _, err := policy.ReadRequestBody(c, t.maxBuffer); err != nil {
			policy.RespondRequestBodyError(c, err)
			return policy.Done
		}
	}
	if t.request != nil {
		in := celrules.LiveInput(c)
		t.request.apply(c, &in, requestHeaders{c: c, rawPaths: t.rawPaths})
	}
	return policy.Continue
}

var (
	contentTypeText  = []byte("text/plain; charset=utf-8")
	bodyUnreadable   = []byte("response body could not be read for transformation\n")
	bodyTooLargeResp = []byte("response body too large for transformation\n")
)

// OnResponse reads the response's body when an expression reads it, then
// edits the response's headers, status and body. A body that cannot be
// read whole (larger than maxBufferSize, or cut off by the upstream) is
// answered 502, untransformed: passing it on unchanged could pass what
// the transformation is there to rewrite.
func (t *Transformations) OnResponse(c *policy.Ctx) {
	e := t.response
	if e == nil {
		return
	}
	if t.readsRequest && !c.RequestBodyRead {
		// The request never got through the request phase (its body was
		// refused, here or by a policy before): its answer is the
		// gateway's, left alone, as agentgateway leaves the answers to
		// requests refused before their transformation.
		return
	}
	if e.readsResponse {
		if _, err := policy.ReadResponseBody(c, t.maxBuffer); err != nil {
			t.log.Warn("transformations: the response body could not be read whole; answering 502", zap.Error(err))
			resp := &c.Fast.Response
			resp.Reset() // closes the stream read in part, and its connection
			resp.SetStatusCode(502)
			resp.Header.SetContentTypeBytes(contentTypeText)
			if err == policy.ErrBodyTooLarge {
				resp.SetBody(bodyTooLargeResp)
			} else {
				resp.SetBody(bodyUnreadable)
			}
			return
		}
	}
	in := celrules.LiveInput(c)
	e.apply(c, &in, responseHeaders{c})
}

func (e *edits) apply(c *policy.Ctx, in *celrules.Input, h headers) {
	// Metadata first, so the edits' expressions (and every later one)
	// see it as `metadata`; a value that fails to evaluate is left out.
	for _, m := range e.metadata {
		v, err := celrules.EvalLLM(m.prog, in, nil)
		if err != nil {
			continue
		}
		if c.Metadata == nil {
			c.Metadata = make(map[string]any, len(e.metadata))
		}
		c.Metadata[m.name] = celrules.JSONValue(v)
		in.Metadata = c.Metadata
	}
	// Every expression sees the message as it came: all are evaluated
	// before any edit.
	var body []byte
	if e.body != nil {
		body = evalBody(e.body, in)
	}
	var replaced map[string][]string
	if e.replace != nil {
		if v, err := celrules.EvalLLM(e.replace, in, nil); err == nil {
			replaced, _ = toHeaderMap(v)
		}
	}
	sets := make([][]string, len(e.set))
	for i, s := range e.set {
		sets[i], _ = eval(s.prog, in)
	}
	adds := make([][]string, len(e.add))
	for i, a := range e.add {
		adds[i], _ = eval(a.prog, in)
	}
	if replaced != nil {
		h.reset()
		names := make([]string, 0, len(replaced))
		for name := range replaced {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			// The framing and hop-by-hop fields are the gateway's to
			// write from the body it sends and the connections it keeps,
			// as in an external service's edits (policy.ReservedHeader):
			// a Content-Length from here would frame the message wrong.
			if strings.HasPrefix(name, ":") || !policy.ValidHeaderName(name) || policy.ReservedHeader(name) {
				continue
			}
			for _, value := range replaced[name] {
				if policy.ValidHeaderValue(value) {
					h.Add(name, value)
				}
			}
		}
	}
	// agentgateway's order is adds, then sets (a name both added and set
	// keeps the set's value alone), then removes; an expression that fails
	// (or gives no value) removes its header rather than leave the one the
	// client sent: with `set: {x-user: jwt.sub}` and no token, a forged
	// x-user must not reach the backend (agentgateway sanitizes so too).
	// The same outcome, with every deletion first: fasthttp's Del fills a
	// hole with the last line, which would move lines added before it.
	gone := func(name string) bool {
		for _, r := range e.remove {
			if strings.EqualFold(r, name) {
				return true
			}
		}
		for i, s := range e.set {
			if len(sets[i]) == 0 && strings.EqualFold(s.name, name) {
				return true // a failed set removes what an add gave it
			}
		}
		return false
	}
	for _, name := range e.remove {
		h.Del(name)
	}
	for i, a := range e.add {
		if len(adds[i]) == 0 && !strings.HasPrefix(a.name, ":") {
			h.Del(a.name)
		}
	}
	for i, s := range e.set {
		if len(sets[i]) == 0 && !strings.HasPrefix(s.name, ":") {
			h.Del(s.name)
		}
	}
	for i, a := range e.add {
		if gone(a.name) {
			continue
		}
		for _, v := range adds[i] {
			h.Add(a.name, v)
		}
	}
	// A set replaces every value of its name; a list's further values are
	// added once every set has replaced its name, so that the deletion a
	// duplicated name needs cannot move them (see policy.SetRequestHeader).
	for i, s := range e.set {
		values := sets[i]
		switch {
		case len(values) == 0 || gone(s.name):
		case strings.HasPrefix(s.name, ":"):
			h.pseudo(s.name, values[0])
		default:
			h.Set(s.name, values[0])
		}
	}
	for i, s := range e.set {
		if len(sets[i]) > 1 && !strings.HasPrefix(s.name, ":") && !gone(s.name) {
			for _, v := range sets[i][1:] {
				h.Add(s.name, v)
			}
		}
	}
	if e.body != nil {
		h.setBody(body)
	}
}

// evalBody evaluates a body: a string or bytes as they are, anything else
// as JSON (agentgateway's value_as_byte_or_json). A failing expression,
// or a value with no JSON form, gives an empty body, as in agentgateway.
// The result is the policy's own (never a buffer of the message it may
// have been read from).
func evalBody(p cel.Program, in *celrules.Input) []byte {
	v, err := celrules.EvalLLM(p, in, nil)
	if err != nil {
		return []byte{}
	}
	switch x := v.Value().(type) {
	case string:
		return []byte(x)
	case []byte:
		return bytes.Clone(x)
	}
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return []byte{}
	}
	out, err := json.Marshal(native.(*structpb.Value).AsInterface())
	if err != nil {
		return []byte{}
	}
	return out
}

// eval evaluates a header value: a string, a number or a bool as text, a
// list as one value per item, anything else as JSON. A value a header
// cannot hold (a control character) fails.
func eval(p cel.Program, in *celrules.Input) ([]string, bool) {
	v, err := celrules.EvalLLM(p, in, nil)
	if err != nil {
		return nil, false
	}
	var out []string
	switch v.Value().(type) {
	case string, []byte, bool, int64, uint64, float64:
		out = append(out, celrules.Text(v))
	default:
		native := celrules.JSONValue(v)
		if list, ok := native.([]any); ok {
			for _, item := range list {
				out = append(out, celrules.NativeText(item, nil))
			}
		} else {
			out = append(out, celrules.NativeText(native, nil))
		}
	}
	for _, s := range out {
		if !policy.ValidHeaderValue(s) {
			return nil, false
		}
	}
	return out, true
}

// toHeaderMap reads replace's result: names to a value or a list.
func toHeaderMap(v ref.Val) (map[string][]string, bool) {
	m, ok := celrules.JSONValue(v).(map[string]any)
	if !ok {
		return nil, false
	}
	out := map[string][]string{}
	for k, val := range m {
		switch x := val.(type) {
		case []any:
			for _, item := range x {
				out[k] = append(out[k], celrules.NativeText(item, nil))
			}
		default:
			out[k] = append(out[k], celrules.NativeText(x, nil))
		}
	}
	return out, true
}

var (
	_ policy.Request  = (*Transformations)(nil)
	_ policy.Response = (*Transformations)(nil)
)
