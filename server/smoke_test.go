package server

import (
	"io"
	"net/http"
	"testing"
)

func TestProxySmoke(t *testing.T) {
	for _, tr := range []Transport{TransportNetpoll, TransportStd} {
		t.Run(string(tr), func(t *testing.T) {
			var gotPath, gotXFF, gotHost string
			up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotXFF, gotHost = r.URL.RequestURI(), r.Header.Get("X-Forwarded-For"), r.Host
				io.WriteString(w, "hello from upstream")
			}))
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - host: ${UP}
`, map[string]string{"UP": up}, tr)
			resp, body := get(t, tg.url(3000)+"/a/b?x=1", "Host", "example.com")
			if resp.StatusCode != 200 || body != "hello from upstream" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			if gotPath != "/a/b?x=1" || gotXFF != "127.0.0.1" || gotHost != "example.com" {
				t.Fatalf("upstream saw path %q xff %q host %q", gotPath, gotXFF, gotHost)
			}
		})
	}
}
