package celrules

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestEvalSample(t *testing.T) {
	tests := []struct {
		desc, sample string
		want         any
		wantErr      string
	}{
		{"a rule", `{"expression": "request.headers[\"x-role\"] == \"admin\" && \"dev\" in jwt.roles", "request": {"path": "/a", "headers": {"X-Role": "admin"}}, "jwt": {"roles": ["dev"]}}`, true, ""},
		{"a value", `{"expression": "request.path.split(\"/\")", "request": {"path": "/a/b"}}`, []any{"", "a", "b"}, ""},
		{"a map", `{"expression": "{\"n\": source.port + 1, \"who\": basicAuth.username}", "source": {"port": 1}, "basicAuth": {"username": "alice"}}`, map[string]any{"n": float64(2), "who": "alice"}, ""},
		{"mcp and llmRequest", `{"expression": "mcp.tool.name == \"echo\" && llmRequest.model == \"m\"", "mcp": {"tool": {"name": "echo"}}, "llmRequest": {"model": "m"}}`, true, ""},
		{"a body", `{"expression": "json(request.body).name + string(size(request.body))", "request": {"body": "{\"name\": \"n\"}"}}`, "n13", ""},
		{"no body", `{"expression": "request.body"}`, nil, "evaluation failed"},
		{"apiKey", `{"expression": "apiKey.group", "apiKey": {"group": "eng"}}`, "eng", ""},
		{"a missing claim", `{"expression": "jwt.sub == \"x\""}`, nil, "evaluation failed"},
		{"a bad expression", `{"expression": "request.path =="}`, nil, "invalid CEL expression"},
		{"no expression", `{}`, nil, "expression is required"},
		{"an unknown field", `{"expression": "true", "requets": {}}`, nil, `unknown field "requets"`},
		{"too large", `{"expression": "` + strings.Repeat(" ", MaxSample) + `true"}`, nil, "larger than"},
		// Ten million elements built from constants pass the load-time
		// estimate of a rule, but would take 600 MB of the gateway's memory
		// here (8 GB one level deeper); the sample's cost bound stops them.
		{"a list too large to build", `{"expression": "` + nestedMaps(7) + `.size()"}`, nil, "cost limit exceeded"},
		{"a list of a thousand", `{"expression": "` + nestedMaps(3) + `.size()"}`, float64(10), ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := EvalSample([]byte(tc.sample))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ...%s...", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// nestedMaps is an expression building a list of 10^depth numbers, one
// map within another over the literal list [0, ..., 9].
func nestedMaps(depth int) string {
	const digits = "[0,1,2,3,4,5,6,7,8,9]"
	expr := "v0"
	for i := depth - 1; i >= 0; i-- {
		expr = digits + ".map(v" + strconv.Itoa(i) + ", " + expr + ")"
	}
	return expr
}
