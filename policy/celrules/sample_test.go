package celrules

import (
	"reflect"
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
