package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMTokenEndpointHung: with Vertex's token endpoint hanging, a client
// that gives up (an HTTP/1.1 hang-up, an HTTP/2 stream reset) ends its
// request at once, not when the token wait's minute ran out, and the
// fetch goes on for the other requests; a request whose deadline passes
// while it waits gets 502 `backend credentials unavailable` in its own
// format (it got `bad upstream response`).
func TestLLMTokenEndpointHung(t *testing.T) {
	v := llmtest.NewVertex(t)
	v.HangTokens(true)
	provider := `{name: v, hostOverride: "${V}", provider: {vertex: {projectId: ${PROJECT}, region: ${REGION}}}, policies: {backendAuth: {gcp: {credential: {file: "${FILE}"}}}}}`
	// Each route's provider has a token cache of its own: each request
	// below starts a fetch.
	route := func(name, extra string) string {
		return `
    - name: ` + name + `
      matches: [{path: {pathPrefix: /` + name + `}}]
      policies:
        urlRewrite: {path: {prefix: /}}` + extra + `
      backends: [{ai: ` + provider + `}]`
	}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:`+route("h1", "")+route("h2", "")+route("timed", "\n        timeout: {requestTimeout: 300ms}")+`
`, map[string]string{"V": v.Addr(), "PROJECT": v.Project, "REGION": v.Location, "FILE": v.ServiceAccountFile()})
	body := `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`
	// bound is well within the token fetch's own bound (10 s) and the
	// minute a request with no deadline waits at most.
	const bound = 5 * time.Second

	for _, tt := range []struct {
		desc   string
		giveUp func(t *testing.T, hung int) // sends a request, gives up once its fetch hangs
	}{
		{"HTTP/1.1 client hangs up", func(t *testing.T, hung int) {
			conn := dialTest(t, tg.addr(3000))
			req := "POST /h1/v1/chat/completions HTTP/1.1\r\nHost: llm.test\r\nContent-Type: application/json\r\nContent-Length: " +
				itoa(len(body)) + "\r\n\r\n" + body
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			eventually(t, bound, "the token fetch", func() bool { return v.HungTokenRequests() > hung })
			conn.Close()
		}},
		{"HTTP/2 client resets its stream", func(t *testing.T, hung int) {
			req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/h2/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				resp, err := h2cClient().Do(req.WithContext(ctx))
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			eventually(t, bound, "the token fetch", func() bool { return v.HungTokenRequests() > hung })
			cancel() // RST_STREAM (CANCEL)
			if err := <-errc; err == nil {
				t.Fatal("the request was answered")
			}
		}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			before := len(tg.accessLogs().FilterMessage("request").All())
			hung := v.HungTokenRequests()
			start := time.Now()
			tt.giveUp(t, hung)
			eventually(t, bound, "the request's access line", func() bool {
				return len(tg.accessLogs().FilterMessage("request").All()) == before+1
			})
			if d := time.Since(start); d > bound {
				t.Errorf("the request ended %v after it began", d)
			}
			line := tg.accessLogs().FilterMessage("request").All()[before].ContextMap()
			if line["llm.error"] != "client_gone" {
				t.Errorf("llm.error %v, want client_gone", line["llm.error"])
			}
			if n := v.HungTokenRequests(); n != hung+1 {
				t.Errorf("%d token requests hanging, want %d: the fetch goes on for others", n, hung+1)
			}
		})
	}

	t.Run("deadline", func(t *testing.T) {
		start := time.Now()
		resp, err := http.Post(tg.url(3000)+"/timed/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if d := time.Since(start); d > bound {
			t.Errorf("answered after %v", d)
		}
		if resp.StatusCode != http.StatusBadGateway || !bytes.Contains(got, []byte(`"message":"backend credentials unavailable"`)) {
			t.Errorf("%d %s, want 502 backend credentials unavailable in OpenAI's error shape", resp.StatusCode, got)
		}
	})
}
