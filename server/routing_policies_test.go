package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// namedUpstream answers with its own name and the URI and Host it saw.
func namedUpstream(t *testing.T, name string) string {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", name)
		io.WriteString(w, name+" "+r.Host+" "+r.RequestURI)
	}))
}

func TestRoutingPrecedence(t *testing.T) {
	vars := map[string]string{}
	for _, n := range []string{"exact", "long", "short", "method", "header", "query", "regex", "wild", "api", "named", "other"} {
		vars[n] = namedUpstream(t, n)
	}
	tg := startGateway(t, `
backends:
- name: nb
  host: ${named}
binds:
- port: 3000
  listeners:
  - name: specific
    hostname: other.test
    routes:
    - backends: [{host: '${other}'}]
  - name: main
    routes:
    - matches: [{path: {pathPrefix: /a}}]
      backends: [{host: '${short}'}]
    - matches: [{path: {pathPrefix: /a/b}}]
      backends: [{host: '${long}'}]
    - matches: [{path: {exact: /a/b/c}}]
      backends: [{host: '${exact}'}]
    - matches: [{path: {pathPrefix: /m}, method: POST}]
      backends: [{host: '${method}'}]
    - matches: [{path: {pathPrefix: /m}}]
      backends: [{host: '${short}'}]
    - matches: [{path: {pathPrefix: /h}, headers: [{name: x-tenant, value: {regex: 't-[0-9]+'}}]}]
      backends: [{host: '${header}'}]
    - matches: [{path: {pathPrefix: /h}, query: [{name: v, value: {exact: '2'}}]}]
      backends: [{host: '${query}'}]
    - matches: [{path: {regex: '/r/[0-9]+'}}]
      backends: [{host: '${regex}'}]
    - hostnames: ['*.wild.test']
      backends: [{host: '${wild}'}]
    - hostnames: [api.wild.test]
      backends: [{host: '${api}'}]
    - matches: [{path: {pathPrefix: /named}}]
      backends: [{backend: nb}]
`, vars)
	tests := []struct {
		desc, method, path, host, header, want string
	}{
		{desc: "exact beats prefixes", path: "/a/b/c", want: "exact"},
		{desc: "longer prefix", path: "/a/b/d", want: "long"},
		{desc: "segment boundary", path: "/a/bc", want: "short"},
		{desc: "method match wins", method: "POST", path: "/m", want: "method"},
		{desc: "no method", path: "/m", want: "short"},
		{desc: "header regex", path: "/h", header: "t-42", want: "header"},
		{desc: "header regex must match whole value", path: "/h?v=2", header: "t-42x", want: "query"},
		{desc: "regex path", path: "/r/123", want: "regex"},
		{desc: "exact hostname beats wildcard", path: "/", host: "api.wild.test", want: "api"},
		{desc: "wildcard hostname", path: "/", host: "x.wild.test", want: "wild"},
		{desc: "listener hostname", path: "/a/b/c", host: "other.test", want: "other"},
		{desc: "named backend", path: "/named", want: "named"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := tc.method
			if m == "" {
				m = http.MethodGet
			}
			req, _ := http.NewRequest(m, tg.url(3000)+tc.path, nil)
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.header != "" {
				req.Header.Set("X-Tenant", tc.header)
			}
			resp, body := do(t, req)
			if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != tc.want {
				t.Fatalf("got %d from %q (%s), want %q", resp.StatusCode, resp.Header.Get("X-Upstream"), body, tc.want)
			}
		})
	}
	if resp, _ := get(t, tg.url(3000)+"/r/abc"); resp.StatusCode != 404 {
		t.Fatalf("unmatched request: %d, want 404", resp.StatusCode)
	}
}

func TestRoutingWeightsAndDynamic(t *testing.T) {
	a, b, zero := namedUpstream(t, "a"), namedUpstream(t, "b"), namedUpstream(t, "zero")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /w}}]
      backends:
      - {host: '${A}', weight: 1}
      - {host: '${B}', weight: 3}
      - {host: '${Z}', weight: 0}
    - matches: [{path: {pathPrefix: /dyn}}]
      backends: [{dynamic: {}}]
`, map[string]string{"A": a, "B": b, "Z": zero})
	counts := map[string]int{}
	for i := 0; i < 200; i++ {
		resp, _ := get(t, tg.url(3000)+"/w")
		counts[resp.Header.Get("X-Upstream")]++
	}
	if counts["zero"] != 0 || counts["a"] == 0 || counts["b"] <= counts["a"] {
		t.Fatalf("weighted split %v", counts)
	}
	resp, body := get(t, tg.url(3000)+"/dyn/x", "Host", b)
	if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "b" {
		t.Fatalf("dynamic: %d %q", resp.StatusCode, body)
	}
}

func TestRoutePolicies(t *testing.T) {
	ch := make(chan seen, 16)
	up := recordingUpstream(t, ch)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /mod}}]
      policies:
        requestHeaderModifier: {set: {x-set: s}, add: {x-add: a}, remove: [x-remove]}
        responseHeaderModifier: {set: {x-resp: r}, remove: [x-up]}
      backends: [{host: '${UP}', policies: {requestHeaderModifier: {set: {x-backend: b}}, responseHeaderModifier: {set: {x-backend-resp: br}}}}]
    - matches: [{path: {pathPrefix: /old}}]
      policies:
        urlRewrite: {path: {prefix: /new}, authority: {full: rewritten.test}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /full}}]
      policies: {urlRewrite: {path: {full: /fixed}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /redir}}]
      policies: {requestRedirect: {scheme: https, authority: {host: secure.test}, path: {prefix: /moved}, status: 301}}
    - matches: [{path: {exact: /direct}}]
      policies: {directResponse: {status: 418, body: teapot}}
    - matches: [{path: {pathPrefix: /cors}}]
      policies:
        cors: {allowOrigins: [https://app.test], allowMethods: [GET, POST], allowHeaders: [x-a], exposeHeaders: [Mcp-Session-Id], maxAge: 100s}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /csrf}}]
      policies: {csrf: {additionalOrigins: ['https://trusted.test']}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})

	t.Run("header modifiers", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+"/mod", nil)
		req.Header.Set("X-Remove", "gone")
		req.Header.Set("X-Add", "first")
		resp, _ := do(t, req)
		got := <-ch
		if got.header.Get("X-Set") != "s" || got.header.Get("X-Remove") != "" || strings.Join(got.header.Values("X-Add"), ",") != "first,a" || got.header.Get("X-Backend") != "b" {
			t.Fatalf("upstream headers %v", got.header)
		}
		if resp.Header.Get("X-Resp") != "r" || resp.Header.Get("X-Up") != "" || resp.Header.Get("X-Backend-Resp") != "br" {
			t.Fatalf("response headers %v", resp.Header)
		}
	})
	t.Run("rewrite prefix and authority", func(t *testing.T) {
		get(t, tg.url(3000)+"/old/x?q=1")
		got := <-ch
		if got.uri != "/new/x?q=1" || got.host != "rewritten.test" {
			t.Fatalf("upstream saw %q host %q", got.uri, got.host)
		}
	})
	t.Run("rewrite full", func(t *testing.T) {
		get(t, tg.url(3000)+"/full/deep?q=2")
		if got := <-ch; got.uri != "/fixed?q=2" {
			t.Fatalf("upstream saw %q", got.uri)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		resp, _ := get(t, tg.url(3000)+"/redir/page?x=1")
		if resp.StatusCode != 301 || resp.Header.Get("Location") != "https://secure.test/moved/page?x=1" {
			t.Fatalf("redirect %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("direct response", func(t *testing.T) {
		resp, body := get(t, tg.url(3000)+"/direct")
		if resp.StatusCode != 418 || body != "teapot" {
			t.Fatalf("direct %d %q", resp.StatusCode, body)
		}
	})
	t.Run("cors preflight answered by the gateway", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodOptions, tg.url(3000)+"/cors", nil)
		req.Header.Set("Origin", "https://app.test")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, _ := do(t, req)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.test" || resp.Header.Get("Access-Control-Max-Age") != "100" {
			t.Fatalf("preflight %d %v", resp.StatusCode, resp.Header)
		}
		select {
		case got := <-ch:
			t.Fatalf("preflight reached the upstream: %v", got.uri)
		default:
		}
	})
	t.Run("cors actual request", func(t *testing.T) {
		resp, _ := get(t, tg.url(3000)+"/cors", "Origin", "https://app.test")
		<-ch
		if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.test" || !strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers")), "mcp-session-id") {
			t.Fatalf("cors headers %v", resp.Header)
		}
		resp, _ = get(t, tg.url(3000)+"/cors", "Origin", "https://evil.test")
		<-ch
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("disallowed origin got CORS headers")
		}
	})
	t.Run("csrf", func(t *testing.T) {
		post := func(origin string) int {
			req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/csrf", strings.NewReader("x"))
			req.Host = "site.test"
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, _ := do(t, req)
			if resp.StatusCode == 200 {
				<-ch
			}
			return resp.StatusCode
		}
		for origin, want := range map[string]int{"https://evil.test": 403, "http://site.test": 200, "https://trusted.test": 200, "": 200} {
			if got := post(origin); got != want {
				t.Errorf("POST with Origin %q: %d, want %d", origin, got, want)
			}
		}
	})
}

func TestRetryAndMirror(t *testing.T) {
	var attempts atomic.Int32
	flaky := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1)%3 != 0 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "finally")
	}))
	mirrored := make(chan string, 4)
	mirror := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mirrored <- r.RequestURI
	}))
	main := namedUpstream(t, "main")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /retry}}]
      policies: {retry: {attempts: 3, backoff: 10ms, codes: [503]}}
      backends: [{host: '${FLAKY}'}]
    - matches: [{path: {pathPrefix: /mirror}}]
      policies: {requestMirror: {backend: {host: '${MIRROR}'}, percentage: 1.0}}
      backends: [{host: '${MAIN}'}]
`, map[string]string{"FLAKY": flaky, "MIRROR": mirror, "MAIN": main})
	resp, body := get(t, tg.url(3000)+"/retry")
	if resp.StatusCode != 200 || body != "finally" || attempts.Load() != 3 {
		t.Fatalf("retry: %d %q after %d attempts", resp.StatusCode, body, attempts.Load())
	}
	// A POST is retried too, its body sent again (agentgateway's retries).
	attempts.Store(0)
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/retry", strings.NewReader("x"))
	resp, body = do(t, req)
	if resp.StatusCode != 200 || body != "finally" || attempts.Load() != 3 {
		t.Fatalf("POST: %d %q after %d attempts", resp.StatusCode, body, attempts.Load())
	}
	if resp, _ := get(t, tg.url(3000)+"/mirror/x"); resp.Header.Get("X-Upstream") != "main" {
		t.Fatalf("mirror route answered by %q", resp.Header.Get("X-Upstream"))
	}
	select {
	case uri := <-mirrored:
		if uri != "/mirror/x" {
			t.Fatalf("mirror saw %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mirror never received the copy")
	}
}

func TestLifecycleReloadAndDrain(t *testing.T) {
	v1, v2 := namedUpstream(t, "v1"), namedUpstream(t, "v2")
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	slow := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "slow done")
	}))
	cfg := `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /slow}}]
      backends: [{host: '${SLOW}'}]
    - backends: [{host: '${UP}'}]
`
	extra := "- port: 4000\n  listeners:\n  - routes:\n    - backends: [{host: '${UP}'}]\n"
	tg := startGateway(t, cfg, map[string]string{"UP": v1, "SLOW": slow})
	// One keep-alive connection, reused across the reload.
	c, br := rawConn(t, tg.addr(3000))
	ask := func() string {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, _ := readResponse(t, br, "GET")
		return resp.Header.Get("X-Upstream")
	}
	if got := ask(); got != "v1" {
		t.Fatalf("before reload: %q", got)
	}
	tg.apply(cfg+extra, map[string]string{"UP": v2, "SLOW": slow})
	if got := ask(); got != "v2" {
		t.Fatalf("same connection after reload: %q, want v2", got)
	}
	if resp, _ := get(t, tg.url(4000)); resp.Header.Get("X-Upstream") != "v2" {
		t.Fatal("new bind does not serve")
	}
	addr4000 := tg.addr(4000)
	tg.apply(cfg, map[string]string{"UP": v2, "SLOW": slow})
	eventually(t, 10*time.Second, "removed bind to stop accepting", func() bool {
		c, err := (&net.Dialer{Timeout: time.Second}).Dial("tcp", addr4000)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})

	// Drain: an in-flight request finishes after Shutdown starts.
	result := make(chan string, 1)
	go func() {
		resp, err := testClient.Get(tg.url(3000) + "/slow")
		if err != nil {
			result <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- string(b)
	}()
	<-entered
	addr := tg.addr(3000)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tg.gw.Shutdown(ctx)
	}()
	eventually(t, 5*time.Second, "readiness to turn off", func() bool { return !tg.gw.Ready() })
	eventually(t, 5*time.Second, "listener to close", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	close(release)
	if r := <-result; r != "slow done" {
		t.Fatalf("in-flight request: %q", r)
	}
	wg.Wait()
}

func TestObservability(t *testing.T) {
	up := namedUpstream(t, "obs")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - name: obs-route
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	get(t, tg.url(3000)+"/logged")
	eventually(t, 5*time.Second, "access log line", func() bool { return tg.accessLogs().FilterMessage("request").Len() > 0 })
	entry := tg.accessLogs().FilterMessage("request").All()[0].ContextMap()
	if entry["path"] != "/logged" || entry["status"] != int64(200) || entry["route"] != "obs-route" || entry["backend"] != up || entry["method"] != "GET" {
		t.Fatalf("access log fields %v", entry)
	}
	var buf strings.Builder
	tg.metrics().WritePrometheus(&buf)
	want := `agentgateway_requests_total{route="obs-route",backend="` + up + `",method="GET",status="200"} 1`
	if !strings.Contains(buf.String(), want) {
		t.Fatalf("metrics lack %s:\n%s", want, buf.String())
	}
	dump, err := tg.gw.ConfigDump()
	var parsed map[string]any
	if err != nil || json.Unmarshal(dump, &parsed) != nil || parsed["binds"] == nil {
		t.Fatalf("config dump: %v %s", err, dump)
	}
	page, err := tg.gw.UIPage()
	if err != nil || !strings.Contains(string(page), "obs-route") || !strings.Contains(string(page), up) {
		t.Fatalf("UI page: %v\n%s", err, page)
	}
}

func TestBackendRedirectPrefix(t *testing.T) {
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /shop}}]
      backends: [{host: '127.0.0.1:1', policies: {requestRedirect: {path: {prefix: /store}}}}]
`, nil)
	resp, _ := get(t, tg.url(3000)+"/shop/item?id=3", "Host", "site.test")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "http://site.test/store/item?id=3" {
		t.Fatalf("backend redirect %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestCORSSurvivesOriginRemoval: the upstream need not see Origin, and the
// client still gets its CORS headers.
func TestCORSSurvivesOriginRemoval(t *testing.T) {
	ch := make(chan seen, 1)
	up := recordingUpstream(t, ch)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        cors: {allowOrigins: ['https://app.test']}
        requestHeaderModifier: {remove: [origin]}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	resp, _ := get(t, tg.url(3000)+"/", "Origin", "https://app.test")
	got := <-ch
	if got.header.Get("Origin") != "" {
		t.Fatalf("upstream saw Origin %q", got.header.Get("Origin"))
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.test" {
		t.Fatalf("CORS headers lost: %v", resp.Header)
	}
}
