package config

import (
	"strings"
	"testing"
)

// TestCELUnboundedBuildsRefused: a call that could build a string the
// product of two values of the request (a value repeated for each match in
// another, or between each of a list's elements: 4 GiB at 64 KiB each) is
// a config error naming its field and the call, in rules and in computed
// values alike; the same calls with a bounded replacement or separator
// load.
func TestCELUnboundedBuildsRefused(t *testing.T) {
	const set = policiesPath + "transformations.request.set.x-o: invalid CEL expression: "
	const rule = policiesPath + "authorization.rules[0]: invalid CEL expression: "
	for _, tc := range []struct {
		desc, expr, wantErr string
	}{
		{"a header replaced into itself", `request.headers["x"].replace("a", request.headers["x"]).size()`, set + "replace() could build a string of up to 4.0 GiB (the replacement repeated for each match)"},
		{"a header's characters joined by itself", `request.headers["x"].split("").join(request.headers["x"]).size()`, set + "join() could build a string of up to 4.0 GiB (the separator repeated between each of the list's elements)"},
		{"the body replaced into itself", `string(request.body).replace("a", string(request.body)).size()`, set + "replace() could build a string of up to 4.0 GiB"},
		{"regexReplace of the header's groups", `request.headers["x"].regexReplace("(a)", request.headers["y"]).size()`, set + "regexReplace() could build a string of up to 2.0 GiB (the replacement's group references each expanded to the match)"},
		{"regex.replace by a header", `regex.replace(request.headers["x"], "a", request.headers["y"]).size()`, set + "regex.replace() could build a string of up to 6.0 GiB (the replacement repeated for each match, its group references expanded)"},
		{"a bounded replacement", `request.headers["x"].replace(",", ", ").size()`, ""},
		{"a bounded separator", `request.headers["x"].split(",").join(";")`, ""},
		{"a replacement limited to one match", `request.headers["x"].replace("a", request.headers["y"], 1)`, ""},
		{"regexReplace with groups", `request.path.regexReplace("/id/([0-9]+)", "/id/<$1>")`, ""},
		{"regex.replace with groups", `regex.replace(request.path, "([0-9])", "\\1\\1")`, ""},
		{"a pattern from the request, bounded at run time", `request.headers["x"].regexReplace(request.headers["p"], "N")`, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(routePolicies("        transformations: {request: {set: {x-o: '"+tc.expr+"'}}}\n")), noEnv)
			checkErr(t, err, tc.wantErr)
			if tc.wantErr == "" {
				return
			}
			_, err = Parse([]byte(routePolicies("        authorization: {rules: ['"+tc.expr+" > 0']}\n")), noEnv)
			checkErr(t, err, strings.Replace(tc.wantErr, set, rule, 1))
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error:\n%v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted; want error containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error\n%v\ndoes not contain\n%q", err, want)
	}
}

// evalValue compiles expr as a computed value and evaluates it with
// request set to req.
func evalValue(t *testing.T, expr string, req map[string]any) (any, error) {
	t.Helper()
	p, err := CompileLLMExpression(expr)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := p.Eval(map[string]any{"request": req})
	if err != nil {
		return nil, err
	}
	return v.Value(), nil
}

// TestCELBuildsBoundedAtRunTime: replace, join, regexReplace and
// regex.replace answer as they did, and fail, before building it, a
// string longer than MaxCELString allows: the values of a request may be
// larger than the estimate's (a body of megabytes), and a list may hold
// one value many times.
func TestCELBuildsBoundedAtRunTime(t *testing.T) {
	big, mid := strings.Repeat("a", 4<<20), strings.Repeat("a", 128<<10)
	few := strings.Repeat("b", 64<<10) + "aaa"
	req := map[string]any{"s": "banana", "big": big, "mid": mid, "few": few, "a": "a", "list": []string{"a", "b", "c"}, "p": "(n)", "y": strings.Repeat("y", 10000), "x": strings.Repeat("x", 4000)}
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		desc, expr string
		want       any
		wantErr    string
	}{
		{"replace", `request.s.replace("a", "o")`, "bonono", ""},
		{"replace n", `request.s.replace("a", "o", 2)`, "bonona", ""},
		{"replace empty", `request.s.replace("", "-")`, "-b-a-n-a-n-a-", ""},
		{"join", `request.list.join()`, "abc", ""},
		{"join sep", `request.list.join(", ")`, "a, b, c", ""},
		{"regexReplace", `request.s.regexReplace("(n)a", "[$1]")`, "ba[n]na", ""},
		{"regex.replace", `regex.replace(request.s, request.p, "<\\1>")`, "ba<n>a<n>a", ""},
		{"regex.replace n", `regex.replace(request.s, "(a)", "\\1\\1", 1)`, "baanana", ""},
		{"replace of a large string, same length", `request.big.replace("a", "b").size()`, int64(4 << 20), ""},
		{"replace growing a large string ten times", `request.big.replace("a", "0123456789").size()`, nil, "replace: the result would be 41943040 bytes, more than the 33554432 a call may build"},
		{"replace growing it up to twice", `request.big.replace("a", "bb", 1000).size()`, int64(4<<20 + 1000), ""},
		{"join of a value repeated", `request.x.split("").map(c, request.y).join().size()`, nil, "join: the result would be 40000000 bytes"},
		{"regexReplace expanding a large match", `request.big.regexReplace("a+", "$0$0$0$0$0$0$0$0$0$0").size()`, nil, "regexReplace: the result could be"},
		{"regexReplace expanding it once", `request.big.regexReplace("a+", "$0$0").size()`, int64(8 << 20), ""},
		{"regex.replace growing a string 300 times", `regex.replace(request.mid, "a", "` + long + `").size()`, nil, "regex.replace: the result would be 39321600 bytes"},
		{"regex.replace of few matches", `regex.replace(request.few, "(a)", "\\1` + long + `").size()`, int64(len(few) + 3*300), ""},
		{"regex.replace with a pattern not a literal", `regex.replace(request.mid, request.a, "` + long + `").size()`, nil, "regex.replace: the result would be 39321600 bytes"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := evalValue(t, tc.expr, req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%v (%v), want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// TestCELPatternsBoundedAtRunTime: a pattern that is not a literal (a
// header, a claim) is measured before it is compiled: one whose program
// times the text's length exceeds MaxCELRuntimeCost fails (such a pattern
// took seconds against 64 KB, 5.4 s and 500 MB against a 2 MiB body), a
// small one answers; a literal pattern, the configuration's, is not
// measured.
func TestCELPatternsBoundedAtRunTime(t *testing.T) {
	hostile := "(a|b)*a(a|b){1000}c"
	text := strings.Repeat("ab", 32<<10)
	req := map[string]any{"text": text, "hostile": hostile, "small": "^(ab)+$", "path": "/id/42", "digits": "[0-9]+"}
	for _, tc := range []struct {
		desc, expr string
		want       any
		wantErr    string
	}{
		{"matches", `request.text.matches(request.hostile)`, nil, "matches: a pattern of about"},
		{"matches, global", `matches(request.text, request.hostile)`, nil, "matches: a pattern of about"},
		{"regex.extract", `regex.extract(request.text, request.hostile).hasValue()`, nil, "regex.extract: a pattern of about"},
		{"regex.extractAll", `regex.extractAll(request.text, request.hostile).size()`, nil, "regex.extractAll: a pattern of about"},
		{"regex.replace", `regex.replace(request.text, request.hostile, "x").size()`, nil, "regex.replace: a pattern of about"},
		{"regexReplace", `request.text.regexReplace(request.hostile, "x").size()`, nil, "regexReplace: a pattern of about"},
		{"a small pattern on a short text", `request.path.matches(request.digits)`, true, ""},
		{"regexReplace, a small pattern", `request.path.regexReplace(request.digits, "N")`, "/id/N", ""},
		{"a literal pattern", `request.text.matches("^(ab)+$")`, true, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := evalValue(t, tc.expr, req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%v (%v), want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// TestCELRuntimeCostLimit: an expression whose worst case exceeds
// MaxCELRuntimeCost is counted as it runs and fails once it spent that
// much (a loop over a header's characters encoding every header each
// time: here 5,000 encodings of 20 KB), yet answers on a small request;
// one within it (the common rule) runs uncounted.
func TestCELRuntimeCostLimit(t *testing.T) {
	const loop = `request.x.split("").map(c, toJson(request.headers)).size()`
	small := map[string]any{"x": "abc", "headers": map[string]any{"a": "b"}}
	if got, err := evalValue(t, loop, small); err != nil || got != int64(3) {
		t.Fatalf("small request: %v (%v)", got, err)
	}
	large := map[string]any{"x": strings.Repeat("x", 5000), "headers": map[string]any{"a": strings.Repeat("y", 20000)}}
	if _, err := evalValue(t, loop, large); err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Fatalf("large request: %v, want the cost limit exceeded", err)
	}
	for expr, counted := range map[string]bool{
		loop: true,
		`request.path.startsWith("/a") && request.headers["x-role"] == "admin"`: false,
		`request.headers["x"].split(",").exists(v, v == "a")`:                   false,
		`request.path.matches(request.headers["p"])`:                            true,
	} {
		p, err := CompileLLMExpression(expr)
		if err != nil {
			t.Fatal(err)
		}
		_, det, _ := p.Eval(map[string]any{"request": map[string]any{"path": "/a", "headers": map[string]any{"x": "a", "p": "a", "x-role": "admin"}, "x": "a"}})
		if got := det != nil && det.ActualCost() != nil; got != counted {
			t.Errorf("%s: counted %v, want %v", expr, got, counted)
		}
	}
}

// TestCELDataCallsDeclared: every function celDataCalls charges by size is
// one the environments declare (a misspelt name would go uncharged).
func TestCELDataCallsDeclared(t *testing.T) {
	env, err := ValueCELEnv()
	if err != nil {
		t.Fatal(err)
	}
	fns := env.Functions()
	for name := range celDataCalls {
		if fns[name] == nil {
			t.Errorf("%s is not declared", name)
		}
	}
}
