package decode_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

// FuzzYAML decodes arbitrary bytes into the gateway-like tree (unions,
// string-or-object forms, pointers, maps, slices, Raw) and into any. It must
// never panic, and every report must be well formed and sorted.
func FuzzYAML(f *testing.F) {
	if doc, err := os.ReadFile(filepath.Join("testdata", "errors.yaml")); err == nil {
		f.Add(doc)
	}
	for _, s := range []string{
		"",
		"binds:\n- port: 80\n  listeners:\n  - routes:\n    - backends: [a:1, {host: b}]\n      matches:\n      - path: {exact: /}\n",
		"a: &a [x, *a]\n",
		"m:\n  <<: [*x, {a: 1}]\n",
		"base: &b {port: 1}\nbinds: [{<<: *b}]\n",
		"{\"binds\": [{\"port\": 1e3}]}",
		"binds: !!seq [!!map {port: !!int 1}]",
		"- - - - x",
		"[[[[{a: [1]}]]]]",
		"a: 0755\nb: 99999999999999999999\nc: .nan\n",
		"--- 1\n--- 2\n",
		"? a\n: b\n",
		"config: {tracing: {x: [1, {y: z}]}}",
		"&x a: 1\n!!str b: 2\n? c\n: 3\n*x : 4\n",
		"a:\n  b: !!map\nc: 1\n",
		"a:\n  b: &x\nc: 1\n",
		"[\na: 1\nb: 2\n]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(errs decode.Errors) {
			for i, e := range errs {
				if e == nil || e.Msg == "" {
					t.Fatalf("malformed error %d: %#v", i, e)
				}
				if i > 0 && e.Line < errs[i-1].Line && i != len(errs)-1 {
					t.Fatalf("errors out of order:\n%v", errs)
				}
			}
		}
		check(decode.YAML(data, new(gwConfig)))
		var v any
		check(decode.YAML(data, &v))
	})
}
