package config

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestEnvOverrides: the environment variables agentgateway reads over the
// config section win over the file here too, and a bad value is an error
// naming the variable without quoting it.
func TestEnvOverrides(t *testing.T) {
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	const otherKey = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
	tests := []struct {
		desc    string
		yaml    string
		env     map[string]string
		wantErr []string // substrings; none means valid
		check   func(t *testing.T, f *File)
	}{
		{
			desc: "tracing endpoint from the environment",
			yaml: "config:\n  tracing: {}\n",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			check: func(t *testing.T, f *File) {
				if got := f.Config.Tracing.OTLPEndpoint; got != "http://collector:4318" {
					t.Errorf("endpoint %q", got)
				}
			},
		},
		{
			desc:    "tracing endpoint missing everywhere",
			yaml:    "config:\n  tracing: {}\n",
			wantErr: []string{"config.tracing.otlpEndpoint: required (or set OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT)"},
		},
		{
			desc: "a tracing endpoint from the environment without a scheme is https",
			yaml: "config:\n  tracing: {}\n",
			env:  map[string]string{"OTLP_ENDPOINT": "collector:4317"},
			check: func(t *testing.T, f *File) {
				if got := f.Config.Tracing.OTLPEndpoint; got != "https://collector:4317" {
					t.Errorf("endpoint %q", got)
				}
			},
		},
		{
			desc: "an empty variable is unset",
			yaml: "config:\n  tracing: {otlpEndpoint: 'http://file:4317'}\n",
			env:  map[string]string{"OTLP_ENDPOINT": "", "OTLP_PROTOCOL": "", "OTLP_HEADERS": ""},
			check: func(t *testing.T, f *File) {
				if got := f.Config.Tracing.OTLPEndpoint; got != "http://file:4317" {
					t.Errorf("endpoint %q", got)
				}
			},
		},
		{
			desc: "the environment wins over the file, the most specific variable first",
			yaml: "config:\n  tracing:\n    otlpEndpoint: 'not a url'\n    otlpProtocol: grpc\n    headers: {x-file: a, x-both: file}\n",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://general:4317",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/custom/traces",
				"OTEL_EXPORTER_OTLP_HEADERS":         "x-general=1",
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  `{"x-both": "env", "x-env": "b"}`,
				"OTEL_EXPORTER_OTLP_PROTOCOL":        "grpc",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			},
			check: func(t *testing.T, f *File) {
				tr := f.Config.Tracing
				if tr.OTLPEndpoint != "http://traces:4318/custom/traces" || tr.OTLPProtocol != "http" {
					t.Errorf("endpoint %q protocol %q", tr.OTLPEndpoint, tr.OTLPProtocol)
				}
				want := map[string]SecretString{"x-file": "a", "x-both": "env", "x-env": "b"}
				if len(tr.Headers) != len(want) {
					t.Errorf("headers %v, want %v", tr.Headers, want)
				}
				for k, v := range want {
					if tr.Headers[k] != v {
						t.Errorf("headers %v, want %v", tr.Headers, want)
					}
				}
			},
		},
		{
			desc: "OTLP_* win over OTEL_EXPORTER_OTLP_*",
			yaml: "config:\n  tracing: {}\n",
			env: map[string]string{
				"OTLP_ENDPOINT":                      "https://legacy:4317",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318",
				"OTLP_HEADERS":                       " authorization = Bearer x , ,x-b=2",
				"OTEL_EXPORTER_OTLP_HEADERS":         "x-general=1",
				"OTLP_PROTOCOL":                      `"GRPC"`,
				"OTEL_EXPORTER_OTLP_PROTOCOL":        "http",
			},
			check: func(t *testing.T, f *File) {
				tr := f.Config.Tracing
				if tr.OTLPEndpoint != "https://legacy:4317" || tr.OTLPProtocol != "grpc" {
					t.Errorf("endpoint %q protocol %q", tr.OTLPEndpoint, tr.OTLPProtocol)
				}
				if len(tr.Headers) != 2 || tr.Headers["authorization"] != "Bearer x" || tr.Headers["x-b"] != "2" {
					t.Errorf("headers %v", tr.Headers)
				}
			},
		},
		{
			// The OpenTelemetry variables' values are percent-encoded, as
			// the SDKs read them (Grafana Cloud's "Basic%20..."); the
			// gateway's own OTLP_HEADERS are taken as they are.
			desc: "OTEL_ header values are percent-decoded",
			yaml: "config:\n  tracing: {otlpEndpoint: 'http://c:4318'}\n",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20a2V5%3D,x-plain=a b"},
			check: func(t *testing.T, f *File) {
				if h := f.Config.Tracing.Headers; h["Authorization"] != "Basic a2V5=" || h["x-plain"] != "a b" {
					t.Errorf("headers %v", h)
				}
			},
		},
		{
			desc: "OTLP_HEADERS values are not decoded",
			yaml: "config:\n  tracing: {otlpEndpoint: 'http://c:4318'}\n",
			env:  map[string]string{"OTLP_HEADERS": "x-a=100%25"},
			check: func(t *testing.T, f *File) {
				if h := f.Config.Tracing.Headers; h["x-a"] != "100%25" {
					t.Errorf("headers %v", h)
				}
			},
		},
		{
			desc:    "bad percent-encoding and decoded control characters",
			yaml:    "config:\n  tracing: {otlpEndpoint: 'http://c:4318'}\n",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-a=100%", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-a=v%0D%0Ax-injected: 1"},
			wantErr: []string{`environment variable OTEL_EXPORTER_OTLP_TRACES_HEADERS: the value of header "x-a" holds a control character`},
		},
		{
			desc:    "a percent not followed by two hex digits",
			yaml:    "config:\n  tracing: {otlpEndpoint: 'http://c:4318'}\n",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-a=100%"},
			wantErr: []string{`environment variable OTEL_EXPORTER_OTLP_HEADERS: the value of header "x-a" is not percent-encoded`},
		},
		{
			desc: "tracing variables without config.tracing change nothing",
			yaml: "binds: []\n",
			env:  map[string]string{"OTLP_ENDPOINT": "http://c:4317", "OTLP_PROTOCOL": "nonsense"},
			check: func(t *testing.T, f *File) {
				if f.Config != nil && f.Config.Tracing != nil {
					t.Error("tracing turned on")
				}
			},
		},
		{
			desc: "bad tracing variables",
			yaml: "config:\n  tracing: {}\n",
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://secret-host:4317",
				"OTLP_HEADERS":                       "token",
				"OTLP_PROTOCOL":                      "http/json",
			},
			wantErr: []string{
				"environment variable OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an http:// or https:// URL",
				"environment variable OTLP_HEADERS: expected key=value pairs",
				"environment variable OTLP_PROTOCOL: http/json is not supported",
			},
		},
		{
			desc:    "bad header name and protocol",
			yaml:    "config:\n  tracing: {otlpEndpoint: 'http://c:4317'}\n",
			env:     map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": `{"bad name": "v"}`, "OTEL_EXPORTER_OTLP_PROTOCOL": "udp"},
			wantErr: []string{`environment variable OTEL_EXPORTER_OTLP_HEADERS: invalid header name "bad name"`, "environment variable OTEL_EXPORTER_OTLP_PROTOCOL: must be grpc or http/protobuf"},
		},
		{
			desc:    "a bad file endpoint is still refused",
			yaml:    "config:\n  tracing: {otlpEndpoint: 'ftp://c:4317'}\n",
			wantErr: []string{"config.tracing.otlpEndpoint: must be an http:// or https:// URL"},
		},
		{
			desc: "SESSION_KEY sets the session key",
			yaml: "binds: []\n",
			env:  map[string]string{"SESSION_KEY": " " + key + "\n"},
			check: func(t *testing.T, f *File) {
				if f.Config == nil || f.Config.Session == nil || hex.EncodeToString(f.Config.Session.Key) != key {
					t.Errorf("session %+v", f.Config)
				}
			},
		},
		{
			desc: "SESSION_KEY wins over config.session.key",
			yaml: "config:\n  session: {key: " + otherKey + "}\n",
			env:  map[string]string{"SESSION_KEY": key},
			check: func(t *testing.T, f *File) {
				if hex.EncodeToString(f.Config.Session.Key) != key {
					t.Errorf("key %x", f.Config.Session.Key)
				}
			},
		},
		{
			desc:    "bad SESSION_KEY",
			yaml:    "binds: []\n",
			env:     map[string]string{"SESSION_KEY": "not-hex-secret"},
			wantErr: []string{"environment variable SESSION_KEY: must be 64 hex digits (32 bytes)"},
		},
		{
			desc: "WORKER_THREADS wins over config.workerThreads",
			yaml: "config: {workerThreads: 2}\n",
			env:  map[string]string{"WORKER_THREADS": "3"},
			check: func(t *testing.T, f *File) {
				if f.Config.WorkerThreads.Threads(8) != 3 {
					t.Errorf("workerThreads %+v", f.Config.WorkerThreads)
				}
			},
		},
		{
			desc: "WORKER_THREADS as a percentage",
			yaml: "binds: []\n",
			env:  map[string]string{"WORKER_THREADS": "30%"},
			check: func(t *testing.T, f *File) {
				if got := f.Config.WorkerThreads.Threads(8); got != 3 {
					t.Errorf("30%% of 8 is %d threads", got)
				}
				if got := f.Config.WorkerThreads.Threads(1); got != 1 {
					t.Errorf("30%% of 1 is %d threads", got)
				}
			},
		},
		{
			desc:    "bad WORKER_THREADS",
			yaml:    "binds: []\n",
			env:     map[string]string{"WORKER_THREADS": "0"},
			wantErr: []string{`environment variable WORKER_THREADS: must be "auto", a positive number or a percentage`},
		},
		{
			desc:    "bad WORKER_THREADS percentage",
			yaml:    "binds: []\n",
			env:     map[string]string{"WORKER_THREADS": "150%"},
			wantErr: []string{"environment variable WORKER_THREADS: a percentage must be more than 0 and at most 100"},
		},
		{
			desc: "IPV6_ENABLED wins over config.enableIpv6",
			yaml: "config: {enableIpv6: true}\n",
			env:  map[string]string{"IPV6_ENABLED": "false"},
			check: func(t *testing.T, f *File) {
				if f.Config.EnableIPv6 == nil || *f.Config.EnableIPv6 {
					t.Errorf("enableIpv6 %v", f.Config.EnableIPv6)
				}
			},
		},
		{
			desc:    "bad IPV6_ENABLED",
			yaml:    "binds: []\n",
			env:     map[string]string{"IPV6_ENABLED": "nope"},
			wantErr: []string{"environment variable IPV6_ENABLED: must be true or false"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				if tc.check != nil {
					tc.check(t, f)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want errors %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not contain %q", err, want)
				}
			}
			if n := len(err.(Errors)); n != len(tc.wantErr) {
				t.Errorf("%d errors, want %d:\n%v", n, len(tc.wantErr), err)
			}
			// Values may be credentials: an error never quotes them.
			for _, v := range tc.env {
				if strings.Contains(v, "secret") && strings.Contains(err.Error(), "secret") {
					t.Errorf("error quotes the value %q:\n%v", v, err)
				}
			}
		})
	}
}

// TestWorkerThreadsForms: the file takes the same forms as WORKER_THREADS,
// and the dump writes them back.
func TestWorkerThreadsForms(t *testing.T) {
	for _, tc := range []struct{ in, dump, err string }{
		{in: "4", dump: "4"},
		{in: `"4"`, dump: "4"},
		{in: "auto", dump: `"auto"`},
		{in: `"50%"`, dump: `"50%"`},
		{in: `"12.5%"`, dump: `"12.5%"`},
		{in: "0", err: "must be \"auto\", a positive number"},
		{in: `"0%"`, err: "a percentage must be more than 0"},
		{in: `"NaN%"`, err: "a percentage must be more than 0"},
	} {
		f, err := Parse([]byte("config: {workerThreads: "+tc.in+"}\n"), noEnv)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		b, _ := f.Config.WorkerThreads.MarshalJSON()
		if string(b) != tc.dump {
			t.Errorf("%s: dumped %s, want %s", tc.in, b, tc.dump)
		}
	}
}
