package router

import "github.com/valyala/fasthttp"

// minDispatchRun is the shortest run of rules worth a value-keyed map. A
// run of 4 costs one attribute read and a map lookup instead of up to 4
// rule checks.
const minDispatchRun = 4

// condKey names one request attribute a rule can require an exact value of.
type condKey struct {
	kind condKind
	name string // header (canonical) or query name; "" for the method
}

type condKind uint8

const (
	condMethod condKind = iota
	condHeader
	condQuery
)

// dispatch replaces a run of consecutive candidate rules that all require
// an exact value of the same attribute: it reads the attribute once and
// only tests the rules that want that value, in their original order.
// Rules of other values cannot match, so the first match is unchanged.
type dispatch struct {
	key   condKey
	name  []byte // key.name as bytes, for PeekCanonical
	rules map[string][]*rule
}

// step is one element of a candidate list: a single rule or a dispatch.
type step struct {
	rule     *rule
	dispatch *dispatch
}

// firstMatch returns the first rule of steps that matches the request.
func firstMatch(steps []step, req *fasthttp.Request, path []byte) *rule {
	for i := range steps {
		s := &steps[i]
		if s.dispatch == nil {
			if s.rule.matches(req, path) {
				return s.rule
			}
			continue
		}
		if req == nil {
			continue // every rule of a dispatch has a request condition
		}
		for _, r := range s.dispatch.rules[string(s.dispatch.read(req))] {
			if r.matches(req, path) {
				return r
			}
		}
	}
	return nil
}

// read returns the request's value of the attribute, nil when absent.
func (d *dispatch) read(req *fasthttp.Request) []byte {
	switch d.key.kind {
	case condMethod:
		return req.Header.Method()
	case condHeader:
		return req.Header.PeekCanonical(d.name)
	}
	return req.URI().QueryArgs().Peek(d.key.name)
}

// exactValue returns the exact value r requires for k, if it requires one.
func (r *rule) exactValue(k condKey) (string, bool) {
	var conds []valueCond
	switch k.kind {
	case condMethod:
		return r.method, r.method != ""
	case condHeader:
		conds = r.headers
	default:
		conds = r.query
	}
	for i := range conds {
		if conds[i].name == k.name {
			return conds[i].exact, conds[i].re == nil
		}
	}
	return "", false
}

// exactKeys lists the attributes r requires an exact value of.
func (r *rule) exactKeys() []condKey {
	var ks []condKey
	if r.method != "" {
		ks = append(ks, condKey{kind: condMethod})
	}
	for _, c := range r.headers {
		if c.re == nil {
			ks = append(ks, condKey{kind: condHeader, name: c.name})
		}
	}
	for _, c := range r.query {
		if c.re == nil {
			ks = append(ks, condKey{kind: condQuery, name: c.name})
		}
	}
	return ks
}

// buildSteps turns a precedence-ordered candidate list into steps, folding
// runs of at least minRun rules that share an exact-value attribute into
// dispatches.
func buildSteps(rules []*rule, minRun int) []step {
	steps := make([]step, 0, len(rules))
	for i := 0; i < len(rules); {
		var best condKey
		bestRun := 0
		for _, k := range rules[i].exactKeys() {
			n := 1
			for i+n < len(rules) {
				if _, ok := rules[i+n].exactValue(k); !ok {
					break
				}
				n++
			}
			if n > bestRun {
				best, bestRun = k, n
			}
		}
		if bestRun < minRun {
			steps = append(steps, step{rule: rules[i]})
			i++
			continue
		}
		d := &dispatch{key: best, name: []byte(best.name), rules: make(map[string][]*rule)}
		for _, r := range rules[i : i+bestRun] {
			v, _ := r.exactValue(best)
			d.rules[v] = append(d.rules[v], r)
		}
		steps = append(steps, step{dispatch: d})
		i += bestRun
	}
	return steps
}
