package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// Errors is every problem found in a configuration, one per line.
type Errors []error

func (e Errors) Error() string {
	var b strings.Builder
	for i, err := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Parse expands environment references in data (YAML or JSON), decodes it
// strictly into a File and validates it. On failure the error is an Errors
// holding every problem found, each naming its field path.
func Parse(data []byte, lookup func(string) (string, bool)) (*File, error) {
	f, errs := parse(data, lookup)
	if len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

// ParsePartial is Parse that also returns what decoded when there were
// errors (nil when nothing did: a syntax or environment error), so that
// --validate-only can look further into the parts that are sound.
func ParsePartial(data []byte, lookup func(string) (string, bool)) (*File, error) {
	f, errs := parse(data, lookup)
	if len(errs) > 0 {
		return f, errs
	}
	return f, nil
}

func parse(data []byte, lookup func(string) (string, bool)) (*File, Errors) {
	// One leading byte order mark, which YAML allows (and editors on
	// Windows write), is not part of the document.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		// A UTF-16 byte order mark (Windows PowerShell's `>` and
		// Out-File write one): read as UTF-8 the file is a string of
		// NULs and halves of characters, which no error would explain.
		return nil, Errors{errUTF16}
	}
	expanded, envErrs := ExpandEnv(data, lookup)
	if len(envErrs) > 0 {
		return nil, Errors(envErrs)
	}
	var f File
	pos, errs := decode.YAMLPositions(expanded, &f)
	if e := resourceError(pos.Root()); e != nil {
		return nil, Errors{e} // not a config file: its errors say nothing
	}
	out := make(Errors, 0, len(errs))
	for _, e := range errs {
		out = append(out, e)
	}
	if pos.Root().Get("policies").Kind() == decode.Map {
		hintPoliciesMap(out)
	}
	if pos == (decode.Positions{}) && len(out) > 0 {
		return nil, out // nothing decoded: a syntax error
	}
	f.pos = pos
	// The gateways become binds, and the top-level routes, the llm section
	// and the mcp section attach to their listeners (or have a port of
	// their own), before the checks that see them.
	out = append(out, f.normalizeGateways(out)...)
	out = append(out, f.checkLLMPort()...)
	// The environment's overrides of the config section (env.go), before
	// the checks that see the settings.
	out = append(out, f.applyEnv(lookup, out)...)
	// Cross-field rules run even when some fields failed, so one pass reports
	// everything; they only look at values that decoded. A rule that a
	// struct's Validate also checks is reported once, with the position the
	// decoder gave it.
	for _, e := range f.crossCheck() {
		if !reported(out, e) {
			out = append(out, e)
		}
	}
	// The normalizing and cross-field checks name paths, not positions:
	// each gets the line of the value it names.
	for _, e := range out {
		f.Position(e)
	}
	return &f, out
}

// errUTF16 refuses a config in UTF-16.
var errUTF16 = errors.New("the config is UTF-16 (it starts with a UTF-16 byte order mark); it must be UTF-8: save it as UTF-8 (PowerShell: Out-File -Encoding utf8; or iconv -f UTF-16 -t UTF-8)")

// resourceKinds are the spec's declarative resources, not served yet.
var resourceKinds = []string{"ProxyBackend", "ProxyPolicy", "ProxyParameters"}

// fileFields are the top-level fields of the config file.
var fileFields = fieldNames(reflect.TypeFor[File]())

// fieldNames are the names of the fields of struct type t, from their json
// tags.
func fieldNames(t reflect.Type) map[string]bool {
	m := map[string]bool{}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			m[name] = true
		}
	}
	return m
}

// resourceError returns the one error for a document that is a resource
// (an apiVersion or kind at its top level, and no field of the config
// file), such as the spec's ProxyBackend: not supported yet, and its fields
// are not worth an "unknown field" each. Otherwise nil.
func resourceError(root *decode.Node) error {
	kindNode, apiNode := root.Get("kind"), root.Get("apiVersion")
	if kindNode == nil && apiNode == nil {
		return nil
	}
	for _, k := range root.Keys() {
		if fileFields[k] {
			return nil // a config file with a stray field: reported as such
		}
	}
	const reads = "gateway -f reads a config file (config, binds, backends, policies, ...)"
	if kind, _ := kindNode.String(); slices.Contains(resourceKinds, kind) {
		return &decode.FieldError{Path: "kind", Line: kindNode.Line(), Col: kindNode.Col(),
			Msg: fmt.Sprintf("%s resources are not supported yet: %s, not the declarative resources (ProxyBackend, ProxyPolicy, ProxyParameters)", kind, reads)}
	}
	field, n := "kind", kindNode
	if n == nil {
		field, n = "apiVersion", apiNode
	}
	what := n.Describe()
	if s, ok := n.String(); ok {
		what = strconv.Quote(s)
	}
	return &decode.FieldError{Path: field, Line: n.Line(), Col: n.Col(),
		Msg: fmt.Sprintf("the file is a resource (%s %s), not a config file: %s; the declarative resources (ProxyBackend, ProxyPolicy, ProxyParameters) are not supported yet", field, what, reads)}
}

// hintPoliciesMap adds to the error of a top-level policies written as a
// map what it is: a route's policies, as the README shows them, pasted as
// a whole file start with such a map.
func hintPoliciesMap(errs Errors) {
	for _, e := range errs {
		if fe, ok := e.(*decode.FieldError); ok && fe.Path == "policies" {
			fe.Msg += "; top-level policies is a list of targeted policies (- name: ... target: ... policy: ...); a route's policies go under binds[].listeners[].routes[].policies"
		}
	}
}

// Blank reports whether the file holds nothing to run: a document with no
// value (empty, only comments or document markers, null, ~) or a `binds:`
// with no value, and no bind made of another section. Such a file is what a
// tool that truncates, then writes, leaves mid-write: cmd/gateway refuses it
// rather than stop every listener; `binds: []` runs none on purpose.
func (f *File) Blank() bool {
	return len(f.Binds) == 0 && (f.pos.Null("") || f.pos.Null("binds"))
}

// Locate returns the line and column of the value at path in the file the
// config was parsed from (0, 0 when unknown: a File built in code).
func (f *File) Locate(path string) (line, col int) { return f.pos.Locate(path) }

// Position gives errors found after parsing, such as compile errors that
// name a path, the line and column of that path: a *decode.FieldError
// without a position gets one. Other errors are returned as they are.
func (f *File) Position(err error) error {
	var fe *decode.FieldError
	if errors.As(err, &fe) && fe.Line == 0 {
		fe.Line, fe.Col = f.Locate(fe.Path)
	}
	return err
}

// crossCheck checks rules that span several fields of the file.
func (f *File) crossCheck() Errors {
	var errs Errors
	v := checker{errs: &errs}
	if f.Config != nil {
		f.Config.checkAddrs(func(field string, err error) { v.Errorf("config."+field, "%v", err) })
	}
	ports := map[int]int{}
	for i, b := range f.Binds {
		if b.Port != nil {
			if prev, dup := ports[*b.Port]; dup {
				v.Errorf(b.path(i)+".port", "port %d is already used by %s", *b.Port, f.Binds[prev].path(prev))
			}
			ports[*b.Port] = i
		}
	}
	names := map[string]int{}
	for i, b := range f.Backends {
		if prev, dup := names[b.Name]; dup && b.Name != "" {
			v.Errorf(indexPath("backends", i)+".name", "backend %q is already defined by backends[%d]", b.Name, prev)
		}
		names[b.Name] = i
	}
	wildcard := -1
	// A route attached to several listeners is checked once (the checks
	// that depend on the listener report each error once: parse drops
	// repeats).
	routeSeen := map[string]bool{}
	for bi, b := range f.Binds {
		if b.Mode == "internal" && b.Port == nil {
			if wildcard >= 0 {
				v.Errorf(indexPath("binds", bi)+".port", "binds[%d] is already the internal bind of every port: only one may have no port (or port 0)", wildcard)
			}
			wildcard = bi
		}
		checkBindProtocols(v, b.Listeners, func(li int) string { return b.listenerPath(bi, li) })
		checkConnectBind(v, &b, func(li int) string { return b.listenerPath(bi, li) })
		listenerNames := map[string]int{}
		for li, l := range b.Listeners {
			lpath := b.listenerPath(bi, li)
			// The gateways' listener names are checked as Parse makes
			// them (gatewayBind).
			if l.Name != "" && b.origin == "" {
				if prev, dup := listenerNames[l.Name]; dup {
					v.Errorf(lpath+".name", "listener %q is already defined by listeners[%d]", l.Name, prev)
				}
				listenerNames[l.Name] = li
			}
			checkListenerProtocol(v, lpath, &l, names)
			if l.Hostname != "" {
				if err := CheckHostname(l.Hostname); err != nil {
					v.Errorf(lpath+".hostname", "invalid hostname %q: %v", l.Hostname, err)
				}
			}
			for ri, r := range l.Routes {
				rpath := r.SourcePath(lpath + "." + indexPath("routes", ri))
				if routeSeen[rpath] {
					continue
				}
				routeSeen[rpath] = true
				for hi, h := range r.Hostnames {
					if err := CheckHostname(h); err != nil {
						v.Errorf(rpath+"."+indexPath("hostnames", hi), "invalid hostname %q: %v", h, err)
					}
				}
				for mi, m := range r.Matches {
					mpath := rpath + "." + indexPath("matches", mi)
					if m.Method != "" && !validHeaderName(m.Method) {
						v.Errorf(mpath+".method", "invalid method %q", m.Method)
					} else if upper := strings.ToUpper(m.Method); upper != m.Method && standardMethods[upper] {
						v.Errorf(mpath+".method", "%q: methods are case-sensitive; did you mean %q?", m.Method, upper)
					}
					for hi, h := range m.Headers {
						if !validHeaderName(h.Name) && !requestPseudoHeaders[strings.ToLower(h.Name)] {
							v.Errorf(mpath+"."+indexPath("headers", hi)+".name", "invalid header name %q: must be an HTTP token or a request pseudo-header (:method, :scheme, :authority, :path)", h.Name)
						}
					}
				}
				for bi2, rb := range r.Backends {
					if rb.Kind == BackendRef {
						if _, ok := names[rb.Backend]; !ok {
							v.Errorf(rpath+"."+indexPath("backends", bi2)+".backend", "no backend named %q in the top-level backends", rb.Backend)
						}
					}
				}
				if r.Policies != nil && r.Policies.RequestMirror != nil && r.Policies.RequestMirror.Backend.Backend != "" {
					if _, ok := names[r.Policies.RequestMirror.Backend.Backend]; !ok {
						v.Errorf(rpath+".policies.requestMirror.backend.backend", "no backend named %q in the top-level backends", r.Policies.RequestMirror.Backend.Backend)
					}
				}
			}
		}
	}
	f.checkAI(v, names)
	f.checkTelemetry(v, names)
	f.checkPolicyTargets(v)
	return errs
}

// reported reports whether errs already holds e: the same message at the
// same path.
func reported(errs Errors, e error) bool {
	fe, ok := e.(*decode.FieldError)
	if !ok {
		return false
	}
	for _, prev := range errs {
		if p, ok := prev.(*decode.FieldError); ok && p.Path == fe.Path && p.Msg == fe.Msg {
			return true
		}
	}
	return false
}

// standardMethods are the methods of RFC 9110 (section 9) and PATCH (RFC
// 5789). Methods are case-sensitive and a route's method matches exactly,
// so one of these written in another case ("get") would match no request:
// an error. Other tokens are extension methods, taken as written.
var standardMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true,
}

// requestPseudoHeaders are the pseudo-headers a route's header match may
// name, as agentgateway allows (the router reads them from the request).
var requestPseudoHeaders = map[string]bool{":method": true, ":scheme": true, ":authority": true, ":path": true}

// checker collects cross-field errors with their paths.
type checker struct{ errs *Errors }

func (c checker) Errorf(path, format string, args ...any) {
	*c.errs = append(*c.errs, &decode.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}
