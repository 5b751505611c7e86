package telemetry

import "testing"

func TestMethodIndex(t *testing.T) {
	tests := []struct {
		desc   string
		method string
		want   string
	}{
		{"GET", "GET", "GET"},
		{"HEAD", "HEAD", "HEAD"},
		{"POST", "POST", "POST"},
		{"PUT", "PUT", "PUT"},
		{"DELETE", "DELETE", "DELETE"},
		{"CONNECT", "CONNECT", "CONNECT"},
		{"OPTIONS", "OPTIONS", "OPTIONS"},
		{"TRACE", "TRACE", "TRACE"},
		{"PATCH", "PATCH", "PATCH"},
		{"lower case is not GET", "get", "OTHER"},
		{"extension method", "PROPFIND", "OTHER"},
		{"empty", "", "OTHER"},
		{"prefix of a method", "GE", "OTHER"},
		{"method with trailing space", "GET ", "OTHER"},
		{"literal OTHER is just another method", "OTHER", "OTHER"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := methodNames[methodIndex([]byte(tc.method))]; got != tc.want {
				t.Errorf("methodIndex(%q) = %s, want %s", tc.method, got, tc.want)
			}
		})
	}
}

func TestStatusIndex(t *testing.T) {
	tests := []struct {
		desc string
		code int
		want string
	}{
		{"lowest", 100, "100"},
		{"ok", 200, "200"},
		{"teapot", 418, "418"},
		{"highest", 599, "599"},
		{"no response", 0, "other"},
		{"below range", 99, "other"},
		{"above range", 600, "other"},
		{"negative", -200, "other"},
		{"huge", 1 << 40, "other"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := statusLabel(statusIndex(tc.code)); got != tc.want {
				t.Errorf("status %d -> %q, want %q", tc.code, got, tc.want)
			}
		})
	}
}
