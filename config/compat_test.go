package config

import (
	"strings"
	"testing"
)

// TestAgentgatewayCompatForms: settings agentgateway's own tests accept
// (crates/agentgateway/src/types/local_tests.rs, config.rs) parse here
// too, as it reads them; their near misses are still refused.
func TestAgentgatewayCompatForms(t *testing.T) {
	const dynamicRoutes = "  listeners:\n  - routes:\n    - backends:\n      - dynamic: {}\n"
	tests := []struct {
		desc    string
		yaml    string
		wantErr string // substring; "" means valid
		check   func(t *testing.T, f *File)
	}{
		{
			// test_single_explicit_port_zero_wildcard_allowed
			desc: "port 0 on an internal bind is the wildcard",
			yaml: "binds:\n- port: 0\n  mode: internal\n" + dynamicRoutes,
			check: func(t *testing.T, f *File) {
				if f.Binds[0].Port != nil {
					t.Errorf("port %d, want none (the bind of every port)", *f.Binds[0].Port)
				}
			},
		},
		{
			// test_explicit_port_zero_counts_as_wildcard
			desc:    "port 0 and no port are both the wildcard",
			yaml:    "binds:\n- mode: internal\n" + dynamicRoutes + "- port: 0\n  mode: internal\n" + dynamicRoutes,
			wantErr: "binds[1].port: binds[0] is already the internal bind of every port",
		},
		{
			desc:    "port 0 on a standard bind",
			yaml:    "binds:\n- port: 0\n" + dynamicRoutes,
			wantErr: "binds[0].port: must be >= 1",
		},
		{
			desc:    "port 0 on a standard bind among other errors",
			yaml:    "binds:\n- port: 0\n  listeners: 5\n",
			wantErr: "binds[0].port: must be >= 1",
		},
		{
			// test_llm_base_url_does_not_override_explicit_path_prefix
			desc: "baseUrl with pathPrefix",
			yaml: "llm:\n  models:\n  - name: proxied-groq\n    provider: groq\n    params:\n      baseUrl: https://api.groq.com/openai/v1\n      pathPrefix: /gateway/openai\n",
		},
		{
			// test_llm_base_url_does_not_override_explicit_host_override
			desc: "baseUrl with hostOverride",
			yaml: "llm:\n  models:\n  - name: proxied-fireworks\n    provider: fireworks\n    params:\n      baseUrl: https://api.fireworks.ai/inference/v1\n      hostOverride: proxy.example.com:8443\n",
		},
		{
			desc:    "baseUrl with a bad hostOverride",
			yaml:    "llm:\n  models:\n  - name: m\n    provider: openAI\n    params: {baseUrl: 'https://api.example.com/v1', hostOverride: 'no port'}\n",
			wantErr: "llm.models[0].params.hostOverride:",
		},
		{
			// config.rs validate_uri: no scheme is https
			desc: "otlpEndpoint without a scheme",
			yaml: "config:\n  tracing:\n    otlpEndpoint: otlp.example.com:4317\n",
			check: func(t *testing.T, f *File) {
				if got := f.Config.Tracing.OTLPEndpoint; got != "https://otlp.example.com:4317" {
					t.Errorf("endpoint %q", got)
				}
			},
		},
		{
			desc:    "otlpEndpoint of another scheme",
			yaml:    "config:\n  tracing:\n    otlpEndpoint: grpc://otlp.example.com:4317\n",
			wantErr: "config.tracing.otlpEndpoint: must be an http:// or https:// URL, or host:port (https)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml), noEnv)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				if tc.check != nil {
					tc.check(t, f)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error\n%v\nwant one containing %q", err, tc.wantErr)
			}
		})
	}
}
