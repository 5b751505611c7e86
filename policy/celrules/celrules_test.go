package celrules

import (
	"strconv"
	"testing"

	"github.com/relaygate/gateway/config"
)

func compile(t testing.TB, rules ...config.CELRule) *RuleSet {
	t.Helper()
	rs, err := Compile(&config.CELRuleSet{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func allow(e string) config.CELRule   { return config.CELRule{Kind: config.RuleAllow, Expr: e} }
func deny(e string) config.CELRule    { return config.CELRule{Kind: config.RuleDeny, Expr: e} }
func require(e string) config.CELRule { return config.CELRule{Kind: config.RuleRequire, Expr: e} }

func TestAllowed(t *testing.T) {
	claims := map[string]any{"sub": "test-user", "nested": map[string]any{"key": "value"}, "roles": []any{"dev", "admin"}, "email": "a@example.com"}
	tool := func(name string) *MCPItem { return &MCPItem{Kind: MCPTool, Name: name, Target: "t"} }
	tests := []struct {
		desc   string
		rules  []config.CELRule
		claims map[string]any
		item   *MCPItem
		want   bool
	}{
		{"public tool", []config.CELRule{allow(`mcp.tool.name == "echo"`)}, nil, tool("echo"), true},
		{"other tool", []config.CELRule{allow(`mcp.tool.name == "echo"`)}, nil, tool("add"), false},
		{"subject", []config.CELRule{allow(`jwt.sub == "test-user" && mcp.tool.name == "add"`)}, claims, tool("add"), true},
		{"subject without token counts false", []config.CELRule{allow(`jwt.sub == "test-user" && mcp.tool.name == "add"`)}, nil, tool("add"), false},
		{"nested claim", []config.CELRule{allow(`mcp.tool.name == "env" && jwt.nested.key == "value"`)}, claims, tool("env"), true},
		{"role in list", []config.CELRule{allow(`"admin" in jwt.roles && mcp.tool.name == "x"`)}, claims, tool("x"), true},
		{"e-mail domain", []config.CELRule{allow(`jwt.email.endsWith("@example.com") && mcp.tool.name == "x"`)}, claims, tool("x"), true},
		{"e-mail elsewhere", []config.CELRule{allow(`jwt.email.endsWith("@example.org")`)}, claims, tool("x"), false},
		{"deny wins", []config.CELRule{allow(`true`), deny(`mcp.tool.name == "x"`)}, nil, tool("x"), false},
		{"deny failing to evaluate does not deny", []config.CELRule{allow(`true`), deny(`jwt.missing == "y"`)}, claims, tool("x"), true},
		{"require must hold", []config.CELRule{allow(`true`), require(`jwt.sub == "other"`)}, claims, tool("x"), false},
		{"require alone", []config.CELRule{require(`jwt.sub == "test-user"`)}, claims, tool("x"), true},
		{"type error counts false", []config.CELRule{allow(`jwt.sub + 1 == 2`)}, claims, tool("x"), false},
		{"prompt rule does not see tools", []config.CELRule{allow(`mcp.prompt.name == "x"`)}, nil, tool("x"), false},
		{"http request path", []config.CELRule{allow(`request.path.startsWith("/public")`)}, nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			rs := compile(t, tc.rules...)
			in := Input{Claims: tc.claims, Request: map[string]any{"path": "/x"}, Source: map[string]any{}, MCP: tc.item}
			if got := rs.Allowed(&in); got != tc.want {
				t.Fatalf("Allowed = %v, want %v", got, tc.want)
			}
		})
	}
	var none *RuleSet
	if !none.Allowed(&Input{}) {
		t.Fatal("no rules must allow")
	}
}

func TestCompileNamesTheRule(t *testing.T) {
	_, err := Compile(&config.CELRuleSet{Rules: []config.CELRule{allow(`true`), allow(`jwt.sub ==`)}})
	if err == nil || err.Error()[:8] != "rules[1]" {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkFilterTools100x10: one tools/list of 100 tools against 10 rules
// shaped like the spec's.
func BenchmarkFilterTools100x10(b *testing.B) {
	var rules []config.CELRule
	for i := range 10 {
		switch i % 4 {
		case 0:
			rules = append(rules, allow(`mcp.tool.name == "tool-`+strconv.Itoa(i)+`"`))
		case 1:
			rules = append(rules, allow(`jwt.sub == "u" && mcp.tool.name == "tool-`+strconv.Itoa(i)+`"`))
		case 2:
			rules = append(rules, allow(`"admin" in jwt.roles && mcp.tool.name == "tool-`+strconv.Itoa(i)+`"`))
		default:
			rules = append(rules, allow(`jwt.email.endsWith("@example.com") && mcp.tool.name == "tool-`+strconv.Itoa(i)+`"`))
		}
	}
	rs := compile(b, rules...)
	in := Input{Claims: map[string]any{"sub": "u", "roles": []any{"admin"}, "email": "a@example.com"}, Request: map[string]any{}, Source: map[string]any{}}
	names := make([]string, 100)
	for i := range names {
		names[i] = "tool-" + strconv.Itoa(i)
	}
	item := MCPItem{Kind: MCPTool, Target: "t"}
	in.MCP = &item
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, name := range names {
			item.Name = name
			if rs.Allowed(&in) {
				n++
			}
		}
		if n != 10 {
			b.Fatalf("%d allowed", n)
		}
	}
}

// bruteAllowed applies the rules without the index.
func bruteAllowed(t testing.TB, rules []config.CELRule, in *Input) bool {
	act := &activation{in: in}
	anyAllow, hasAllow := false, false
	for _, r := range rules {
		p, err := config.CompileCEL(r.Expr)
		if err != nil {
			t.Fatal(err)
		}
		v := eval(p, act)
		switch r.Kind {
		case config.RuleDeny:
			if v {
				return false
			}
		case config.RuleRequire:
			if !v {
				return false
			}
		default:
			hasAllow = true
			anyAllow = anyAllow || v
		}
	}
	return !hasAllow || anyAllow
}

var indexRules = []config.CELRule{
	allow(`mcp.tool.name == "a"`),
	allow(`"b" == mcp.tool.name && jwt.sub == "u"`),
	allow(`jwt.sub == "u" && (mcp.prompt.name == "c" && true)`),
	deny(`mcp.tool.name == "d" && jwt.sub == "u"`),
	require(`mcp.tool.name != "e"`),
	allow(`mcp.tool.name == "f" || mcp.tool.name == "g"`),
	allow(`mcp.resource.name.startsWith("mem://")`),
}

// FuzzRuleIndex: the index never changes a decision.
func FuzzRuleIndex(f *testing.F) {
	rs := compile(f, indexRules...)
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "mem://x", ""} {
		f.Add(n, uint8(0), "u")
		f.Add(n, uint8(1), "v")
		f.Add(n, uint8(2), "u")
	}
	f.Fuzz(func(t *testing.T, name string, kind uint8, sub string) {
		in := Input{Claims: map[string]any{"sub": sub}, Request: map[string]any{}, Source: map[string]any{}, MCP: &MCPItem{Kind: MCPKind(kind % 3), Name: name, Target: "t"}}
		if got, want := rs.Allowed(&in), bruteAllowed(t, indexRules, &in); got != want {
			t.Fatalf("%+v: indexed %v, brute force %v", in.MCP, got, want)
		}
	})
}

func TestIndexKey(t *testing.T) {
	none := (*itemKey)(nil)
	key := func(k MCPKind, n string) *itemKey { return &itemKey{k, n} }
	for _, tc := range []struct {
		expr string
		want *itemKey
	}{
		{`mcp.tool.name == "a"`, key(MCPTool, "a")},
		{`"a" == mcp.prompt.name`, key(MCPPrompt, "a")},
		{`jwt.x == 1 && mcp.resource.name == "r"`, key(MCPResource, "r")},
		{`jwt.x == 1 && (true && mcp.tool.name == "")`, key(MCPTool, "")},
		{`mcp.tool.name == "a" || true`, none},
		{`!(mcp.tool.name == "a")`, none},
		{`mcp.tool.name != "a"`, none},
		{`has(mcp.tool.name)`, none},
		{`mcp.tool.target == "a"`, none},
		{`mcp.task.name == "a"`, none},
		{`request.path == "a"`, none},
	} {
		_, ast, err := config.CompileCELAst(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := indexKey(ast.NativeRep().Expr())
		if ok != (tc.want != none) || ok && got != *tc.want {
			t.Errorf("%s: key %+v (indexed %v), want %v", tc.expr, got, ok, tc.want)
		}
	}
}
