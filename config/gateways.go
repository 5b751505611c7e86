package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// This file reads agentgateway's newer shapes of the file: the top-level
// `gateways` (ports, each with one listener or named listeners), and the
// top-level `routes` and `tcpRoutes`, the llm section and the mcp section,
// which attach to those listeners by name. Parse normalizes them into binds,
// listeners and routes (File.Binds), so that the rest of the gateway knows
// one model. Each listener and route made so keeps the path it was written
// at (SourcePath), so every error, the server's included, names what the
// user wrote; the config dump writes the file's own shape (File.MarshalJSON).

// Gateways is the top-level `gateways:` map (agentgateway's
// IndexMap<name, LocalGateway>), in file order.
type Gateways []NamedGateway

// NamedGateway is one entry of `gateways`.
type NamedGateway struct {
	Name    string
	Gateway Gateway
}

// DecodeNode reads the map keeping its order: the binds and listeners made
// of it follow the file.
func (g *Gateways) DecodeNode(n *decode.Node) {
	if !n.Expect(decode.Map) {
		return
	}
	var out Gateways
	for _, name := range n.Keys() {
		v := n.Get(name)
		ng := NamedGateway{Name: name}
		switch {
		case v.Kind() == decode.Null:
			v.Errorf("must not be null")
		case name == "":
			v.Errorf("a gateway needs a name")
		case strings.Contains(name, "/"):
			v.Errorf("a gateway's name cannot hold \"/\" (it separates the gateway from the listener in references like gateway/listener)")
		}
		v.Decode(&ng.Gateway)
		out = append(out, ng)
	}
	*g = out
}

// MarshalJSON writes the map in file order, for /config_dump.
func (g Gateways) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, ng := range g {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(ng.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(ng.Gateway)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Gateway is one entry of `gateways` (agentgateway's LocalGateway): a port
// with either one listener, whose protocol, tls and gateway policies are
// written beside the port, or named listeners (then only the port may be
// written beside them).
type Gateway struct {
	Port *int `json:"port,omitempty" cfg:"required,min=1,max=65535"`
	// Protocol defaults to HTTP, or HTTPS when tls is set.
	Protocol  string            `json:"protocol,omitempty" cfg:"enum=HTTP|HTTPS|TCP|TLS"`
	Listeners []GatewayListener `json:"listeners,omitempty"`
	TLS       *ListenerTLS      `json:"tls,omitempty"`
	// ListenerPolicy holds the gateway policies, written beside the port
	// (they are a listener's policies: the base of its routes' policies).
	ListenerPolicy
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*Gateway) FieldRules() {}

// Validate refuses the one-listener fields beside named listeners, as
// agentgateway does.
func (g *Gateway) Validate(v *decode.Validation) {
	if len(g.Listeners) == 0 {
		return
	}
	if g.Protocol != "" {
		v.Errorf("protocol", "not allowed together with listeners: set each listener's protocol")
	}
	if g.TLS != nil {
		v.Errorf("tls", "not allowed together with listeners: set each listener's tls")
	}
	var set PolicySet
	set.Attach(LevelListener, "", &g.ListenerPolicy)
	for _, k := range set.Kinds() {
		v.Errorf(k, "not allowed together with listeners: set it on each listener")
	}
}

// GatewayListener is one of a gateway's listeners (agentgateway's
// LocalGatewayListener): what routes attach to as "gateway/name".
type GatewayListener struct {
	// Name defaults to "listener<index>".
	Name     string `json:"name,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	// Protocol defaults to HTTP, or HTTPS when tls is set.
	Protocol string       `json:"protocol,omitempty" cfg:"enum=HTTP|HTTPS|TCP|TLS"`
	TLS      *ListenerTLS `json:"tls,omitempty"`
	ListenerPolicy
}

// GatewayRefs names the gateways, or single listeners of them
// ("gateway/listener"), that routes or a section attach to: a string or a
// list of strings.
type GatewayRefs struct {
	Names []string
	// scalar: written as one string (the dump writes it back so).
	scalar bool
}

// DecodeNode takes either form.
func (r *GatewayRefs) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		r.Names, r.scalar = []string{s}, true
		return
	}
	if !n.Expect(decode.String, decode.List) {
		return
	}
	n.Decode(&r.Names)
}

// MarshalJSON writes the form the file used.
func (r GatewayRefs) MarshalJSON() ([]byte, error) {
	if r.scalar && len(r.Names) == 1 {
		return json.Marshal(r.Names[0])
	}
	if r.Names == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(r.Names)
}

// refPath is the path of the i-th reference, r being written at path.
func (r *GatewayRefs) refPath(path string, i int) string {
	if r.scalar {
		return path
	}
	return indexPath(path, i)
}

// AttachedRoute is an entry of the top-level `routes` (agentgateway's
// LocalAttachedRoute): an HTTP route, and the gateways it attaches to.
type AttachedRoute struct {
	// Gateways defaults to the gateway named "default".
	Gateways GatewayRefs `json:"gateways,omitzero"`
	Route
}

// AttachedTCPRoute is an entry of the top-level `tcpRoutes`
// (agentgateway's LocalAttachedTCPRoute).
type AttachedTCPRoute struct {
	// Gateways defaults to the gateway named "default".
	Gateways GatewayRefs `json:"gateways,omitzero"`
	TCPRoute
}

// SourcePath is the field path the listener was written at: def (its place
// under binds) for a listener of the binds, the gateway or gateway listener
// it was made of otherwise.
func (l *Listener) SourcePath(def string) string {
	if l.at != "" {
		return l.at
	}
	return def
}

// PoliciesPath is the field path of the listener's policies, the listener
// being at path (SourcePath): path.policies, or the gateway (listener)
// itself, whose policies are written beside its other fields.
func (l *Listener) PoliciesPath(path string) string {
	if l.policiesAt != "" {
		return l.policiesAt
	}
	return path + ".policies"
}

// SourcePath is the field path the route was written at: def (its place
// under its listener) unless it came from the top-level routes, the llm
// section or the mcp section.
func (r *Route) SourcePath(def string) string {
	if r.at != "" {
		return r.at
	}
	return def
}

// SourcePath is the field path the TCP route was written at: def unless it
// came from the top-level tcpRoutes.
func (r *TCPRoute) SourcePath(def string) string {
	if r.at != "" {
		return r.at
	}
	return def
}

// path is the field path of the i-th bind: binds[i], or what Parse made it of.
func (b *Bind) path(i int) string {
	if b.origin != "" {
		return b.origin
	}
	return indexPath("binds", i)
}

// listenerPath is the field path of the bind's li-th listener, the bind
// being the i-th.
func (b *Bind) listenerPath(bi, li int) string {
	return b.Listeners[li].SourcePath(indexPath("binds", bi) + "." + indexPath("listeners", li))
}

// MarshalJSON writes the file as it was written, for /config_dump: the
// binds Parse made of other sections are left out, those sections being
// written as they are.
func (f File) MarshalJSON() ([]byte, error) {
	type plain File // without this method
	p := plain(f)
	p.Binds = nil
	for _, b := range f.Binds {
		if b.origin == "" {
			p.Binds = append(p.Binds, b)
		}
	}
	return json.Marshal(p)
}

// listenerRef is a listener made of a gateway: f.Binds[bind].Listeners[listener].
type listenerRef struct {
	bind, listener int
	proto          string // HTTP, HTTPS, TCP or TLS
}

// http reports whether the listener takes routes (else tcpRoutes).
func (r listenerRef) http() bool { return r.proto == "HTTP" || r.proto == "HTTPS" }

// gatewayIndex finds the listeners of the gateways by reference.
type gatewayIndex struct {
	refs  map[string][]listenerRef // "gateway": every listener; "gateway/listener": one
	named map[string]bool          // gateways with named listeners (not the one-listener form)
	names []string                 // in file order
	// broken reports whether decoding failed at or under a path: a
	// reference to a gateway that failed is not said to be of the wrong
	// kind, nor are references that failed resolved, which could report
	// cascades of the first error.
	broken func(path string) bool
}

// normalizeGateways turns the gateways into binds and attaches the
// top-level routes and tcpRoutes, the llm section and the mcp section to
// their listeners. decodeErrs are the errors decoding found.
func (f *File) normalizeGateways(decodeErrs Errors) Errors {
	var errs Errors
	c := checker{errs: &errs}
	ix := &gatewayIndex{refs: map[string][]listenerRef{}, named: map[string]bool{}, broken: func(path string) bool {
		for _, e := range decodeErrs {
			if fe, ok := e.(*decode.FieldError); ok && (fe.Path == path || strings.HasPrefix(fe.Path, path+".") || strings.HasPrefix(fe.Path, path+"[")) {
				return true
			}
		}
		return false
	}}
	for _, ng := range f.Gateways {
		f.gatewayBind(c, ix, ng)
	}
	for i := range f.Routes {
		r := &f.Routes[i]
		rpath := indexPath("routes", i)
		for _, ref := range ix.attach(c, rpath+".gateways", &r.Gateways, true, "routes") {
			rc := r.Route
			rc.at = rpath
			l := &f.Binds[ref.bind].Listeners[ref.listener]
			l.Routes = append(l.Routes, rc)
		}
	}
	for i := range f.TCPRoutes {
		r := &f.TCPRoutes[i]
		rpath := indexPath("tcpRoutes", i)
		for _, ref := range ix.attach(c, rpath+".gateways", &r.Gateways, false, "tcpRoutes") {
			rc := r.TCPRoute
			rc.at = rpath
			l := &f.Binds[ref.bind].Listeners[ref.listener]
			l.TCPRoutes = append(l.TCPRoutes, rc)
		}
	}
	if l := f.LLM; l != nil && ix.broken("llm.gateways") {
		l.attached = true // meant for gateways: no port of its own
	} else if l != nil {
		refs, attached := ix.section(c, "llm", &l.Gateways, l.Port != nil)
		l.attached = attached
		for _, ref := range refs {
			lc := &f.Binds[ref.bind].Listeners[ref.listener]
			lc.Routes = append(lc.Routes, Route{
				Name:     LLMRouteName,
				Policies: l.Policies.RoutePolicies(),
				Backends: []RouteBackend{{Kind: BackendLLMModels, Weight: 1}},
				at:       "llm",
			})
		}
	}
	if f.MCP != nil && !ix.broken("mcp") {
		f.desugarMCP(c, ix)
	}
	// The references are where the user wrote them: locate them.
	for _, e := range errs {
		f.Position(e)
	}
	return errs
}

// gatewayBind adds the bind of one gateway, with its listeners.
func (f *File) gatewayBind(c checker, ix *gatewayIndex, ng NamedGateway) {
	g := &ng.Gateway
	path := decode.JoinKey("gateways", ng.Name)
	ix.names = append(ix.names, ng.Name)
	if g.Port == nil || ng.Name == "" || strings.Contains(ng.Name, "/") {
		// Refused while decoding; the name still resolves, to nothing.
		ix.refs[ng.Name] = nil
		return
	}
	bi := len(f.Binds)
	port := *g.Port
	b := Bind{Port: &port, origin: path}
	// add adds a listener, known by ref unless register is false (a
	// listener whose name is taken).
	add := func(ref string, register bool, l Listener, at string) {
		l.at, l.policiesAt = at, at
		l.gateway, l.inGateway = ng.Name, ng.Name
		if gw, name, ok := strings.Cut(ref, "/"); ok && gw == ng.Name {
			l.inGateway = name
		}
		if !contains(gatewayProtocols, l.Protocol) {
			l.Protocol = "" // refused while decoding
		}
		if l.Protocol == "" {
			l.Protocol = "HTTP"
			if l.TLS != nil {
				l.Protocol = "HTTPS"
			}
		}
		r := listenerRef{bind: bi, listener: len(b.Listeners), proto: l.Protocol}
		b.Listeners = append(b.Listeners, l)
		if !register {
			return
		}
		ix.refs[ng.Name] = append(ix.refs[ng.Name], r)
		if ref != ng.Name {
			ix.refs[ref] = []listenerRef{r}
		}
	}
	if len(g.Listeners) == 0 {
		ix.refs[ng.Name] = nil
		add(ng.Name, true, Listener{Name: ng.Name, Protocol: g.Protocol, TLS: g.TLS, Policies: listenerPolicies(g.ListenerPolicy)}, path)
	} else {
		ix.named[ng.Name] = true
		ix.refs[ng.Name] = nil
		seen := map[string]int{}
		tls, plain := -1, -1
		for i := range g.Listeners {
			gl := &g.Listeners[i]
			lpath := path + "." + indexPath("listeners", i)
			name := gl.Name
			if name == "" {
				name = fmt.Sprintf("listener%d", i)
			}
			prev, dup := seen[name]
			if dup {
				at := lpath + ".name"
				if gl.Name == "" {
					at = lpath
				}
				c.Errorf(at, "listener %q is already defined by listeners[%d]", name, prev)
			} else {
				seen[name] = i
			}
			ref := ng.Name + "/" + name
			add(ref, !dup, Listener{Name: ref, Hostname: gl.Hostname, Protocol: gl.Protocol, TLS: gl.TLS, Policies: listenerPolicies(gl.ListenerPolicy)}, lpath)
			// A gateway's listeners are all TLS or all plaintext, as in
			// agentgateway.
			switch b.Listeners[len(b.Listeners)-1].Protocol {
			case "HTTPS", "TLS":
				if plain >= 0 {
					c.Errorf(lpath+".protocol", "listeners[%d] is plaintext: a gateway's listeners are all TLS (HTTPS, TLS) or all plaintext (HTTP, TCP)", plain)
				}
				tls = max(tls, i)
			default:
				if tls >= 0 {
					c.Errorf(lpath+".protocol", "listeners[%d] is TLS: a gateway's listeners are all TLS (HTTPS, TLS) or all plaintext (HTTP, TCP)", tls)
				}
				plain = max(plain, i)
			}
		}
	}
	f.Binds = append(f.Binds, b)
}

// gatewayProtocols are the protocols of a gateway's listeners.
var gatewayProtocols = []string{"HTTP", "HTTPS", "TCP", "TLS"}

// listenerPolicies is a gateway (listener)'s policies, nil when none is set.
func listenerPolicies(p ListenerPolicy) *ListenerPolicy {
	if p == (ListenerPolicy{}) {
		return nil
	}
	return &p
}

// kindWords names a listener kind, and what the other kind takes, for
// messages.
func kindWords(http bool) (kind, other string) {
	if http {
		return "HTTP or HTTPS", "tcpRoutes"
	}
	return "TCP or TLS", "routes"
}

// attach resolves the references of routes (http) or tcpRoutes written at
// path to the listeners they attach to, each once; with none written, the
// gateway named "default". what names the section for messages.
func (ix *gatewayIndex) attach(c checker, path string, refs *GatewayRefs, http bool, what string) []listenerRef {
	if ix.broken(path) {
		return nil
	}
	kind, _ := kindWords(http)
	if len(refs.Names) == 0 {
		if _, ok := ix.refs["default"]; !ok {
			c.Errorf(path, "required: name the gateways %s attach to (there is no gateway named \"default\" to take them)", what)
			return nil
		}
		if !ix.has("default", http) && !ix.broken("gateways.default") {
			c.Errorf(path, "required: name the gateways %s attach to (the gateway named \"default\" has no %s listener)", what, kind)
			return nil
		}
		return ix.resolve(c, path, "default", http, what)
	}
	var out []listenerRef
	for i, name := range refs.Names {
		for _, r := range ix.resolve(c, refs.refPath(path, i), name, http, what) {
			dup := false
			for _, o := range out {
				dup = dup || o == r
			}
			if !dup {
				out = append(out, r)
			}
		}
	}
	return out
}

// has reports whether the gateway has a listener of the kind.
func (ix *gatewayIndex) has(gateway string, http bool) bool {
	for _, r := range ix.refs[gateway] {
		if r.http() == http {
			return true
		}
	}
	return false
}

// resolve finds the listeners of the kind one reference (at path) names.
func (ix *gatewayIndex) resolve(c checker, path, ref string, http bool, what string) []listenerRef {
	kind, other := kindWords(http)
	gw, listener, one := strings.Cut(ref, "/")
	if ref == "" || gw == "" || one && listener == "" {
		c.Errorf(path, "%q is not a gateway reference: write <gateway> or <gateway>/<listener>", ref)
		return nil
	}
	all, ok := ix.refs[gw]
	if !ok {
		hint := "there are no gateways"
		if len(ix.names) > 0 {
			hint = "gateways: " + strings.Join(ix.names, ", ")
		}
		c.Errorf(path, "no gateway named %q (%s)", gw, hint)
		return nil
	}
	gpath := decode.JoinKey("gateways", gw)
	if !one {
		var out []listenerRef
		for _, r := range all {
			if r.http() == http {
				out = append(out, r)
			}
		}
		if len(out) == 0 && len(all) > 0 && !ix.broken(gpath) {
			c.Errorf(path, "gateway %q has no %s listener (%s attach to %s listeners; the others take %s)", gw, kind, what, kind, other)
		}
		return out
	}
	if !ix.named[gw] {
		if len(all) > 0 {
			c.Errorf(path, "gateway %q has no named listeners (its port, protocol and tls make one listener): attach to %q", gw, gw)
		}
		return nil
	}
	rs, ok := ix.refs[ref]
	if !ok {
		if !ix.broken(gpath) {
			c.Errorf(path, "gateway %q has no listener named %q", gw, listener)
		}
		return nil
	}
	if rs[0].http() != http {
		if !ix.broken(gpath) {
			c.Errorf(path, "listener %q is %s %s listener, which takes %s: %s attach to %s listeners", ref, article(rs[0].proto), rs[0].proto, other, what, kind)
		}
		return nil
	}
	return rs
}

// article is the indefinite article of a protocol's name.
func article(proto string) string {
	if strings.HasPrefix(proto, "H") {
		return "an"
	}
	return "a"
}

// section resolves the gateways a section (llm, mcp) at path attaches its
// routes to: those it names, or, when it names none and has no port of its
// own, the gateway named "default" if that one has an HTTP listener (as in
// agentgateway). attached says the section is served on gateway listeners
// rather than on its own port.
func (ix *gatewayIndex) section(c checker, path string, refs *GatewayRefs, hasPort bool) (out []listenerRef, attached bool) {
	if len(refs.Names) > 0 {
		if hasPort {
			c.Errorf(path+".gateways", "not allowed together with %s.port: the routes go to the gateways' listeners, or to a port of their own", path)
			return nil, false
		}
		return ix.attach(c, path+".gateways", refs, true, "the "+path+" routes"), true
	}
	if hasPort || !ix.has("default", true) {
		return nil, false
	}
	return ix.resolve(c, path+".gateways", "default", true, "the "+path+" routes"), true
}
