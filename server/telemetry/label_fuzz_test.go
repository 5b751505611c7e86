package telemetry

import (
	"strings"
	"testing"
	"time"
)

// FuzzLabels feeds arbitrary route and backend names and request methods
// through a registry and checks that the exposition always parses, that the
// names round-trip (after invalid UTF-8 is replaced), and that the method
// label stays within the fixed table.
func FuzzLabels(f *testing.F) {
	f.Add("default/api", "svc", "GET", 200)
	f.Add(`a"b\c`, "line\nbreak", "get", 0)
	f.Add("", "", "", -1)
	f.Add("bad\xff", "路由", "PROPFIND", 600)
	f.Fuzz(func(t *testing.T, route, backend, method string, status int) {
		r := NewRegistry()
		r.Route(route, backend).Observe([]byte(method), status, time.Millisecond, 1, 1)
		r.Backend(backend).ConnectError()
		fams := scrape(t, r)
		norm := func(s string) string {
			if s == "" {
				return unknownLabel
			}
			return strings.ToValidUTF8(s, "\uFFFD")
		}
		m := find(t, fams, famRequests, map[string]string{"route": norm(route), "backend": norm(backend)})
		for _, lp := range m.GetLabel() {
			if lp.GetName() != "method" {
				continue
			}
			known := false
			for _, n := range methodNames {
				known = known || n == lp.GetValue()
			}
			if !known {
				t.Errorf("method label %q is not in the fixed table", lp.GetValue())
			}
		}
		find(t, fams, famConnectErrors, map[string]string{"backend": norm(backend)})
	})
}
