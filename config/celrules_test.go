package config

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestCELRuleDecode lists the rule shapes and the errors (each naming its
// path) of `authorization` and `mcpAuthorization`.
func TestCELRuleDecode(t *testing.T) {
	const authz = policiesPath + "authorization."
	long := strings.Repeat("1 == ", 3277) + "1" // 16386 characters
	tests := []struct {
		desc    string
		rules   string // the YAML flow list under `rules:`
		wantErr string
	}{
		{"bare string", `['request.path == "/a"']`, ""},
		{"every kind", `['true', {allow: 'true'}, {deny: 'false'}, {require: 'true'}]`, ""},
		{"empty list", `[]`, ""},
		{"spec examples", `['mcp.tool.name == "echo"', 'jwt.sub == "u" && mcp.tool.name == "add"', '"admin" in jwt.roles', 'jwt.email.endsWith("@example.com")', 'jwt.nested.key == "v"']`, ""},
		{"agentgateway functions", `['cidr("127.0.0.1/8").containsIP(source.address)', 'ip(source.address).isLoopback()', 'default(jwt.sub, "") != ""', 'coalesce(jwt.a, jwt.b, true)', 'json(request.headers["x"]).a == 1', 'request.path.regexReplace("[0-9]+", "n").stripPrefix("/") == "a"', 'math.greatest(1, 2) == 2', 'jwt.with(j, j.sub == "u")', 'request.headers.filterKeys(k, k.startsWith("x-")).size() > 0', 'string(base64Decode(request.headers["x"])) == "a"']`, ""},
		{"bad cidr literal", `['cidr("127.0.0.1/33").containsIP(source.address)']`, authz + `rules[0]: invalid CEL expression: ERROR: <input>:1:6: invalid cidr argument: CIDR "127.0.0.1/33" parse error`},
		{"bad ip literal", `['ip(source.address) == ip("1.2.3")']`, authz + `rules[0]: invalid CEL expression: ERROR: <input>:1:26: invalid ip argument: IP Address "1.2.3" parse error`},
		{"bad regexReplace literal", `['true', {deny: 'request.path.regexReplace("(", "x") == ""'}]`, authz + "rules[1].deny: invalid CEL expression: ERROR: <input>:1:27: invalid regexReplace pattern: error parsing regexp: missing closing )"},
		{"coalesce of nothing", `['coalesce() == 1']`, authz + "rules[0]: invalid CEL expression: ERROR: <input>:1:9: found no matching overload for 'coalesce'"},
		{"with needs a name", `['jwt.with(1, true)']`, authz + "rules[0]: invalid CEL expression: ERROR: <input>:1:10: with() variable names must be simple identifiers"},
		{"uuid left out", `['uuid() != ""']`, authz + "rules[0]: invalid CEL expression: ERROR: <input>:1:5: undeclared reference to 'uuid'"},
		{"uuid says why", `['uuid() != ""']`, "uuid() is agentgateway's, and not available in rules: a fresh random id cannot decide a rule"},
		{"random left out", `['random() < 0.5']`, "random() is agentgateway's, and not available in rules: a rule must not allow or deny at random"},
		{"variables left out", `['variables().jwt.sub == "u"']`, "variables() is agentgateway's, and not available in rules"},
		{"unvalidated JWT left out", `[{require: 'unvalidatedJwtPayload(request.headers["authorization"]).sub == "u"'}]`, authz + "rules[0].require: invalid CEL expression: ERROR: <input>:1:22: undeclared reference to 'unvalidatedJwtPayload'"},
		{"unvalidated JWT says why", `['unvalidatedJwtPayload(request.headers["authorization"]).sub == "u"']`, "unvalidatedJwtPayload() is agentgateway's, and not available in rules: it reads claims nobody verified"},
		{"syntax error", `['true', 'true', 'request.path ==']`, authz + "rules[2]: invalid CEL expression: ERROR: <input>:1:16: Syntax error"},
		{"syntax error in deny", `[{deny: 'mcp.tool.name =='}]`, authz + "rules[0].deny: invalid CEL expression"},
		{"undeclared variable", `['foo.bar == 1']`, authz + "rules[0]: invalid CEL expression: ERROR: <input>:1:1: undeclared reference to 'foo'"},
		{"no such overload", `['request.path.endsWith(1)']`, authz + "rules[0]: invalid CEL expression"},
		{"not bool", `['1 + 1']`, authz + "rules[0]: invalid CEL expression: the result is int, not bool"},
		{"empty expression", `['']`, authz + "rules[0]: must be 1 to 16384 characters"},
		{"too long", `['` + long + `']`, authz + "rules[0]: must be 1 to 16384 characters"},
		{"two kinds", `[{allow: 'true', deny: 'true'}]`, authz + "rules[0]: exactly one of allow, deny, require is required"},
		{"no kind", `[{}]`, authz + "rules[0]: exactly one of allow, deny, require is required"},
		{"unknown kind", `[{permit: 'true'}]`, authz + `rules[0].permit: unknown field "permit" (use allow, deny or require)`},
		{"number", `[5]`, authz + "rules[0]: expected a CEL expression or a map with one of: allow, deny, require"},
		{"list", `[[x]]`, authz + "rules[0]: expected a CEL expression or a map with one of: allow, deny, require"},
		{"kind with a number", `[{require: 5}]`, authz + "rules[0].require: expected string, got integer 5"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, field := range []string{"authorization", "mcpAuthorization"} {
				_, err := Parse([]byte(routePolicies("        "+field+":\n          rules: "+tc.rules+"\n")), noEnv)
				want := strings.Replace(tc.wantErr, "authorization.", field+".", 1)
				switch {
				case want == "" && err != nil:
					t.Fatalf("%s: unexpected error:\n%v", field, err)
				case want != "" && err == nil:
					t.Fatalf("%s: accepted; want error containing %q", field, want)
				case want != "" && !strings.Contains(err.Error(), want):
					t.Fatalf("%s: error\n%v\ndoes not contain %q", field, err, want)
				}
			}
		})
	}
}

// TestCELRuleSetFields: `rules` is required, other fields are unknown, and
// backend-level authorization is not built.
func TestCELRuleSetFields(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{routePolicies("        authorization: {}\n"), policiesPath + "authorization.rules: required"},
		{routePolicies("        mcpAuthorization: {rules: ['true'], extra: 1}\n"), policiesPath + `mcpAuthorization.extra: unknown field "extra"`},
		{"binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        policies: {authorization: {rules: ['true']}}\n", "binds[0].listeners[0].routes[0].backends[0].policies.authorization: not supported yet"},
	} {
		_, err := Parse([]byte(tc.yaml), noEnv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestCELRuleDecodedValues: kinds and expressions as decoded, and written
// back in file form.
func TestCELRuleDecodedValues(t *testing.T) {
	f, err := Parse([]byte(routePolicies("        authorization:\n          rules: ['source.port == 1', {allow: 'true'}, {deny: 'false'}, {require: '\"x\" in jwt.roles'}]\n")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Binds[0].Listeners[0].Routes[0].Policies.Authorization.Rules
	want := []CELRule{{RuleAllow, "source.port == 1"}, {RuleAllow, "true"}, {RuleDeny, "false"}, {RuleRequire, `"x" in jwt.roles`}}
	if len(got) != len(want) {
		t.Fatalf("rules %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rules[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	out, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	// The dump's form, its literals redacted (redactCEL).
	if w := `[{"allow":"source.port == 1"},{"allow":"true"},{"deny":"false"},{"require":"\"\u003credacted\u003e\" in jwt.roles"}]`; string(out) != w {
		t.Errorf("json %s, want %s", out, w)
	}
}

// FuzzCELRule: any expression either compiles to a bool rule or is a config
// error naming the rule; nothing panics.
func FuzzCELRule(f *testing.F) {
	for _, s := range []string{`true`, `mcp.tool.name == "a"`, `"admin" in jwt.roles`, `jwt.email.endsWith("@x")`, `request.headers["x"] == "y"`, `1 +`, `[1,2].size()`, `has(jwt.sub)`,
		`cidr("127.0.0.1/8").containsIP(source.address)`, `ip("::1").family() == 6`, `default(jwt.sub, "") == ""`, `coalesce(jwt.a, null, 1) == 1`, `json("{}").with(j, j.size() == 0)`,
		`{"a": 1}.mapValues(v, v + 1).filterKeys(k, k == "a").merge({}) == {"a": 2}`, `"ab".regexReplace("a", "$0$0") == "aab"`, `base64.decode(base64Encode("x")) == b"x"`, `math.abs(-1) == 1`, `uuid() == ""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if len(expr) > 1024 {
			return
		}
		file, err := Parse([]byte(routePolicies("        mcpAuthorization:\n          rules: [{deny: "+strconv.Quote(expr)+"}]\n")), noEnv)
		switch {
		case err == nil:
			rule := file.Binds[0].Listeners[0].Routes[0].Policies.MCPAuthorization.Rules[0]
			if rule.Kind != RuleDeny {
				t.Fatalf("kind %v", rule.Kind)
			}
			if _, cerr := CompileCEL(rule.Expr); cerr != nil {
				t.Fatalf("accepted %q that does not compile: %v", rule.Expr, cerr)
			}
		case strings.Contains(err.Error(), "rules[0]") && !strings.Contains(err.Error(), policiesPath+"mcpAuthorization.rules[0].deny: "):
			t.Fatalf("error without the rule's path: %v", err)
		}
	})
}
