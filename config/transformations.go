package config

import "github.com/relaygate/gateway/config/decode"

// Transformations is `policies.transformations`: headers and body of the
// request before it is forwarded, and of the response before it is
// returned, computed by CEL.
type Transformations struct {
	Request     *Transform                   `json:"request,omitempty"`
	Response    *Transform                   `json:"response,omitempty"`
	Conditional []ConditionalTransformations `json:"conditional,omitempty" cfg:"maxItems=64"`
}

// ConditionalTransformations is one entry of transformations' conditional
// form: the entry chosen for a request is the one whose response side
// runs on its response.
type ConditionalTransformations struct {
	Condition ValueCondition `json:"condition,omitempty"`
	Transformations
}

// DecodeNode decodes the entry: its condition and the kind's fields.
func (c *ConditionalTransformations) DecodeNode(n *decode.Node) {
	type plain Transformations
	var f struct {
		Condition ValueCondition `json:"condition,omitempty"`
		plain
	}
	if n.Decode(&f) {
		c.Condition, c.Transformations = f.Condition, Transformations(f.plain)
	}
}

// DecodeNode decodes the kind or its conditional form.
func (t *Transformations) DecodeNode(n *decode.Node) {
	type plain Transformations
	var cond struct {
		Conditional []ConditionalTransformations `json:"conditional" cfg:"required,maxItems=64"`
	}
	decodeEitherForm(n, (*plain)(t), &cond)
	if cond.Conditional != nil {
		t.Conditional = cond.Conditional
	}
}

// Transform is one direction's edits, applied in this order: replace,
// then set, add and remove, then body. A value that fails to evaluate
// leaves its header alone.
type Transform struct {
	// Add appends a header per entry (a list result adds one per item).
	Add HeaderExpressions `json:"add,omitempty" cfg:"maxItems=64"`
	// Set replaces the header's values. In a request, :method, :path and
	// :authority set those; in a response, :status sets the status.
	Set HeaderExpressions `json:"set,omitempty" cfg:"maxItems=64"`
	// Remove deletes headers by name.
	Remove []string `json:"remove,omitempty" cfg:"maxItems=64"`
	// Replace computes the whole header set: a map of names to a string or
	// a list of strings. Pseudo-headers in it are ignored, and so are the
	// framing and hop-by-hop fields (Content-Length, Transfer-Encoding,
	// Connection, Upgrade, ...), which it neither sets nor removes.
	Replace *CELExpression `json:"replace,omitempty"`
	// Body computes the message's new body: a string or bytes as they
	// are, any other value as JSON. One that fails to evaluate empties
	// the body (agentgateway's rule).
	Body *CELExpression `json:"body,omitempty"`
	// Metadata sets values by CEL, evaluated before the other fields: CEL
	// shows them as `metadata` to this transformation's other expressions
	// and every later one (the response's, the access log's). One that
	// fails to evaluate is left out.
	Metadata map[string]CELExpression `json:"metadata,omitempty" cfg:"maxItems=64"`
}

// requestPseudo and responsePseudo are the pseudo-headers set may name.
var (
	requestPseudo  = map[string]bool{":method": true, ":path": true, ":authority": true}
	responsePseudo = map[string]bool{":status": true}
)

// Validate checks header names; which pseudo-headers are allowed depends
// on the direction (Transformations.Validate).
func (t *Transform) Validate(v *decode.Validation) {
	for name := range t.Add {
		switch {
		case !validHeaderName(name):
			v.Errorf("add."+name, "invalid header name %q", name)
		case framingHeader(name):
			v.Errorf("add."+name, errFraming)
		}
	}
	for i, name := range t.Remove {
		switch {
		case !validHeaderName(name):
			v.Errorf(indexPath("remove", i), "invalid header name %q", name)
		case framingHeader(name):
			v.Errorf(indexPath("remove", i), errFraming)
		}
	}
}

// Validate checks the pseudo-headers each direction's set names.
func (t *Transformations) Validate(v *decode.Validation) {
	if t.Conditional != nil {
		checkConditional(v, t.Conditional, func(c *ConditionalTransformations) (ValueCondition, bool) { return c.Condition, c.Conditional != nil })
		return
	}
	for _, d := range []struct {
		field  string
		t      *Transform
		pseudo map[string]bool
	}{{"request", t.Request, requestPseudo}, {"response", t.Response, responsePseudo}} {
		if d.t == nil {
			continue
		}
		for name := range d.t.Set {
			switch {
			case !validHeaderName(name) && !d.pseudo[name]:
				v.Errorf(d.field+".set."+name, "invalid header name %q", name)
			case framingHeader(name):
				v.Errorf(d.field+".set."+name, errFraming)
			}
		}
	}
}
