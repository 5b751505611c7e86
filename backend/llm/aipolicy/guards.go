package aipolicy

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
)

// requestGuard is a compiled request guard: a regex guard (g) or a remote
// one (remote) over the texts of its scope, and the answer a request the
// regex guard refuses gets (a remote guard's verdict carries its own).
type requestGuard struct {
	g         *guard.Guard
	remote    *guardrail.Guard
	scope     scope
	rejection *Rejection
}

// Rejection is a refused request: the configured status, body and header
// changes, or the spec's defaults (403, "The request was rejected due to
// inappropriate content"). It is immutable and shared by every request the
// guard refuses.
type Rejection struct {
	status  int
	body    []byte
	headers *policy.HeaderModifier
	remote  *guardrail.Rejection // a remote guard's rejection, written as it is
}

// Write replaces resp with the rejection and returns its status. No
// Content-Type is set unless the configured headers set one (agentgateway
// sets none).
func (r *Rejection) Write(resp *fasthttp.Response) int {
	if r.remote != nil {
		return r.remote.Write(resp)
	}
	resp.Reset()
	resp.SetStatusCode(r.status)
	resp.SetBody(r.body) // a copy: response policies may edit it
	if r.headers != nil {
		r.headers.ApplyResponse(&resp.Header)
	}
	return r.status
}

var defaultRejection = &Rejection{status: config.DefaultRejectionStatus, body: []byte(config.DefaultRequestRejectionBody)}

// newRejection compiles a guard's rejection; path is the rejection's field.
func newRejection(c *config.GuardRejection, path string) (*Rejection, error) {
	if c == nil {
		return defaultRejection, nil
	}
	r := &Rejection{status: config.DefaultRejectionStatus, body: []byte(config.DefaultRequestRejectionBody)}
	if c.Status != nil {
		r.status = *c.Status
	}
	if c.Body != nil {
		r.body = slices.Clone([]byte(*c.Body))
	}
	if c.Headers != nil {
		h, err := policy.NewHeaderModifier(c.Headers)
		if err != nil {
			return nil, fieldError(path+".headers", err)
		}
		r.headers = h
	}
	return r, nil
}

// fieldError turns a policy constructor's error into a FieldError under
// path.
func fieldError(path string, err error) error {
	return decode.Under(path, err)
}

// compileRequestGuards compiles promptGuard.request, the remote guards
// with opts.
func compileRequestGuards(pg *config.PromptGuard, opts *guardrail.Options) ([]requestGuard, error) {
	if pg == nil {
		return nil, nil
	}
	var out []requestGuard
	for i := range pg.Request {
		rg := &pg.Request[i]
		path := "promptGuard.request[" + strconv.Itoa(i) + "]"
		if otherRequestKind(rg) != "" {
			g, err := guardrail.NewRequestGuard(rg, *opts)
			if err != nil {
				return nil, underPath(path, err)
			}
			out = append(out, requestGuard{remote: g, scope: scopeOf(g.Scope())})
			continue
		}
		if rg.Regex == nil {
			return nil, &decode.FieldError{Path: path, Msg: "a guard kind is required"}
		}
		g, err := compileRegex(rg.Regex, path+".regex", false)
		if err != nil {
			return nil, err
		}
		rej, err := newRejection(rg.Rejection, path+".rejection")
		if err != nil {
			return nil, err
		}
		out = append(out, requestGuard{g: g, scope: scopeOf(rg.Scope), rejection: rej})
	}
	return out, nil
}

func otherRequestKind(g *config.RequestGuard) string {
	switch {
	case g.Webhook != nil:
		return "webhook"
	case g.OpenAIModeration != nil:
		return "openAIModeration"
	case g.BedrockGuardrails != nil:
		return "bedrockGuardrails"
	case g.GoogleModelArmor != nil:
		return "googleModelArmor"
	case g.AzureContentSafety != nil:
		return "azureContentSafety"
	}
	return ""
}

func otherResponseKind(g *config.ResponseGuard) string {
	switch {
	case g.Webhook != nil:
		return "webhook"
	case g.BedrockGuardrails != nil:
		return "bedrockGuardrails"
	case g.GoogleModelArmor != nil:
		return "googleModelArmor"
	case g.AzureContentSafety != nil:
		return "azureContentSafety"
	}
	return ""
}

// compileResponseGuard merges the regex response guards into one guard that
// masks: matches in answers are masked whatever the action says. The
// remote response guards are compiled apart (compileRemoteResponse).
func compileResponseGuard(pg *config.PromptGuard) (*guard.Guard, error) {
	if pg == nil || len(pg.Response) == 0 {
		return nil, nil
	}
	merged := &config.RegexGuard{}
	for i, rg := range pg.Response {
		path := "promptGuard.response[" + strconv.Itoa(i) + "]"
		if otherResponseKind(&rg) != "" {
			continue
		}
		if rg.Regex == nil {
			return nil, &decode.FieldError{Path: path, Msg: "a guard kind is required"}
		}
		// Each guard on its own first, so that an error names its rule.
		if _, err := compileRegex(rg.Regex, path+".regex", true); err != nil {
			return nil, err
		}
		merged.Rules = append(merged.Rules, rg.Regex.Rules...)
	}
	if len(merged.Rules) == 0 {
		return nil, nil
	}
	return compileRegex(merged, "promptGuard.response", true)
}

// IgnoredFields are the fields of pg (a policy's promptGuard) that are
// read and do nothing, by path relative to it ("response[0].regex.action"):
// a regex response guard's action: reject and its rejection, as matches in
// answers are always masked (compileResponseGuard). agentgateway rejects
// the answer instead, so its files may carry them: the server warns of
// them rather than refusing the file.
func IgnoredFields(pg *config.PromptGuard) []string {
	if pg == nil {
		return nil
	}
	var out []string
	for i := range pg.Response {
		rg := &pg.Response[i]
		if rg.Regex == nil || otherResponseKind(rg) != "" {
			continue
		}
		path := "response[" + strconv.Itoa(i) + "]"
		if rg.Regex.Action == string(guard.ActionReject) {
			out = append(out, path+".regex.action")
		}
		if rg.Rejection != nil {
			out = append(out, path+".rejection")
		}
	}
	return out
}

// compileRemoteResponse compiles the remote guards of promptGuard.response,
// in order.
func compileRemoteResponse(pg *config.PromptGuard, opts *guardrail.Options) ([]*guardrail.Guard, error) {
	if pg == nil {
		return nil, nil
	}
	var out []*guardrail.Guard
	for i := range pg.Response {
		rg := &pg.Response[i]
		if otherResponseKind(rg) == "" {
			continue
		}
		g, err := guardrail.NewResponseGuard(rg, *opts)
		if err != nil {
			return nil, underPath("promptGuard.response["+strconv.Itoa(i)+"]", err)
		}
		out = append(out, g)
	}
	return out, nil
}

// underPath puts a guardrail compile error (its path relative to the
// guard) under path.
func underPath(path string, err error) error {
	return decode.Under(path, err)
}

// compileRegex builds a guard from a regex guard's rules (masking when
// forceMask is set). An error names the rule at fault.
func compileRegex(rg *config.RegexGuard, path string, forceMask bool) (*guard.Guard, error) {
	spec := guard.Spec{Action: guard.Action(rg.Action)}
	if forceMask {
		spec.Action = guard.ActionMask
	}
	for _, r := range rg.Rules {
		if r.Pattern != nil {
			spec.Patterns = append(spec.Patterns, r.Pattern.String())
		} else {
			spec.Builtins = append(spec.Builtins, r.Builtin)
		}
	}
	g, err := guard.New(spec)
	if err == nil {
		return g, nil
	}
	for i, r := range rg.Rules {
		one := guard.Spec{Action: spec.Action}
		if r.Pattern != nil {
			one.Patterns = []string{r.Pattern.String()}
		} else {
			one.Builtins = []string{r.Builtin}
		}
		if _, e := guard.New(one); e != nil {
			return nil, &decode.FieldError{Path: path + ".rules[" + strconv.Itoa(i) + "]", Msg: e.Error()}
		}
	}
	return nil, &decode.FieldError{Path: path, Msg: err.Error()}
}

// guardTexts runs the request guards in order over the texts of body
// (indexed by tp) in format f, each guard reading the texts as the guards
// before it left them. It returns the rejection of the first guard that
// refuses a text (or one of the prompts: enrichment.rejectAt), or reports
// whether a mask changed a text (w.texts.spans then hold the masked texts).
func (p *Policy) guardTexts(w *work, tp *tape, f convert.Format, remote *RemoteInput) (masked bool, rej *Rejection, err error) {
	t := &w.texts
	t.reset(tp, p.guardScopes)
	t.walk(f)
	if !slices.IsSortedFunc(t.spans, byStart) { // a block with two types
		slices.SortStableFunc(t.spans, byStart)
	}
	w.arena = w.arena[:0]
	promptReject := p.prompts[f].rejectAt
	for gi := range p.guards {
		g := &p.guards[gi]
		if gi == promptReject {
			return false, g.rejection, nil
		}
		if g.remote != nil {
			m, rej, err := w.askRemote(g.remote, g.scope, remote)
			if rej != nil || err != nil {
				return false, rej, err
			}
			masked = masked || m
			continue
		}
		for si := 0; si < len(t.spans); si++ {
			s := &t.spans[si]
			if s.scope&g.scope == 0 {
				continue
			}
			if n := t.partsFrom(si, g.scope); n > 1 {
				// The text blocks of one message are one text to the
				// guard, as to the model reading them: a match split
				// across blocks is found.
				m, rejected := w.guardParts(tp.d, t.spans[si:si+n], g.g)
				if rejected {
					return false, g.rejection, nil
				}
				masked = masked || m
				si += n - 1
				continue
			}
			text := w.spanText(tp.d, s)
			if g.g.Action() == guard.ActionReject {
				if v, _ := g.g.Check(text); v == guard.Rejected {
					return false, g.rejection, nil
				}
				continue
			}
			start := len(w.arena)
			var ok bool
			if w.arena, ok = g.g.AppendMask(w.arena, text); ok {
				s.off, s.n, s.own, s.masked = start, len(w.arena)-start, true, true
				s.escape = s.escape || !g.g.PlainLabels()
				masked = true
			}
		}
	}
	return masked, nil, nil
}

// partsFrom is how many spans from t.spans[i] are text blocks of one
// message that scope covers, one after another.
func (t *texts) partsFrom(i int, sc scope) int {
	n := 1
	for i+n < len(t.spans) && t.spans[i+n].msg == t.spans[i].msg && t.spans[i+n].scope&sc != 0 {
		n++
	}
	return n
}

// guardParts runs g over the texts of parts, the text blocks of one
// message, joined: it reports a rejection, or masks each part with what
// g.AppendMaskParts made of it (a match across parts masked once, in the
// part it starts in) and reports whether any changed.
func (w *work) guardParts(body []byte, parts []textSpan, g *guard.Guard) (masked, rejected bool) {
	w.partText, w.ends = w.partText[:0], w.ends[:0]
	for i := range parts {
		w.partText = append(w.partText, w.spanText(body, &parts[i])...)
		w.ends = append(w.ends, len(w.partText))
	}
	if g.Action() == guard.ActionReject {
		return false, g.CheckParts(w.partText, w.ends) == guard.Rejected
	}
	w.cuts = append(w.cuts[:0], w.ends...)
	start := len(w.arena)
	var ok bool
	if w.arena, ok = g.AppendMaskParts(w.arena, w.partText, w.ends, w.cuts); !ok {
		return false, false
	}
	from, at := 0, start
	for i := range parts {
		s := &parts[i]
		out := w.arena[at:w.cuts[i]]
		if !bytes.Equal(out, w.partText[from:w.ends[i]]) {
			s.off, s.n, s.own, s.masked = at, len(out), true, true
			s.escape = s.escape || !g.PlainLabels()
			masked = true
		}
		from, at = w.ends[i], w.cuts[i]
	}
	return masked, false
}

// spanText is s's current text, decoding its escapes into the arena the
// first time they are needed.
func (w *work) spanText(body []byte, s *textSpan) []byte {
	if s.own {
		return w.arena[s.off : s.off+s.n]
	}
	tokText := body[s.start:s.end]
	inner := tokText[1 : len(tokText)-1]
	if !hasBackslash(inner) {
		return inner
	}
	start := len(w.arena)
	var err error
	w.arena, err = llm.AppendUnquoted(w.arena, tokText)
	if err != nil { // not on a validated body
		w.arena = w.arena[:start]
		return inner
	}
	s.off, s.n, s.own, s.escape = start, len(w.arena)-start, true, true
	return w.arena[start:]
}

func byStart(a, b textSpan) int { return a.start - b.start }

func hasBackslash(b []byte) bool { return bytes.IndexByte(b, '\\') >= 0 }
