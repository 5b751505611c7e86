package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/bytedance/sonic"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/server/router"
)

// This file picks the model of an llm section request, as agentgateway's
// ModelRouter does: a virtual model of the name asked for, else the first
// model (most specific name first) whose name matches, whose header matches
// hold and whose authorization allows the request. It also answers the
// model list and the router's own errors, in agentgateway's shape.

// llmPickFailure says why no model was picked.
type llmPickFailure uint8

const (
	pickedOK llmPickFailure = iota
	// pickedNotFound: no model's name and header matches fit.
	pickedNotFound
	// pickedDenied: some fit, and the authorization of each refused.
	pickedDenied
	// pickedNoCondition: no condition of a conditional virtual model held.
	pickedNoCondition
	// pickedTargetNotFound: the virtual model's choice fits no model.
	pickedTargetNotFound
	// pickedBadBody: a conditional virtual model could not read the body.
	pickedBadBody
)

// llmSelection is what serves a request: the target, the backend whose
// requestHeaders it gets (nil: the section's), and the model (nil for a
// failover virtual model, whose answering provider names it).
type llmSelection struct {
	target  *llmTarget
	backend *routeBackend
	model   *llmModelEntry
	failure llmPickFailure
	virtual *llmVirtual // the virtual model asked for, for its errors
	chose   string      // the model the virtual model chose
}

// lazyInput is the request as authorization rules see it, built on first
// use: requests to models without authorization never build it.
type lazyInput struct{ in *celrules.Input }

func (l *lazyInput) get(pc *policy.Ctx) *celrules.Input {
	if l.in == nil {
		v := celrules.LiveInput(pc)
		l.in = &v
	}
	return l.in
}

// pick finds what serves a request for the model name: a virtual model of
// that name, else a public model. body is the client's request, which
// conditional virtual models read.
func (m *llmModels) pick(name string, pc *policy.Ctx, body []byte) llmSelection {
	var in lazyInput
	if v := m.virtual[name]; v != nil {
		return m.pickVirtual(v, pc, body, &in)
	}
	return m.resolve(name, false, pc, &in)
}

// resolve finds the first model (public ones only unless internal) whose
// name matches, whose header matches hold and whose authorization allows
// the request, most specific name first: the entries of the exact name,
// then the patterns. It allocates nothing unless a candidate has
// authorization.
func (m *llmModels) resolve(name string, internal bool, pc *policy.Ctx, in *lazyInput) llmSelection {
	fitted := false
	for _, list := range [2][]*llmModelEntry{m.exact[name], m.patterns} {
		for _, e := range list {
			if !internal && !e.public || !config.MatchModelName(e.pattern, name) || !e.headersMatch(pc) {
				continue
			}
			fitted = true
			if e.authz != nil && !e.authz.Allowed(in.get(pc)) {
				continue // another entry may allow it
			}
			return llmSelection{target: e.target, backend: e.backend, model: e}
		}
	}
	if fitted {
		return llmSelection{failure: pickedDenied}
	}
	return llmSelection{failure: pickedNotFound}
}

// slashPath is the path header matches are looked up with: their table has
// one rule, on every path.
var slashPath = []byte("/")

// headersMatch reports whether one of the model's header matches holds (or
// it has none), with the route table's semantics (server/router): names
// case-insensitive, the first line of a repeated header, regexes anchored.
func (e *llmModelEntry) headersMatch(pc *policy.Ctx) bool {
	if e.matches == nil {
		return true
	}
	_, ok := e.matches.Match(&pc.Fast.Request, nil, slashPath)
	return ok
}

// pickVirtual resolves a virtual model: a failover one is its own target;
// a weighted or conditional one chooses a model name, resolved like a
// client's (internal models included).
func (m *llmModels) pickVirtual(v *llmVirtual, pc *policy.Ctx, body []byte, in *lazyInput) llmSelection {
	if v.failover != nil {
		return llmSelection{target: v.failover, backend: v.failoverBackend}
	}
	var chose string
	var sel llmSelection
	if v.total > 0 {
		chose = v.weighted[v.draw(rand.IntN(v.total), nil)]
		if sel = m.resolve(chose, true, pc, in); sel.failure == pickedDenied {
			chose, sel = m.drawAllowed(v, pc, in)
		}
	} else {
		var failure llmPickFailure
		if chose, failure = v.choose(pc, body, in); failure != pickedOK {
			return llmSelection{failure: failure, virtual: v}
		}
		sel = m.resolve(chose, true, pc, in)
	}
	if sel.failure == pickedNotFound {
		sel.failure = pickedTargetNotFound
	}
	sel.virtual, sel.chose = v, chose
	return sel
}

// draw is the index of the weighted target that n (in [0, total), total
// the weights of the targets not skipped) falls on, skipping the targets i
// with skip[i] (nil: none).
func (v *llmVirtual) draw(n int, skip []bool) int {
	prev := 0
	for i, c := range v.cumulative {
		w := c - prev
		prev = c
		if skip != nil && skip[i] {
			continue
		}
		if n < w {
			return i
		}
		n -= w
	}
	return len(v.weighted) - 1 // (n out of range)
}

// drawAllowed draws a weighted virtual model's target again among those
// whose authorization allows the request, by their weights, once the
// first draw fell on one that refuses it: the same caller is then served
// every time (or refused every time, 403, when none allows it), not 200
// or 403 at random. Drawing first among all and again among the allowed
// ones gives each allowed target its weight's share of the allowed
// weights. Targets that fit no model stay in the draw (their 404 says
// so, as it would have on the first).
func (m *llmModels) drawAllowed(v *llmVirtual, pc *policy.Ctx, in *lazyInput) (string, llmSelection) {
	skip := make([]bool, len(v.weighted))
	sels := make([]llmSelection, len(v.weighted))
	total, prev := 0, 0
	for i, c := range v.cumulative {
		sels[i] = m.resolve(v.weighted[i], true, pc, in)
		if skip[i] = sels[i].failure == pickedDenied; !skip[i] {
			total += c - prev
		}
		prev = c
	}
	if total == 0 {
		return v.weighted[0], llmSelection{failure: pickedDenied}
	}
	i := v.draw(rand.IntN(total), skip)
	return v.weighted[i], sels[i]
}

// choose is the model of the first condition that holds.
func (v *llmVirtual) choose(pc *policy.Ctx, body []byte, in *lazyInput) (string, llmPickFailure) {
	var req map[string]any
	if err := sonic.Unmarshal(body, &req); err != nil {
		return "", pickedBadBody
	}
	for _, c := range v.conditional {
		if c.prog == nil {
			return c.model, pickedOK
		}
		out, err := celrules.EvalLLM(c.prog, in.get(pc), req)
		if err == nil {
			if ok, _ := out.Value().(bool); ok {
				return c.model, pickedOK
			}
		}
	}
	return "", pickedNoCondition
}

// answerFailure answers a request no model serves, with agentgateway's
// statuses, messages and codes.
func (s *llmSelection) answerFailure(x *llmExchange) int {
	switch s.failure {
	case pickedDenied:
		return x.routerError(fasthttp.StatusForbidden, "Model authorization denied", "model_authorization_denied")
	case pickedNoCondition:
		return x.routerError(fasthttp.StatusBadRequest, "Virtual model "+s.virtual.name+" did not match any conditional target", "virtual_model_no_matching_target")
	case pickedTargetNotFound:
		return x.routerError(fasthttp.StatusNotFound, "Virtual model "+s.virtual.name+" selected target "+s.chose+", but no matching model was found", "virtual_model_target_not_found")
	case pickedBadBody:
		return x.routerError(fasthttp.StatusBadRequest, "LLM request body must be valid JSON", "invalid_request_body")
	}
	return x.routerError(fasthttp.StatusNotFound, "Model not found", "model_not_found")
}

// routerError answers with an error of the model router: OpenAI's error
// shape whatever the client speaks, as agentgateway's router answers.
func (x *llmExchange) routerError(status int, msg, code string) int {
	resp := &x.fctx.Response
	resp.Reset()
	resp.SetStatusCode(status)
	resp.Header.SetContentType("application/json")
	x.out = appendRouterError(x.out[:0], msg, code)
	// Copied: x goes back to its pool when the request is recorded, before
	// fasthttp writes the response.
	resp.SetBody(x.out)
	return status
}

func appendRouterError(dst []byte, msg, code string) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = llm.AppendString(dst, msg)
	dst = append(dst, `,"type":"invalid_request_error","code":`...)
	dst = llm.AppendString(dst, code)
	return append(dst, "}}"...)
}

// responseHeaders are the responseHeaders of the model that served the
// request: the one picked, or, for a failover virtual model, the one whose
// provider was tried last (whose answer the client gets).
func (m *llmModels) responseHeaders(sel *llmSelection, x *llmExchange) *policy.HeaderModifier {
	if sel.model != nil {
		return sel.model.responseHeaders
	}
	if x.prov != nil {
		if e := m.byProvider[x.prov]; e != nil {
			return e.responseHeaders
		}
	}
	return nil
}

// compileModelMatches compiles a model's header matches into a route table
// of one rule per match, on every path, so that they match as route
// matches do. A header named twice in one match is refused: agentgateway
// requires both to hold, Gateway API route matching takes the first.
func compileModelMatches(path string, ms []config.LLMRouteMatch) (*router.Table, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	matches := make([]router.Match, len(ms))
	for i, m := range ms {
		matches[i] = router.Match{PathKind: router.PathPrefix, Path: "/"}
		seen := map[string]int{}
		for j, h := range m.Headers {
			name := strings.ToLower(h.Name)
			if prev, dup := seen[name]; dup {
				return nil, &decode.FieldError{Path: fmt.Sprintf("%s.matches[%d].headers[%d].name", path, i, j),
					Msg: fmt.Sprintf("header %q is already matched by headers[%d] of this match (match one value with a regex, or use two matches for either)", h.Name, prev)}
			}
			seen[name] = j
			matches[i].Headers = append(matches[i].Headers, router.HeaderMatch{Name: h.Name, Value: routerValue(h.Value)})
		}
	}
	t, err := router.New([]router.Route{{Matches: matches, Value: true}})
	if err != nil {
		p := path + ".matches"
		if re, ok := err.(*router.RouteError); ok {
			p, err = fmt.Sprintf("%s.matches[%d]", path, re.Index), re.Err
		}
		return nil, &decode.FieldError{Path: p, Msg: err.Error()}
	}
	return t, nil
}

// llmListedName is a name of the model list and the models that serve it
// (nil for a virtual model, always listed).
type llmListedName struct {
	name    string
	entries []*llmModelEntry
}

// compileList builds the answer to GET /v1/models: the public models with
// a plain name (each name once: entries told apart by header matches share
// it), then the virtual models, in config order. When a model has
// authorization the list is made per request, without the models it
// refuses, as agentgateway's list is.
func (m *llmModels) compileList(models []*llmModelEntry, virtual []config.LLMVirtualModel) error {
	var listed []llmListedName
	at := map[string]int{}
	filtered := false
	for _, e := range models {
		if !e.public || strings.Contains(e.pattern, "*") {
			continue
		}
		filtered = filtered || e.authz != nil
		if i, ok := at[e.pattern]; ok {
			listed[i].entries = append(listed[i].entries, e)
			continue
		}
		at[e.pattern] = len(listed)
		listed = append(listed, llmListedName{name: e.pattern, entries: []*llmModelEntry{e}})
	}
	for i := range virtual {
		listed = append(listed, llmListedName{name: virtual[i].Name})
	}
	if filtered {
		m.listed = listed
		return nil
	}
	names := make([]string, len(listed))
	for i, l := range listed {
		names[i] = l.name
	}
	var err error
	m.list, err = marshalModelList(names)
	return err
}

// answerList answers GET /v1/models.
func (m *llmModels) answerList(pc *policy.Ctx) int {
	resp := &pc.Fast.Response
	resp.Header.SetContentType("application/json")
	if m.list != nil {
		resp.SetBody(m.list)
		return fasthttp.StatusOK
	}
	var in lazyInput
	names := make([]string, 0, len(m.listed))
	for _, l := range m.listed {
		if l.visible(pc, &in) {
			names = append(names, l.name)
		}
	}
	body, err := marshalModelList(names)
	if err != nil {
		return respondError(pc.Fast, fasthttp.StatusInternalServerError, "model list")
	}
	resp.SetBody(body)
	return fasthttp.StatusOK
}

// visible reports whether the request may use the name: a virtual model,
// or a model of the name that would allow it.
func (l *llmListedName) visible(pc *policy.Ctx, in *lazyInput) bool {
	if l.entries == nil {
		return true
	}
	for _, e := range l.entries {
		if e.authz == nil || e.authz.Allowed(in.get(pc)) {
			return true
		}
	}
	return false
}

func marshalModelList(names []string) ([]byte, error) {
	type listed struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := make([]listed, len(names))
	for i, n := range names {
		data[i] = listed{n, "model", 0, "relaygate"}
	}
	return json.Marshal(map[string]any{"object": "list", "data": data})
}
