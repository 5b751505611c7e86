package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

// TestGatewayTypesDecodable: the gateway types decode themselves
// (Gateways.DecodeNode), so TestTypesDecodable does not reach them.
func TestGatewayTypesDecodable(t *testing.T) {
	for _, v := range []any{&Gateway{}, &AttachedRoute{}, &AttachedTCPRoute{}} {
		if err := decode.CheckType(v); err != nil {
			t.Error(err)
		}
	}
}

// TestGatewaysErrors: mistakes in the gateways, routes and tcpRoutes shapes
// are reported at the path the user wrote, each once.
func TestGatewaysErrors(t *testing.T) {
	const web = "gateways:\n  web: {port: 80}\n"
	const secure = "gateways:\n  secure:\n    port: 443\n    listeners:\n    - {name: api, hostname: api.com, protocol: HTTPS, tls: {cert: c.pem, key: k.pem}}\n    - {name: egress, protocol: TLS}\n"
	tests := []struct {
		desc string
		yaml string
		want []string // every error, in order
	}{
		{"port required", "gateways: {web: {}}\n", []string{"gateways.web.port: required"}},
		{"not a map", "gateways: [web]\n", []string{"gateways: expected map, got list"}},
		{"null gateway", "gateways: {web: null}\n", []string{"gateways.web: must not be null"}},
		{"slash in a name", "gateways: {a/b: {port: 1}}\n", []string{`gateways["a/b"]: a gateway's name cannot hold "/"`}},
		{"unknown field", "gateways: {web: {port: 1, hostname: a.com}}\n", []string{`gateways.web.hostname: unknown field "hostname"`}},
		{"oidc refused", "gateways: {web: {port: 1, oidc: {}}}\n", []string{"gateways.web.oidc: not supported yet"}},
		{"protocol", "gateways: {web: {port: 1, protocol: HBONE}}\n", []string{"gateways.web.protocol: must be one of: HTTP, HTTPS, TCP, TLS"}},
		{"only the port beside listeners", "gateways:\n  web:\n    port: 1\n    protocol: HTTP\n    tls: {cert: c, key: k}\n    jwtAuth: {issuer: i, jwks: {file: k}}\n    listeners: [{name: a}]\n", []string{
			"gateways.web.protocol: not allowed together with listeners: set each listener's protocol",
			"gateways.web.tls: not allowed together with listeners: set each listener's tls",
			"gateways.web.jwtAuth: not allowed together with listeners: set it on each listener",
		}},
		{"listener certificate", "gateways:\n  secure:\n    port: 443\n    listeners:\n    - {tls: {key: k.pem}}\n", []string{"gateways.secure.listeners[0].tls.cert: required"}},
		{"flat certificate", "gateways: {secure: {port: 443, tls: {cert: c.pem}}}\n", []string{"gateways.secure.tls.key: required"}},
		{"HTTPS needs tls", "gateways: {secure: {port: 443, protocol: HTTPS}}\n", []string{"gateways.secure.tls: required: an HTTPS listener needs a certificate"}},
		{"HTTP has no tls", "gateways: {web: {port: 80, protocol: HTTP, tls: {cert: c, key: k}}}\n", []string{"gateways.web.tls: a HTTP listener has no TLS"}},
		{"TCP has no tls", "gateways:\n  t:\n    port: 9\n    listeners: [{protocol: TCP, tls: {cert: c, key: k}}]\n", []string{"gateways.t.listeners[0].tls: a TCP listener has no TLS"}},
		{"listener hostname", "gateways:\n  web:\n    port: 80\n    listeners: [{hostname: 'bad host'}]\n", []string{`gateways.web.listeners[0].hostname: invalid hostname "bad host"`}},
		{"listener names", "gateways:\n  web:\n    port: 80\n    listeners: [{name: a}, {name: a, hostname: b.com}, {hostname: c.com}, {name: listener2, hostname: d.com}]\n", []string{
			`gateways.web.listeners[1].name: listener "a" is already defined by listeners[0]`,
			`gateways.web.listeners[3].name: listener "listener2" is already defined by listeners[2]`,
		}},
		{"TLS and plaintext", "gateways:\n  mixed:\n    port: 80\n    listeners: [{name: a}, {name: b, protocol: TLS}]\n", []string{
			"gateways.mixed.listeners[1].protocol: listeners[0] is plaintext: a gateway's listeners are all TLS (HTTPS, TLS) or all plaintext (HTTP, TCP)",
		}},
		{"TCP alone", "gateways:\n  t:\n    port: 9\n    listeners: [{name: a, protocol: TCP}, {name: b}]\n", []string{
			"gateways.t.listeners[0].protocol: a TCP listener must be alone on its port (listeners[1] shares it)",
		}},
		{"port of a bind", "binds: [{port: 80, listeners: []}]\n" + web, []string{"gateways.web.port: port 80 is already used by binds[0]"}},
		{"two gateways on one port", "gateways: {a: {port: 80}, b: {port: 80}}\n", []string{"gateways.b.port: port 80 is already used by gateways.a"}},
		{"missing gateway", web + "routes:\n- {gateways: web, backends: [{host: 'a:1'}]}\n- {gateways: web, backends: [{host: 'a:1'}]}\n- {gateways: [web, x], backends: [{host: 'a:1'}]}\n", []string{
			`routes[2].gateways[1]: no gateway named "x" (gateways: web)`,
		}},
		{"missing listener", secure + "routes:\n- {gateways: secure/nope, backends: [{host: 'a:1'}]}\n", []string{`routes[0].gateways: gateway "secure" has no listener named "nope"`}},
		{"listener of a flat gateway", web + "routes:\n- {gateways: web/x, backends: [{host: 'a:1'}]}\n", []string{`routes[0].gateways: gateway "web" has no named listeners (its port, protocol and tls make one listener): attach to "web"`}},
		{"not a reference", web + "routes:\n- {gateways: ['', web/, /x], backends: [{host: 'a:1'}]}\n", []string{
			`routes[0].gateways[0]: "" is not a gateway reference: write <gateway> or <gateway>/<listener>`,
			`routes[0].gateways[1]: "web/" is not a gateway reference`,
			`routes[0].gateways[2]: "/x" is not a gateway reference`,
		}},
		{"no default gateway", web + "routes:\n- backends: [{host: 'a:1'}]\n", []string{`routes[0].gateways: required: name the gateways routes attach to (there is no gateway named "default" to take them)`}},
		{"default gateway of the other kind", "gateways: {default: {port: 9, protocol: TCP}}\nroutes:\n- backends: [{host: 'a:1'}]\n", []string{`routes[0].gateways: required: name the gateways routes attach to (the gateway named "default" has no HTTP or HTTPS listener)`}},
		{"tcpRoute on an HTTP listener", web + "tcpRoutes:\n- {gateways: web, backends: [{host: 'a:1'}]}\n", []string{"tcpRoutes[0].gateways: gateway \"web\" has no TCP or TLS listener (tcpRoutes attach to TCP or TLS listeners; the others take routes)"}},
		{"tcpRoute on an HTTPS listener", secure + "tcpRoutes:\n- {gateways: secure/api, backends: [{host: 'a:1'}]}\n", []string{`tcpRoutes[0].gateways: listener "secure/api" is an HTTPS listener, which takes routes: tcpRoutes attach to TCP or TLS listeners`}},
		{"route on a TLS listener", secure + "routes:\n- {gateways: secure/egress, backends: [{host: 'a:1'}]}\n", []string{`routes[0].gateways: listener "secure/egress" is a TLS listener, which takes tcpRoutes: routes attach to HTTP or HTTPS listeners`}},
		{"a gateway's listeners of the kind", secure + "routes:\n- {gateways: secure, backends: [{host: 'a:1'}]}\ntcpRoutes:\n- {gateways: secure, backends: [{host: 'a:1'}]}\n", nil},
		{"tcpRoute backend", secure + "tcpRoutes:\n- {gateways: secure/egress, backends: [{host: nope}]}\n", []string{"tcpRoutes[0].backends[0].host: must be host:port"}},
		{"route hostname, attached twice", "gateways:\n  a: {port: 1}\n  b: {port: 2}\nroutes:\n- {gateways: [a, b], hostnames: ['bad host'], backends: [{backend: nope}]}\n", []string{
			`routes[0].hostnames[0]: invalid hostname "bad host"`,
			`routes[0].backends[0].backend: no backend named "nope" in the top-level backends`,
		}},
		{"TCP listener sees no name", "gateways: {t: {port: 9, protocol: TCP}}\ntcpRoutes:\n- {gateways: t, hostnames: [a.com], backends: [{host: 'a:1'}]}\n", []string{"tcpRoutes[0].hostnames: a TCP listener sees no server name"}},
		{"dynamic needs TLS", "gateways: {t: {port: 9, protocol: TCP}}\ntcpRoutes:\n- {gateways: t, backends: [{dynamic: {}}]}\n", []string{"tcpRoutes[0].backends[0].dynamic: a dynamic TCP backend takes its destination from TLS SNI"}},
		{"route of a broken gateway: no cascade", "gateways: {web: {port: 80, protocol: HTTPX}}\nroutes:\n- {gateways: web, backends: [{host: 'a:1'}]}\n", []string{"gateways.web.protocol: must be one of"}},
		{"broken references: no cascade", web + "routes:\n- {gateways: 5, backends: [{host: 'a:1'}]}\n", []string{"routes[0].gateways: expected string or list, got integer 5"}},
		{"mcp on a TCP listener", "gateways: {t: {port: 9, protocol: TCP}}\nmcp: {gateways: t, targets: [{name: a, stdio: {cmd: x}}]}\n", []string{`mcp.gateways: gateway "t" has no HTTP or HTTPS listener (the mcp routes attach to HTTP or HTTPS listeners; the others take tcpRoutes)`}},
		{"llm on a TLS listener", secure + "llm: {gateways: [secure/egress], models: [{name: a, provider: openAI}]}\n", []string{`llm.gateways[0]: listener "secure/egress" is a TLS listener, which takes tcpRoutes: the llm routes attach to HTTP or HTTPS listeners`}},
		{"mcp port beside a gateway on it", "gateways: {web: {port: 3000, protocol: TCP}}\nmcp: {targets: [{name: a, stdio: {cmd: x}}]}\n", []string{"mcp.port: port 3000 is already used by gateways.web; attach the mcp section to it with mcp.gateways instead"}},
		{"targeted policy at a gateway listener", secure + "routes:\n- {gateways: secure/api, backends: [{host: 'a:1'}]}\npolicies:\n- name: {name: p, namespace: default}\n  target: {gateway: {gatewayName: secure, gatewayNamespace: default, listenerName: api}}\n  policy: {cors: {allowOrigins: ['*']}}\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), noEnv)
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors:\n%s\nwant %d:\n%s", strings.Join(got, "\n"), len(tc.want), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestGatewaysNormalized: what Parse makes of the newer shapes, for the
// rest of the gateway: binds, listeners named as agentgateway names them
// (the gateway, or gateway/listener), routes attached in file order, and
// each with the path it was written at.
func TestGatewaysNormalized(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "gateways.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := normalizedSummary(f)
	golden := filepath.Join("testdata", "gateways.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("normalized form differs from %s (run with -update to accept):\n got:\n%s\nwant:\n%s", golden, got, want)
	}
	if !f.LLM.Attached() {
		t.Error("the llm section is not attached")
	}
	// The gateways' certificates and credential files are watched like
	// the binds'.
	if got := strings.Join(f.FilesRead(), " "); got != "jwks.json cert.pem key.pem keys.yaml" {
		t.Errorf("files read: %s", got)
	}
	// Every path a normalized listener or route names is in the file.
	for bi := range f.Binds {
		b := &f.Binds[bi]
		for li := range b.Listeners {
			l := &b.Listeners[li]
			paths := []string{b.listenerPath(bi, li)}
			for ri := range l.Routes {
				paths = append(paths, l.Routes[ri].SourcePath(""))
			}
			for ri := range l.TCPRoutes {
				paths = append(paths, l.TCPRoutes[ri].SourcePath(""))
			}
			for _, p := range paths {
				if p == "" {
					continue
				}
				if line, _ := f.Locate(p); line == 0 {
					t.Errorf("%s is not in the file", p)
				}
			}
		}
	}
}

// normalizedSummary writes the binds Parse made, one line a listener,
// route and TCP route, with the paths errors would name.
func normalizedSummary(f *File) string {
	var b strings.Builder
	for bi := range f.Binds {
		bd := &f.Binds[bi]
		fmt.Fprintf(&b, "bind %d (%s)\n", *bd.Port, bd.path(bi))
		for li := range bd.Listeners {
			l := &bd.Listeners[li]
			lpath := bd.listenerPath(bi, li)
			var kinds []string
			if l.Policies != nil {
				var set PolicySet
				set.Attach(LevelListener, l.PoliciesPath(lpath), l.Policies)
				for _, k := range set.Kinds() {
					kinds = append(kinds, set.Path(k))
				}
			}
			fmt.Fprintf(&b, "  listener %q %s host=%q tls=%v at %s policies=%v\n", l.Name, l.ListenerProtocol(), l.Hostname, l.TLS != nil, lpath, kinds)
			for ri := range l.Routes {
				r := &l.Routes[ri]
				var backends []string
				for _, rb := range r.Backends {
					backends = append(backends, fmt.Sprintf("%d", rb.Kind))
				}
				var matches []string
				for _, m := range r.Matches {
					if m.Path != nil {
						matches = append(matches, m.Path.Value)
					}
				}
				fmt.Fprintf(&b, "    route %q at %s matches=%v backends=%v policies=%v\n", r.Name, r.SourcePath(lpath+"."+indexPath("routes", ri)), matches, backends, r.Policies != nil)
			}
			for ri := range l.TCPRoutes {
				r := &l.TCPRoutes[ri]
				fmt.Fprintf(&b, "    tcpRoute %q at %s hostnames=%v\n", r.Name, r.SourcePath(lpath+"."+indexPath("tcpRoutes", ri)), r.Hostnames)
			}
		}
	}
	return b.String()
}

// TestGatewaysDefault: without gateways, top-level routes, the llm section
// and the mcp section attach to the gateway named "default" (the sections
// only when they set no port), as in agentgateway.
func TestGatewaysDefault(t *testing.T) {
	f, err := Parse([]byte(`
gateways:
  default: {port: 3000}
routes:
- name: app
  backends: [{host: 'a:1'}]
llm:
  models: [{name: a, provider: openAI}]
mcp:
  targets: [{name: t, stdio: {cmd: x}}]
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Binds) != 1 || !f.LLM.Attached() || !f.MCP.attached {
		t.Fatalf("binds %d, llm attached %v, mcp attached %v; want everything on the default gateway", len(f.Binds), f.LLM.Attached(), f.MCP.attached)
	}
	var names []string
	for _, r := range f.Binds[0].Listeners[0].Routes {
		names = append(names, r.Namespace+"/"+r.Name+"@"+r.SourcePath(""))
	}
	if got := strings.Join(names, " "); got != "/app@routes[0] /llm@llm internal/default@mcp" {
		t.Errorf("routes of the default gateway: %s", got)
	}

	f, err = Parse([]byte(`
gateways:
  default: {port: 8080}
llm:
  port: 4000
  models: [{name: a, provider: openAI}]
mcp:
  port: 3000
  targets: [{name: t, stdio: {cmd: x}}]
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, b := range f.Binds {
		ports = append(ports, fmt.Sprintf("%d:%s", *b.Port, b.origin))
	}
	if f.LLM.Attached() || f.MCP.attached || strings.Join(ports, " ") != "8080:gateways.default 3000:mcp" {
		t.Errorf("with ports: binds %v, llm attached %v, mcp attached %v; want the sections on their own ports", ports, f.LLM.Attached(), f.MCP.attached)
	}
}

// TestPolicyTargetErrorsGolden: a gateway target names one gateway of the
// file (an entry of gateways, or "default", the listeners of binds) and a
// listener of it by its own name; what the file does not hold is an error
// at the field (testdata/targets_invalid.*), never a policy on every
// gateway.
func TestPolicyTargetErrorsGolden(t *testing.T) {
	checkErrorsGolden(t, "targets_invalid.yaml", "targets_invalid.golden")
}
