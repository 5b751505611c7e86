package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestGatewayHeadersReplaceUpstreamsE2E: a header the gateway sets on an
// upstream's response replaces every value the upstream gave it, even
// twice: the client sees the gateway's value alone, over HTTP/1.1 and
// HTTP/2 alike.
func TestGatewayHeadersReplaceUpstreamsE2E(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for _, name := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
			"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers"} {
			w.Header().Add(name, "up1")
			w.Header().Add(name, "up2")
		}
		w.Write([]byte("ok")) //nolint:errcheck
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /limited}}]
      policies:
        localRateLimit: [{maxTokens: 1000, tokensPerFill: 1, fillInterval: 1h}]
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /cors}}]
      policies:
        cors:
          allowOrigins: [https://app.example.com]
          allowCredentials: true
          exposeHeaders: [x-session]
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	tests := []struct {
		desc    string
		path    string
		headers []string          // request headers, name then value
		want    map[string]string // "": any one value but the upstream's
	}{
		{desc: "rate limit", path: "/limited", want: map[string]string{
			"X-Ratelimit-Limit": "1000", "X-Ratelimit-Remaining": "", "X-Ratelimit-Reset": "3600",
		}},
		{desc: "CORS", path: "/cors", headers: []string{"Origin", "https://app.example.com"}, want: map[string]string{
			"Access-Control-Allow-Origin":      "https://app.example.com",
			"Access-Control-Allow-Credentials": "true",
			"Access-Control-Expose-Headers":    "x-session",
		}},
	}
	for _, client := range bothClients() {
		for _, tt := range tests {
			t.Run(client.name+" "+tt.desc, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodGet, tg.url(3000)+tt.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i+1 < len(tt.headers); i += 2 {
					req.Header.Add(tt.headers[i], tt.headers[i+1])
				}
				resp, body := doWith(t, client.client, req)
				if resp.StatusCode != 200 || body != "ok" {
					t.Fatalf("status %d body %q", resp.StatusCode, body)
				}
				for name, want := range tt.want {
					got := resp.Header.Values(name)
					if len(got) != 1 || strings.HasPrefix(got[0], "up") || want != "" && got[0] != want {
						t.Errorf("the client saw %s %q, want the gateway's alone (%q)", name, got, want)
					}
				}
			})
		}
	}
}
