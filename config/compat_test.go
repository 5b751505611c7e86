package config

import (
	"os"
	"reflect"
	"regexp"
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

// TestMisspeltKeysReportedAsUnknown: a misspelt key in a map that a type
// reads by hand (a CEL rule, an ai backend's groups form, a kind's
// conditional form) is reported as an unknown field, with a suggestion,
// not as a missing kind or a field out of place; the real conflicts are
// still reported.
func TestMisspeltKeysReportedAsUnknown(t *testing.T) {
	route := func(policies string) string {
		return "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies: " + policies + "\n"
	}
	const p = "binds[0].listeners[0].routes[0].policies."
	const ai = "binds[0].listeners[0].routes[0].backends[0].ai."
	aiBackend := func(ai string) string {
		return "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - ai: " + ai + "\n"
	}
	const groups = "groups: [{providers: [{name: a, provider: {openAI: {}}}]}]"
	type typoCase struct {
		desc string
		yaml string
		want []string // every error, in order
	}
	tests := []typoCase{
		{"a rule with a typo beside its kind", route(`{mcpAuthorization: {rules: [{allow: "true", zzTypo: 1}]}}`),
			[]string{p + `mcpAuthorization.rules[0].zzTypo: unknown field "zzTypo" (use allow, deny or require)`}},
		{"a rule whose kind is misspelt", route(`{authorization: {rules: [{alow: "true"}]}}`),
			[]string{p + `authorization.rules[0].alow: unknown field "alow" (did you mean "allow"?)`}},
		{"a rule with two kinds and a typo", route(`{authorization: {rules: [{allow: "true", deny: "true", zz: 1}]}}`),
			[]string{p + "authorization.rules[0]: exactly one of allow, deny, require is required", p + `authorization.rules[0].zz: unknown field "zz" (use allow, deny or require)`}},
		{"groups with a typo", aiBackend("{" + groups + ", zzTypo: 1}"),
			[]string{ai + `zzTypo: unknown field "zzTypo"`}},
		{"groups with a misspelt key", aiBackend("{" + groups + ", grups: 1}"),
			[]string{ai + `grups: unknown field "grups" (did you mean "groups"?)`}},
		{"groups with a provider's field", aiBackend("{" + groups + ", name: x}"),
			[]string{ai + "name: not allowed together with groups (set it on each provider)"}},
	}
	for _, kind := range []struct{ name, entry, near, field string }{
		{"extAuthz", "{host: 'a:1'}", "hots", "host"},
		{"extProc", "{host: 'a:1'}", "hots", "host"},
		{"remoteRateLimit", "{host: 'a:1', domain: d, descriptors: [{entries: [{key: k, value: '\"v\"'}]}]}", "domian", "domain"},
		{"transformations", "{request: {set: {x-a: '\"b\"'}}}", "reqest", "request"},
	} {
		tests = append(tests,
			typoCase{kind.name + " conditional with a typo", route("{" + kind.name + ": {conditional: [" + kind.entry + "], zzTypo: 1}}"),
				[]string{p + kind.name + `.zzTypo: unknown field "zzTypo"`}},
			typoCase{kind.name + " conditional with a misspelt field", route("{" + kind.name + ": {conditional: [" + kind.entry + "], " + kind.near + ": 1}}"),
				[]string{p + kind.name + "." + kind.near + `: unknown field "` + kind.near + `" (did you mean "` + kind.field + `"?)`}},
			typoCase{kind.name + " conditional with one of its fields", route("{" + kind.name + ": {conditional: [" + kind.entry + "], " + kind.field + ": 1}}"),
				[]string{p + kind.name + ".conditional: not allowed together with the kind's other fields (set them on each entry)"}},
		)
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), noEnv)
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			errs := err.(Errors)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors:\n%v\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
			for i, e := range errs {
				if !strings.HasPrefix(e.Error(), tc.want[i]) {
					t.Errorf("error %q, want %q", e, tc.want[i])
				}
			}
		})
	}
}

// TestReadmeNamesWhatIsNotSupported: README's list of what is refused as
// not supported yet names every setting the file format declares
// Unsupported, so that none is found only by trying it.
func TestReadmeNamesWhatIsNotSupported(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, `| Refused with "not supported yet"`) {
			row = line
		}
	}
	if row == "" {
		t.Fatal(`README has no row starting | Refused with "not supported yet"`)
	}
	named := map[string]bool{}
	for _, code := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(row, -1) {
		for _, word := range regexp.MustCompile(`[A-Za-z0-9]+`).FindAllString(code[1], -1) {
			named[word] = true
		}
	}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map || typ.Kind() == reflect.Array {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Type == reflect.TypeFor[Unsupported]() {
				if !named[name] {
					t.Errorf("README does not name %s.%s (%s), which is refused as not supported yet", path, name, typ.Name())
				}
				continue
			}
			if f.IsExported() {
				walk(f.Type, path+"."+name)
			}
		}
	}
	walk(reflect.TypeFor[File](), "")
}
