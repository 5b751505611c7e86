package server

import (
	"os"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// TestGatewaysAgentgatewayExamples: agentgateway's example files that use
// the gateways shapes, examples/mcp-tls and the three traffic-egress-proxy
// files, copied unchanged from
// agentgateway's repository at commit
// 75b4e6ce6e0e1ac7959d5548ebe8dbeaede4f180 into testdata/agentgateway
// (their certificate paths, relative to that repository's root, resolve
// there). Each validates as `--validate-only` would, but for the features
// not built yet that it uses, which are refused with their paths: the file
// without the ones parsing refuses validates, but for the settings not
// served yet, which Validate refuses as Apply does.
func TestGatewaysAgentgatewayExamples(t *testing.T) {
	t.Chdir("testdata/agentgateway")
	tests := []struct {
		file string
		// refused are the errors of features not built yet (CONNECT
		// tunnels, the UI), and without the top-level section using them.
		refused []string
		without string
		// notServed are Validate's errors: settings not served yet.
		notServed []string
		check     func(t *testing.T, f *config.File)
	}{
		{file: "examples/mcp-tls/config.yaml"},
		{
			file: "examples/traffic-egress-proxy/config.yaml",
			check: func(t *testing.T, f *config.File) {
				if len(f.Binds) != 2 || f.Binds[0].TunnelProtocol != "connect" {
					t.Errorf("binds %d: want the CONNECT bind and gateway secure's", len(f.Binds))
				}
			},
		},
		{
			file: "examples/traffic-egress-proxy/config-conditional.yaml",
			check: func(t *testing.T, f *config.File) {
				if len(f.Binds) != 2 || !f.LLM.Attached() {
					t.Errorf("binds %d, llm attached %v: want the llm routes on gateway secure", len(f.Binds), f.LLM.Attached())
				}
			},
		},
		{
			file: "examples/traffic-egress-proxy/config-dynamic-tls.yaml",
			check: func(t *testing.T, f *config.File) {
				if len(f.Binds) != 2 || f.Binds[1].Mode != "internal" || f.Binds[1].Listeners[0].TLS.Mode != "dynamicCa" {
					t.Errorf("binds %+v: want the CONNECT bind and the internal dynamicCa one", f.Binds)
				}
			},
		},
		{
			file:    "examples/traffic-unified-gateway/config.yaml",
			refused: []string{"ui: not supported yet"},
			without: "ui",
			check: func(t *testing.T, f *config.File) {
				// llm and mcp attach to the gateway named default.
				if len(f.Binds) != 1 || *f.Binds[0].Port != 3000 || !f.LLM.Attached() {
					t.Errorf("binds %d, llm attached %v: want the llm and mcp routes on gateway default", len(f.Binds), f.LLM.Attached())
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			env := placeholderEnv(string(data), "placeholder-")
			f, err := config.Parse(data, env)
			if len(tc.refused) > 0 {
				var got []string
				if err != nil {
					for _, e := range err.(config.Errors) {
						got = append(got, e.Error())
					}
				}
				if len(got) != len(tc.refused) {
					t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.refused, "\n"))
				}
				for i := range got {
					if !strings.HasPrefix(got[i], tc.refused[i]) {
						t.Errorf("error %s, want %s", got[i], tc.refused[i])
					}
				}
				f, err = config.Parse([]byte(withoutSection(string(data), tc.without)), env)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := Validate(f); err != nil {
				for _, e := range err.(config.Errors) {
					got = append(got, e.Error())
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.notServed, "\n") {
				t.Fatalf("Validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.notServed, "\n"))
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

// withoutSection removes a top-level key and its value from a YAML file
// written in block style.
func withoutSection(yaml, key string) string {
	var out []string
	skip := false
	for _, l := range strings.Split(yaml, "\n") {
		if l != "" && l[0] != ' ' && l[0] != '-' && l[0] != '#' {
			skip = strings.HasPrefix(l, key+":")
		}
		if !skip {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
