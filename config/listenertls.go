package config

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// ListenerTLS is `listeners[].tls` (agentgateway's LocalTLSServerConfig):
// the certificate an HTTPS listener, or a TLS listener that terminates,
// presents, and how it checks clients.
type ListenerTLS struct {
	// Mode is static (cert/key are the leaf) or dynamicCa (cert/key are a
	// CA that signs a leaf for each server name asked for).
	Mode string `json:"mode,omitempty" cfg:"enum=static|dynamicCa"`
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
	// Root is a PEM file of the CAs client certificates must chain to;
	// set, every client must present one (mTLS).
	Root         string      `json:"root,omitempty"`
	Spiffe       Unsupported `json:"spiffe,omitzero"`
	CipherSuites []string    `json:"cipherSuites,omitempty" cfg:"maxItems=16"`
	// Both spellings of agentgateway's schema are accepted; only one of
	// each pair may be set.
	MinTLSVersion     string   `json:"minTLSVersion,omitempty" cfg:"enum=TLS_V1_0|TLS_V1_1|TLS_V1_2|TLS_V1_3"`
	MinTlsVersion     string   `json:"minTlsVersion,omitempty" cfg:"enum=TLS_V1_0|TLS_V1_1|TLS_V1_2|TLS_V1_3"`
	MaxTLSVersion     string   `json:"maxTLSVersion,omitempty" cfg:"enum=TLS_V1_0|TLS_V1_1|TLS_V1_2|TLS_V1_3"`
	MaxTlsVersion     string   `json:"maxTlsVersion,omitempty" cfg:"enum=TLS_V1_0|TLS_V1_1|TLS_V1_2|TLS_V1_3"`
	KeyExchangeGroups []string `json:"keyExchangeGroups,omitempty" cfg:"maxItems=16"`
}

// Validate checks the certificate source and the version and suite names.
func (t *ListenerTLS) Validate(v *decode.Validation) {
	if t.Cert == "" {
		v.Errorf("cert", "required")
	}
	if t.Key == "" {
		v.Errorf("key", "required")
	}
	if t.MinTLSVersion != "" && t.MinTlsVersion != "" {
		v.Errorf("minTlsVersion", "only one of minTLSVersion and minTlsVersion may be set")
	}
	if t.MaxTLSVersion != "" && t.MaxTlsVersion != "" {
		v.Errorf("maxTlsVersion", "only one of maxTLSVersion and maxTlsVersion may be set")
	}
	for _, f := range []struct{ name, value string }{
		{"minTLSVersion", t.MinTLSVersion}, {"minTlsVersion", t.MinTlsVersion},
		{"maxTLSVersion", t.MaxTLSVersion}, {"maxTlsVersion", t.MaxTlsVersion},
	} {
		if f.value == "TLS_V1_0" || f.value == "TLS_V1_1" {
			v.Errorf(f.name, "%s is not allowed: only TLS 1.2 and 1.3 are supported", f.value)
		}
	}
	if lo, hi := t.MinVersion(), t.MaxVersion(); lo != "" && hi != "" && lo > hi {
		v.Errorf("maxTLSVersion", "%s is below the minimum %s", hi, lo)
	}
	checkCipherSuites(v, "cipherSuites", t.CipherSuites)
	checkKeyExchangeGroups(v, "keyExchangeGroups", t.KeyExchangeGroups)
}

// MinVersion is the minimum version set by either spelling ("" when unset).
func (t *ListenerTLS) MinVersion() string { return t.MinTLSVersion + t.MinTlsVersion }

// MaxVersion is the maximum version set by either spelling ("" when unset).
func (t *ListenerTLS) MaxVersion() string { return t.MaxTLSVersion + t.MaxTlsVersion }

// CipherSuiteNames are the cipher suites a TLS listener may be limited to
// (the spec's CipherSuite): the first three are TLS 1.3's.
var CipherSuiteNames = []string{
	"TLS13_AES_256_GCM_SHA384",
	"TLS13_AES_128_GCM_SHA256",
	"TLS13_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}

// KeyExchangeGroupNames are the key exchange groups TLS may be limited to.
var KeyExchangeGroupNames = []string{"X25519", "P-256", "P-384", "X25519_MLKEM768"}

func checkCipherSuites(v *decode.Validation, path string, suites []string) {
	checkNames(v, path, suites, CipherSuiteNames, "cipher suite")
}

func checkKeyExchangeGroups(v *decode.Validation, path string, groups []string) {
	checkNames(v, path, groups, KeyExchangeGroupNames, "key exchange group")
}

// checkNames checks that each item of list is one of known, once.
func checkNames(v *decode.Validation, path string, list, known []string, what string) {
	seen := map[string]bool{}
	for i, s := range list {
		p := indexPath(path, i)
		switch {
		case !contains(known, s):
			v.Errorf(p, "unknown %s %q: must be one of: %s", what, s, strings.Join(known, ", "))
		case seen[s]:
			v.Errorf(p, "%s %q is listed twice", what, s)
		}
		seen[s] = true
	}
}

// FrontendTLS is `frontendPolicies.tls`: how every TLS listener handshakes.
type FrontendTLS struct {
	// HandshakeTimeout bounds reading the ClientHello and completing the
	// handshake (default 15s).
	HandshakeTimeout *Duration `json:"handshakeTimeout,omitempty"`
	// ALPN is the protocols offered to clients, in preference order. Each
	// item is a string or, as agentgateway's schema writes it, a list of
	// byte values.
	ALPN              []ALPNProtocol `json:"alpn,omitempty" cfg:"minItems=1,maxItems=16"`
	MinVersion        string         `json:"minVersion,omitempty" cfg:"enum=TLS_V1_0|TLS_V1_1|TLS_V1_2|TLS_V1_3"`
	MaxVersion        string         `json:"maxVersion,omitempty" cfg:"enum=TLS_V1_0|TLS_V1_1|TLS_V1_2|TLS_V1_3"`
	CipherSuites      []string       `json:"cipherSuites,omitempty" cfg:"maxItems=16"`
	KeyExchangeGroups []string       `json:"keyExchangeGroups,omitempty" cfg:"maxItems=16"`
}

// Validate checks versions, suites and groups.
func (t *FrontendTLS) Validate(v *decode.Validation) {
	for _, f := range []struct{ name, value string }{{"minVersion", t.MinVersion}, {"maxVersion", t.MaxVersion}} {
		if f.value == "TLS_V1_0" || f.value == "TLS_V1_1" {
			v.Errorf(f.name, "%s is not allowed: only TLS 1.2 and 1.3 are supported", f.value)
		}
	}
	if t.MinVersion != "" && t.MaxVersion != "" && t.MinVersion > t.MaxVersion {
		v.Errorf("maxVersion", "%s is below the minimum %s", t.MaxVersion, t.MinVersion)
	}
	checkCipherSuites(v, "cipherSuites", t.CipherSuites)
	checkKeyExchangeGroups(v, "keyExchangeGroups", t.KeyExchangeGroups)
	for i, p := range t.ALPN {
		if p == "" {
			v.Errorf(indexPath("alpn", i), "must not be empty")
		} else if len(p) > 64 {
			v.Errorf(indexPath("alpn", i), "must be at most 64 bytes")
		}
	}
}

// ALPNProtocol is one ALPN protocol name: a string ("h2") or a list of its
// byte values ([104, 50]).
type ALPNProtocol string

// DecodeNode takes either form.
func (p *ALPNProtocol) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		*p = ALPNProtocol(s)
		return
	}
	if !n.Expect(decode.String, decode.List) {
		return
	}
	var bs []int
	n.Decode(&bs)
	b := make([]byte, 0, len(bs))
	for i, c := range bs {
		if c < 0 || c > 255 {
			n.ErrorfAt(indexPath("", i), "must be a byte (0..255)")
			return
		}
		b = append(b, byte(c))
	}
	*p = ALPNProtocol(b)
}

// FrontendTCP is `frontendPolicies.tcp`: TCP keepalive on client connections.
type FrontendTCP struct {
	Keepalives *Keepalive `json:"keepalives" cfg:"required"`
}

// TCPRoute is one route of a TCP or TLS listener (agentgateway's
// LocalTCPRoute): the backends its connections are forwarded to, chosen by
// SNI on a TLS listener.
type TCPRoute struct {
	Name      string            `json:"name,omitempty"`
	Namespace string            `json:"namespace,omitempty"`
	RuleName  string            `json:"ruleName,omitempty"`
	Hostnames []string          `json:"hostnames,omitempty"`
	Policies  *TCPRoutePolicies `json:"policies,omitempty"`
	Backends  []TCPRouteBackend `json:"backends" cfg:"required,minItems=1"`

	// at is the path of the top-level tcpRoute Parse attached to the
	// listener (SourcePath); "" for one written under its listener.
	at string
}

// TCPRoutePolicies is `tcpRoutes[].policies`.
type TCPRoutePolicies struct {
	// BackendTLS originates TLS to the route's backends (a backend's own
	// replaces it whole).
	BackendTLS *BackendTLS `json:"backendTLS,omitempty"`
}

// TCPBackendPolicies is `tcpRoutes[].backends[].policies`.
type TCPBackendPolicies struct {
	BackendTLS    *BackendTLS `json:"backendTLS,omitempty"`
	BackendTunnel Unsupported `json:"backendTunnel,omitzero"`
}

// TCPRouteBackend is one backend of a TCP route: a host, a named top-level
// backend (a host backend), or dynamic (the destination is the SNI's host
// on the listener's port).
type TCPRouteBackend struct {
	Kind     BackendKind
	Host     string
	Backend  string
	Weight   int
	Policies *TCPBackendPolicies
}

var tcpRouteBackendKinds = unionKinds{served: []string{"host", "backend", "dynamic"}, later: []string{"service"}}

// DecodeNode decodes the union.
func (b *TCPRouteBackend) DecodeNode(n *decode.Node) {
	b.Weight = 1
	decodeBackendUnion(n, tcpRouteBackendKinds, []string{"weight", "policies"}, func(key string, v *decode.Node) {
		if decodeSimpleBackendKey(key, v, &b.Kind, &b.Host, &b.Backend, &b.Weight) {
			return
		}
		if key == "policies" {
			v.Decode(&b.Policies)
			return
		}
		v.Errorf("backend kind %q is not supported yet", key)
	})
}

// MarshalJSON writes the backend back in file form, for /config_dump.
func (b TCPRouteBackend) MarshalJSON() ([]byte, error) {
	m := map[string]any{"weight": b.Weight}
	addBackendKind(m, b.Kind, b.Host, b.Backend)
	if b.Policies != nil {
		m["policies"] = b.Policies
	}
	return json.Marshal(m)
}

// ListenerProtocol is a listener's protocol with its default (HTTP).
func (l *Listener) ListenerProtocol() string {
	if l.Protocol == "" {
		return "HTTP"
	}
	return l.Protocol
}

// checkListenerProtocol checks what a listener of its protocol may hold:
// HTTP routes on HTTP and HTTPS, TCP routes on TCP and TLS, a tls block on
// HTTPS (required) and TLS (termination).
func checkListenerProtocol(v checker, lpath string, l *Listener, backends map[string]int) {
	proto := l.ListenerProtocol()
	switch proto {
	case "HBONE":
		v.Errorf(lpath+".protocol", "HBONE listeners are not supported yet")
		return
	case "HTTPS":
		if l.TLS == nil {
			v.Errorf(lpath+".tls", "required: an HTTPS listener needs a certificate (tls.cert and tls.key)")
		}
	case "HTTP", "TCP":
		if l.TLS != nil {
			v.Errorf(lpath+".tls", "a %s listener has no TLS: use protocol HTTPS (or TLS) to terminate TLS", proto)
		}
	}
	switch proto {
	case "HTTP", "HTTPS":
		if len(l.TCPRoutes) > 0 {
			v.Errorf(lpath+".tcpRoutes", "an %s listener takes routes, not tcpRoutes (tcpRoutes need protocol TCP or TLS)", proto)
		}
	case "TCP", "TLS":
		if len(l.Routes) > 0 {
			v.Errorf(lpath+".routes", "a %s listener forwards connections: use tcpRoutes (routes need protocol HTTP or HTTPS)", proto)
		}
	}
	for ri, r := range l.TCPRoutes {
		rpath := r.SourcePath(lpath + "." + indexPath("tcpRoutes", ri))
		for hi, h := range r.Hostnames {
			if proto == "TCP" {
				v.Errorf(rpath+".hostnames", "a TCP listener sees no server name: hostnames need protocol TLS")
				break
			}
			if err := CheckHostname(h); err != nil {
				v.Errorf(rpath+"."+indexPath("hostnames", hi), "invalid hostname %q: %v", h, err)
			}
		}
		for bi, b := range r.Backends {
			bpath := rpath + "." + indexPath("backends", bi)
			switch b.Kind {
			case BackendRef:
				if _, ok := backends[b.Backend]; !ok {
					v.Errorf(bpath+".backend", "no backend named %q in the top-level backends", b.Backend)
				}
			case BackendDynamic:
				if proto != "TLS" {
					v.Errorf(bpath+".dynamic", "a dynamic TCP backend takes its destination from TLS SNI: it needs a TLS listener")
				}
			}
		}
	}
}

// checkBindProtocols checks that a bind's listeners can be told apart: a
// connection to a TCP listener carries nothing to choose by, so a TCP
// listener is alone on its port; TLS listeners are chosen by SNI and HTTP
// ones by Host, so no two of a kind share a hostname (compared in any case,
// none being "*"): the second would never be chosen. Plain HTTP and TLS
// listeners may share a port: each connection's first byte says which it
// is.
func checkBindProtocols(v checker, ls []Listener, lpaths func(int) string) {
	tcp, other := -1, -1
	hosts := map[[2]string]int{} // {HTTP or TLS, hostname} -> listener
	for i, l := range ls {
		lpath := lpaths(i)
		kind := l.ListenerProtocol()
		switch kind {
		case "TCP":
			if tcp >= 0 {
				v.Errorf(lpath+".protocol", "listeners[%d] is already a TCP listener on this port: TCP connections carry no name to choose a listener by", tcp)
				continue
			}
			tcp = i
			continue
		case "HTTPS", "TLS":
			kind = "TLS"
		}
		other = i
		if kind != "TLS" && kind != "HTTP" {
			continue
		}
		h := strings.ToLower(l.Hostname)
		what := strconv.Quote(h)
		if h == "" || h == "*" {
			h, what = "*", "every hostname"
		}
		if prev, dup := hosts[[2]string{kind, h}]; dup {
			v.Errorf(lpath+".hostname", "%s already serves %s for %s on this port: this listener would never be chosen", lpaths(prev), kind, what)
			continue
		}
		hosts[[2]string{kind, h}] = i
	}
	if tcp >= 0 && other >= 0 {
		v.Errorf(lpaths(tcp)+".protocol", "a TCP listener must be alone on its port (listeners[%d] shares it)", other)
	}
}

// FilesRead lists the files the configuration reads when it is applied
// besides itself, wherever they are, in file order without repeats: the
// running gateway reloads when one of them changes, so that a rotated
// certificate or a revoked credential takes effect at once. They are the
// certificates, keys and CA bundles of listeners and of backendTLS, the
// client credentials (apiKey key files, and the key files their entries
// name; basicAuth htpasswd files; jwtAuth and mcpAuthentication key set
// files) and the model price catalogs. An apiKey key file is read (up to
// MaxAPIKeyFile) for the key files its entries name; one that cannot be
// read or parsed adds none (applying the config reports it).
//
// The backend credentials the gateway sends (backendAuth keys, an LLM
// provider's apiKey, a GCP credential) are left out: they are read where
// they are used and again when their file changes, keeping the value read
// before while a file being replaced cannot be read, with no reload.
func (f *File) FilesRead() []string {
	var out []string
	seen := map[string]bool{}
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	walkValues(reflect.ValueOf(f), func(v reflect.Value) {
		switch t := v.Interface().(type) {
		case *ListenerTLS:
			add(t.Cert, t.Key, t.Root)
		case *BackendTLS:
			add(t.Cert, t.Key, t.Root)
		case *APIKeyAuth:
			add(t.Keys.File)
			add(entryKeyFiles(t.Keys.List)...)
			if t.Keys.File != "" {
				add(apiKeyFileKeyFiles(t.Keys.File)...)
			}
		case *BasicAuth:
			add(t.Htpasswd.File)
		case *JWKSource:
			if t.Kind == JWKSFile {
				add(t.File)
			}
		case *Settings:
			for _, s := range t.ModelCatalog {
				add(s.File)
			}
		}
	})
	return out
}

// entryKeyFiles are the key files apiKey entries name.
func entryKeyFiles(entries []APIKeyEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Key != nil && e.Key.IsFile() {
			out = append(out, e.Key.File)
		}
	}
	return out
}

// apiKeyFileKeyFiles are the key files the entries of an apiKey key file
// name; none when it cannot be read or parsed.
func apiKeyFileKeyFiles(path string) []string {
	fh, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxAPIKeyFile+1))
	if err != nil || len(data) > MaxAPIKeyFile {
		return nil
	}
	entries, err := ParseAPIKeyFile(data)
	if err != nil {
		return nil
	}
	return entryKeyFiles(entries)
}

// walkValues calls visit for every non-nil pointer reachable from v
// through struct fields, pointers, slices and maps (map values in key
// order).
func walkValues(v reflect.Value, visit func(reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		visit(v)
		walkValues(v.Elem(), visit)
	case reflect.Interface:
		if !v.IsNil() {
			walkValues(v.Elem(), visit)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkValues(v.Field(i), visit)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkValues(v.Index(i), visit)
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			walkValues(v.MapIndex(k), visit)
		}
	}
}

// checkConnectBind checks a CONNECT bind (tunnelProtocol: connect): its
// connections are CONNECT requests, in the clear or inside TLS its HTTPS
// listeners terminate; what a tunnel carries is served by the bind of its
// destination port.
func checkConnectBind(v checker, b *Bind, lpaths func(int) string) {
	if b.TunnelProtocol != "connect" {
		return
	}
	for i, l := range b.Listeners {
		lpath := lpaths(i)
		if l.ListenerProtocol() != "HTTPS" {
			v.Errorf(lpath+".protocol", "a CONNECT bind (tunnelProtocol: connect) serves CONNECT requests only: its listeners may only be HTTPS ones terminating TLS around them")
			continue
		}
		if len(l.Routes) > 0 {
			v.Errorf(lpath+".routes", "a CONNECT bind has no routes: tunnels go to the bind of their destination port")
		}
	}
}
