package config

import (
	"github.com/relaygate/gateway/config/decode"
)

// The conditional form of a policy kind (agentgateway's
// LocalConditionalPolicies): `{conditional: [entry, ...]}`, each entry the
// kind's own fields plus a `condition`. The first entry whose condition
// holds applies to a request; an entry without one is the fallback and
// comes last; when no entry applies, the kind does nothing for the
// request. A kind with a conditional form decodes either form
// (decodeEitherForm) and checks its entries in Validate
// (checkConditional) instead of its own fields.

// ConditionalExtAuthz is one entry of extAuthz's conditional form.
type ConditionalExtAuthz struct {
	Condition ValueCondition `json:"condition,omitempty"`
	ExtAuthz
}

// DecodeNode decodes the entry: its condition and the kind's fields.
func (c *ConditionalExtAuthz) DecodeNode(n *decode.Node) {
	type plain ExtAuthz
	var f struct {
		Condition ValueCondition `json:"condition,omitempty"`
		plain
	}
	if n.Decode(&f) {
		c.Condition, c.ExtAuthz = f.Condition, ExtAuthz(f.plain)
	}
}

// ConditionalRemoteRateLimit is one entry of remoteRateLimit's
// conditional form.
type ConditionalRemoteRateLimit struct {
	Condition ValueCondition `json:"condition,omitempty"`
	RemoteRateLimit
}

// DecodeNode decodes the entry: its condition and the kind's fields.
func (c *ConditionalRemoteRateLimit) DecodeNode(n *decode.Node) {
	type plain RemoteRateLimit
	var f struct {
		Condition ValueCondition `json:"condition,omitempty"`
		plain
	}
	if n.Decode(&f) {
		c.Condition, c.RemoteRateLimit = f.Condition, RemoteRateLimit(f.plain)
	}
}

// ConditionalExtProc is one entry of extProc's conditional form.
type ConditionalExtProc struct {
	Condition ValueCondition `json:"condition,omitempty"`
	ExtProc
}

// DecodeNode decodes the entry: its condition and the kind's fields.
func (c *ConditionalExtProc) DecodeNode(n *decode.Node) {
	type plain ExtProc
	var f struct {
		Condition ValueCondition `json:"condition,omitempty"`
		plain
	}
	if n.Decode(&f) {
		c.Condition, c.ExtProc = f.Condition, ExtProc(f.plain)
	}
}

// decodeEitherForm decodes a kind's node: into cond (a pointer to a struct
// holding only the Conditional field) when it has a `conditional` key,
// which then must be its only one; into plain (the kind's fields, without
// its methods) otherwise. A key beside `conditional` that is none of the
// kind's fields is reported as unknown (a typo), not as a field out of
// place.
func decodeEitherForm(n *decode.Node, plain, cond any) {
	if n.Kind() == decode.Map && n.Get("conditional") != nil {
		if len(n.Keys()) > 1 {
			if !n.UnknownFields(decode.FieldNames(plain)...) {
				n.ErrorfAt("conditional", "not allowed together with the kind's other fields (set them on each entry)")
			}
			return
		}
		n.Decode(cond)
		return
	}
	n.Decode(plain)
}

// checkConditional checks the entries of a conditional form: at least
// one, none conditional itself, and a fallback (no condition) only last.
// of reads an entry's condition and whether it has a conditional form of
// its own.
func checkConditional[E any](v *decode.Validation, entries []E, of func(*E) (ValueCondition, bool)) {
	if len(entries) == 0 {
		v.Errorf("conditional", "must have at least 1 item")
	}
	for i := range entries {
		cond, nested := of(&entries[i])
		if nested {
			v.Errorf(indexPath("conditional", i)+".conditional", "entries cannot be conditional themselves")
		}
		if cond == "" && i != len(entries)-1 {
			v.Errorf(indexPath("conditional", i)+".condition", "required: only the last entry may go without a condition (the fallback)")
		}
	}
}

// checkService checks a policy's external service: exactly one of host
// ("host:port"), backend (a named backend, its leading "/" dropped) and
// service.
func checkService(v *decode.Validation, host string, backend *string, service bool) {
	*backend = backendRefName(*backend)
	switch {
	case host == "" && *backend == "" && !service:
		v.Errorf("", "exactly one of host, backend, service is required")
	case host != "" && *backend != "":
		v.Errorf("", "only one of host, backend may be set")
	case host != "":
		if err := checkHostPort(host); err != nil {
			v.Errorf("host", "%v", err)
		}
	}
}
