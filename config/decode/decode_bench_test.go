package decode_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

// bigConfig generates a valid configuration with n routes.
func bigConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("binds:\n- port: 8080\n  listeners:\n  - name: web\n    protocol: HTTP\n    routes:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - name: r%d\n      matches:\n      - path: {pathPrefix: /r%d}\n        headers: {X-Route: \"%d\"}\n      backends: [svc%d:80]\n      policies: {timeout: 5s, retries: 2}\n", i, i, i, i)
	}
	return []byte(b.String())
}

// BenchmarkYAML measures loading configurations of growing size; the time
// per route should stay flat (no quadratic behaviour).
func BenchmarkYAML(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		doc := bigConfig(n)
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				var c gwConfig
				if errs := decode.YAML(doc, &c); errs != nil {
					b.Fatal(errs)
				}
			}
		})
	}
}
