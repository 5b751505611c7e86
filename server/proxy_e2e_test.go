package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProxyRequestHeaders: hop-by-hop request fields never reach the upstream,
// X-Forwarded-For is appended to, X-Forwarded-Proto is this hop's scheme
// alone (a client's "https" over plain HTTP is not passed on), no Via is
// added, and
// end-to-end fields pass unchanged.
func TestProxyRequestHeaders(t *testing.T) {
	tests := []struct {
		desc   string
		fields string // header lines after Host
		body   string // sent with POST when set
		absent []string
		want   map[string]string // field -> value the upstream must see (all lines joined)
	}{
		{
			desc:   "fields named in Connection",
			fields: "Connection: X-Foo, x-bar\r\nX-Foo: 1\r\nX-Bar: 2\r\nX-Keep: 3\r\n",
			absent: []string{"Connection", "X-Foo", "X-Bar"},
			want:   map[string]string{"X-Keep": "3"},
		},
		{
			desc:   "Connection over several lines",
			fields: "Connection: X-A\r\nConnection: X-B\r\nX-A: 1\r\nX-B: 2\r\nX-C: 3\r\n",
			absent: []string{"Connection", "X-A", "X-B"},
			want:   map[string]string{"X-C": "3"},
		},
		{
			desc:   "Keep-Alive",
			fields: "Connection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\n",
			absent: []string{"Connection", "Keep-Alive"},
		},
		{
			desc:   "Connection cannot remove framing fields",
			fields: "Connection: Content-Length, Host, Transfer-Encoding, X-A\r\nX-A: 1\r\n",
			body:   "0123456789",
			absent: []string{"Connection", "X-A"},
			want:   map[string]string{"Content-Length": "10", "Host": "client.example"},
		},
		{desc: "Proxy-Connection", fields: "Proxy-Connection: keep-alive\r\n", absent: []string{"Proxy-Connection"}},
		{desc: "TE", fields: "TE: trailers\r\n", absent: []string{"TE"}},
		{
			desc:   "Proxy-Authorization goes, Authorization stays",
			fields: "Proxy-Authorization: Basic dXNlcjpwYXNz\r\nAuthorization: Bearer abc\r\n",
			absent: []string{"Proxy-Authorization"},
			want:   map[string]string{"Authorization": "Bearer abc"},
		},
		{desc: "Upgrade not named in Connection", fields: "Upgrade: h2c\r\n", absent: []string{"Upgrade"}},
		{desc: "Connection: close stays with the client", fields: "Connection: close\r\n", absent: []string{"Connection"}},
		{
			desc:   "first hop",
			want:   map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http"},
			absent: []string{"Via"},
		},
		{
			desc:   "X-Forwarded-For appended, X-Forwarded-Proto replaced",
			fields: "X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Proto: https\r\n",
			want:   map[string]string{"X-Forwarded-For": "1.2.3.4, 127.0.0.1", "X-Forwarded-Proto": "http"},
		},
		{
			desc:   "X-Forwarded-For over several lines keeps their order",
			fields: "X-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2, 3.3.3.3\r\n",
			want:   map[string]string{"X-Forwarded-For": "1.1.1.1, 2.2.2.2, 3.3.3.3, 127.0.0.1"},
		},
		{
			desc:   "end-to-end fields unchanged",
			fields: "Accept: text/html\r\nCookie: a=1\r\nX-Custom: Mixed Case, Value\r\nUser-Agent: raw-test\r\n",
			want:   map[string]string{"Accept": "text/html", "Cookie": "a=1", "X-Custom": "Mixed Case, Value", "User-Agent": "raw-test"},
		},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, seen := rawHTTPUpstream(t, okAnswer)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					req := "GET /h HTTP/1.1\r\nHost: client.example\r\n" + tc.fields + "\r\n"
					if tc.body != "" {
						req = "POST /h HTTP/1.1\r\nHost: client.example\r\nContent-Length: " + strconv.Itoa(len(tc.body)) + "\r\n" + tc.fields + "\r\n" + tc.body
					}
					resp := roundTripRaw(t, c, br, "GET", req)
					if resp.status() != 200 || string(resp.body) != "ok" {
						t.Fatalf("response %q %q", resp.line, resp.body)
					}
					got := nextSeen(t, seen)
					if string(got.body) != tc.body {
						t.Errorf("upstream got body %q, want %q", got.body, tc.body)
					}
					for _, name := range append(tc.absent, "Via") {
						if got.fields.has(name) {
							t.Errorf("upstream saw %s: %q", name, got.fields.get(name))
						}
					}
					for name, want := range tc.want {
						if v := got.fields.get(name); v != want {
							t.Errorf("upstream saw %s %q, want %q", name, v, want)
						}
					}
					if n := len(got.fields.values("X-Forwarded-For")); n != 1 {
						t.Errorf("upstream saw %d X-Forwarded-For lines, want 1", n)
					}
				})
			}
		})
	}
}

// TestProxyResponseHeaders: hop-by-hop response fields from the upstream do not
// reach the client, and the upstream's Connection: close does not end the
// client's connection.
func TestProxyResponseHeaders(t *testing.T) {
	tests := []struct {
		desc   string
		fields string // upstream response header lines
		absent []string
		want   map[string]string
	}{
		{
			desc:   "fields named in Connection",
			fields: "Connection: X-Up-Hop, X-Other\r\nX-Up-Hop: 1\r\nX-Other: 2\r\nX-Up: yes\r\n",
			absent: []string{"Connection", "X-Up-Hop", "X-Other"},
			want:   map[string]string{"X-Up": "yes"},
		},
		{desc: "Keep-Alive", fields: "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n", absent: []string{"Keep-Alive", "Connection"}},
		{desc: "Proxy-Authenticate and Proxy-Connection", fields: "Proxy-Authenticate: Basic\r\nProxy-Connection: keep-alive\r\n", absent: []string{"Proxy-Authenticate", "Proxy-Connection"}},
		{desc: "Upgrade on a 200", fields: "Upgrade: h2c\r\n", absent: []string{"Upgrade"}},
		{desc: "upstream closes its connection", fields: "Connection: close\r\nX-Up: closing\r\n", absent: []string{"Connection"}, want: map[string]string{"X-Up": "closing"}},
		{desc: "end-to-end fields unchanged", fields: "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nCache-Control: no-store\r\n", want: map[string]string{"Set-Cookie": "a=1, b=2", "Cache-Control": "no-store"}},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, seen := rawHTTPUpstream(t, func(m message) (string, bool) {
				i, _ := strconv.Atoi(strings.TrimPrefix(m.target(), "/"))
				if m.target() == "/next" {
					return okAnswer(m)
				}
				f := tests[i].fields
				return "HTTP/1.1 200 OK\r\n" + f + "Content-Length: 4\r\n\r\nbody", strings.Contains(f, "close")
			})
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			for i, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					resp := roundTripRaw(t, c, br, "GET", "GET /"+strconv.Itoa(i)+" HTTP/1.1\r\nHost: a\r\n\r\n")
					nextSeen(t, seen)
					if resp.status() != 200 || string(resp.body) != "body" {
						t.Fatalf("response %q %q", resp.line, resp.body)
					}
					for _, name := range tc.absent {
						if resp.fields.has(name) {
							t.Errorf("client saw %s: %q", name, resp.fields.get(name))
						}
					}
					for name, want := range tc.want {
						if v := resp.fields.get(name); v != want {
							t.Errorf("client saw %s %q, want %q", name, v, want)
						}
					}
					// The client's connection stays usable.
					next := roundTripRaw(t, c, br, "GET", "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
					nextSeen(t, seen)
					if next.status() != 200 || string(next.body) != "ok" {
						t.Fatalf("next request on the same connection: %q %q", next.line, next.body)
					}
				})
			}
		})
	}
}

// TestProxyHost: IP backends get the client's Host, hostname backends their
// own name and port.
func TestProxyHost(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, seen := rawHTTPUpstream(t, okAnswer)
			_, port, _ := net.SplitHostPort(up)
			tests := []struct {
				desc    string
				backend string
				request string
				want    string
			}{
				{desc: "IP backend keeps the client's Host", backend: up, request: "GET / HTTP/1.1\r\nHost: client.example\r\n\r\n", want: "client.example"},
				{desc: "IP backend keeps the client's port", backend: up, request: "GET / HTTP/1.1\r\nHost: client.example:8080\r\n\r\n", want: "client.example:8080"},
				{desc: "hostname backend gets its name", backend: "localhost:" + port, request: "GET / HTTP/1.1\r\nHost: client.example\r\n\r\n", want: "localhost:" + port},
				{desc: "HTTP/1.0 without Host gets the backend address", backend: up, request: "GET / HTTP/1.0\r\n\r\n", want: up},
				{desc: "absolute form keeps the Host field", backend: up, request: "GET http://client.example/p HTTP/1.1\r\nHost: client.example\r\n\r\n", want: "client.example"},
			}
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					tg := startGatewayWith(t, oneRoute(tc.backend), nil, tr)
					c, br := dialRaw(t, tg.addr(3000))
					resp := roundTripRaw(t, c, br, "GET", tc.request)
					if resp.status() != 200 {
						t.Fatalf("response %q", resp.line)
					}
					got := nextSeen(t, seen)
					if hosts := got.fields.values("Host"); len(hosts) != 1 || hosts[0] != tc.want {
						t.Fatalf("upstream saw Host %q, want [%q]", hosts, tc.want)
					}
				})
			}
		})
	}
}

// TestProxyRequestTarget: queries reach the upstream byte for byte, and so
// do paths with pathNormalization: raw; by default a path goes in normal
// form (TestPathNormalization), which leaves an ordinary path as it is.
func TestProxyRequestTarget(t *testing.T) {
	tests := []struct {
		desc   string
		target string
		want   string
		// normalized is what goes upstream by default, when not want ("400":
		// the request is refused).
		normalized string
	}{
		{desc: "percent-encoded slash and space", target: "/a%2Fb/c?x=%20y", want: "/a%2Fb/c?x=%20y", normalized: "400"},
		{desc: "percent-encoded comma and space", target: "/a%2cb/c%20?x=%20y", want: "/a%2cb/c%20?x=%20y", normalized: "/a%2Cb/c%20?x=%20y"},
		{desc: "encoded unreserved characters", target: "/%7Euser/p%41th?q=a+b&r=%2F", want: "/%7Euser/p%41th?q=a+b&r=%2F", normalized: "/~user/pAth?q=a+b&r=%2F"},
		{desc: "empty segments", target: "/a//b/", want: "/a//b/", normalized: "/a/b/"},
		{desc: "dot segments", target: "/a/./b/../c", want: "/a/./b/../c", normalized: "/a/c"},
		{desc: "matrix parameters", target: "/x;y=z/w", want: "/x;y=z/w"},
		{desc: "query without values", target: "/q?a&b=&&c", want: "/q?a&b=&&c"},
		{desc: "empty query", target: "/e?", want: "/e?"},
		{desc: "query encodings", target: "/q?x=%20y&a=b+c&k=%2F&e&u=%c3%a9&s=a%2bb", want: "/q?x=%20y&a=b+c&k=%2F&e&u=%c3%a9&s=a%2bb"},
		{desc: "query of a path normalized", target: "/q/.?x=%20y&a=b+c&k=%2F&p=/../&u=%c3%a9", want: "/q/.?x=%20y&a=b+c&k=%2F&p=/../&u=%c3%a9", normalized: "/q/?x=%20y&a=b+c&k=%2F&p=/../&u=%c3%a9"},
		{desc: "repeated query keys", target: "/r?a=1&a=2&b", want: "/r?a=1&a=2&b"},
		{desc: "absolute form", target: "http://client.example/abs%2Fpath?k=v", want: "/abs%2Fpath?k=v", normalized: "400"},
		{desc: "absolute form normalized", target: "http://client.example/abs/./path?k=v", want: "/abs/./path?k=v", normalized: "/abs/path?k=v"},
	}
	// A route matching on the query makes the router parse the query; that
	// must not change what is forwarded.
	queryRoute := "binds:\n- port: 3000\n  listeners:\n  - routes:\n" +
		"    - matches: [{query: [{name: zz, value: {exact: nomatch}}]}]\n      backends: [{host: '${UP}'}]\n" +
		"    - backends: [{host: '${UP}'}]\n"
	configs := map[string]func(up string) string{
		"plain route": oneRoute,
		"query route": func(string) string { return queryRoute },
	}
	for _, tr := range e2eTransports {
		for name, cfg := range configs {
			for _, raw := range []bool{false, true} {
				mode := "normalized"
				if raw {
					mode = "raw"
				}
				t.Run(string(tr)+"/"+name+"/"+mode, func(t *testing.T) {
					up, seen := rawHTTPUpstream(t, okAnswer)
					yaml := cfg(up)
					if raw {
						yaml += "frontendPolicies: {http: {pathNormalization: raw}}\n"
					}
					tg := startGatewayWith(t, yaml, map[string]string{"UP": up}, tr)
					c, br := dialRaw(t, tg.addr(3000))
					for _, tc := range tests {
						t.Run(tc.desc, func(t *testing.T) {
							want := tc.want
							if !raw && tc.normalized != "" {
								want = tc.normalized
							}
							resp := roundTripRaw(t, c, br, "GET", "GET "+tc.target+" HTTP/1.1\r\nHost: client.example\r\n\r\n")
							if want == "400" {
								if resp.status() != 400 {
									t.Fatalf("response %q, want 400", resp.line)
								}
								return
							}
							if resp.status() != 200 {
								t.Fatalf("response %q", resp.line)
							}
							if got := nextSeen(t, seen).line; got != "GET "+want+" HTTP/1.1" {
								t.Fatalf("upstream request line %q, want target %q", got, want)
							}
						})
					}
				})
			}
		}
	}
}

// bodyUpstream reads the request body and answers with it, delimited as the
// query asks: ?resp=length, chunked, or close (end of connection). It reports
// what it received in X-Got-Len and X-Got-Sha.
func bodyUpstream(t *testing.T) string {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		info := "X-Got-Len: " + strconv.Itoa(len(b)) + "\r\nX-Got-Sha: " + digest(b) + "\r\n"
		switch r.URL.Query().Get("resp") {
		case "chunked":
			w.Header().Set("X-Got-Len", strconv.Itoa(len(b)))
			w.Header().Set("X-Got-Sha", digest(b))
			w.WriteHeader(200)
			w.(http.Flusher).Flush() // no Content-Length: chunked
			w.Write(b)
		case "close":
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			brw.WriteString("HTTP/1.1 200 OK\r\n" + info + "Connection: close\r\n\r\n")
			brw.Write(b)
			brw.Flush()
		default:
			w.Header().Set("X-Got-Len", strconv.Itoa(len(b)))
			w.Header().Set("X-Got-Sha", digest(b))
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b)
		}
	}))
}

// TestProxyBodies: request and response bodies of every size and framing
// arrive intact both ways (small ones are buffered, large ones streamed).
func TestProxyBodies(t *testing.T) {
	tests := []struct {
		desc       string
		size       int
		reqChunked bool
		resp       string
	}{
		{desc: "empty", size: 0, resp: "length"},
		{desc: "small length both ways", size: 1000, resp: "length"},
		{desc: "small chunked request", size: 1000, reqChunked: true, resp: "length"},
		{desc: "small chunked response", size: 1000, resp: "chunked"},
		{desc: "small response ended by close", size: 1000, resp: "close"},
		{desc: "streamed response by length", size: 300 << 10, resp: "length"},
		{desc: "streamed chunked response", size: 300 << 10, resp: "chunked"},
		{desc: "streamed response ended by close", size: 300 << 10, resp: "close"},
		{desc: "large request by length", size: 3 << 20, resp: "length"},
		{desc: "large chunked request and response", size: 3 << 20, reqChunked: true, resp: "chunked"},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(bodyUpstream(t)), nil, tr)
			for i, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					want := payload(tc.size, uint64(i))
					var body io.Reader = strings.NewReader(string(want))
					if tc.reqChunked {
						body = io.MultiReader(body) // hides the length: chunked
					}
					req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/echo?resp="+tc.resp, body)
					if tc.reqChunked {
						req.ContentLength = -1
					}
					resp, got := do(t, req)
					if resp.StatusCode != 200 {
						t.Fatalf("status %d: %q", resp.StatusCode, got)
					}
					if l, s := resp.Header.Get("X-Got-Len"), resp.Header.Get("X-Got-Sha"); l != strconv.Itoa(tc.size) || s != digest(want) {
						t.Errorf("upstream got %s bytes (sha %s), want %d (sha %s)", l, s, tc.size, digest(want))
					}
					if d := sameBytes([]byte(got), want); d != "" {
						t.Errorf("response body: %s", d)
					}
				})
			}
		})
	}
}

// TestProxyHead: a HEAD response keeps its Content-Length and has no body;
// the next response on the connection follows it directly.
func TestProxyHead(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, _ := rawHTTPUpstream(t, func(m message) (string, bool) {
				if m.method() == "HEAD" {
					return "HTTP/1.1 200 OK\r\nContent-Length: " + strings.TrimPrefix(m.target(), "/") + "\r\nContent-Type: text/plain\r\n\r\n", false
				}
				return echoAnswer(m)
			})
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			for _, size := range []string{"1234", "10485760"} { // buffered and streamed sizes
				head := roundTripRaw(t, c, br, "HEAD", "HEAD /"+size+" HTTP/1.1\r\nHost: a\r\n\r\n")
				if head.status() != 200 || head.fields.get("Content-Length") != size {
					t.Fatalf("HEAD: %q Content-Length %q, want %s", head.line, head.fields.get("Content-Length"), size)
				}
				next := roundTripRaw(t, c, br, "GET", "GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
				if next.status() != 200 || !strings.HasPrefix(string(next.body), "GET /after") {
					t.Fatalf("the response after HEAD is %q %q: the HEAD response carried body bytes", next.line, next.body)
				}
			}
		})
	}
}

// TestProxyExpectContinue: the client gets 100 Continue, the upstream gets the
// body and no Expect.
func TestProxyExpectContinue(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, seen := rawHTTPUpstream(t, okAnswer)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			for _, size := range []int{5, 3 << 20} { // buffered, streamed
				t.Run("raw "+strconv.Itoa(size), func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(size)+"\r\nExpect: 100-continue\r\n\r\n")
					interim, err := readReply(br, "POST")
					if err != nil || interim.status() != 100 {
						t.Fatalf("want 100 Continue before sending the body, got %q %v", interim.line, err)
					}
					body := payload(size, 7)
					if _, err := c.Write(body); err != nil {
						t.Fatal(err)
					}
					resp, err := readReply(br, "POST")
					if err != nil || resp.status() != 200 {
						t.Fatalf("after the body: %q %v", resp.line, err)
					}
					got := nextSeen(t, seen)
					if d := sameBytes(got.body, body); d != "" {
						t.Errorf("upstream body: %s", d)
					}
					if got.fields.has("Expect") {
						t.Errorf("upstream saw Expect: %q", got.fields.get("Expect"))
					}
				})
			}
			t.Run("net/http client", func(t *testing.T) {
				client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}}
				defer client.CloseIdleConnections()
				var got100 atomic.Bool
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got100Continue: func() { got100.Store(true) }})
				body := payload(4096, 8)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPut, tg.url(3000)+"/put", strings.NewReader(string(body)))
				req.Header.Set("Expect", "100-continue")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || !got100.Load() {
					t.Fatalf("status %d, got 100 Continue: %v", resp.StatusCode, got100.Load())
				}
				if d := sameBytes(nextSeen(t, seen).body, body); d != "" {
					t.Errorf("upstream body: %s", d)
				}
			})
		})
	}
}

// TestProxyKeepAlive: many sequential requests on one client connection, with
// and without bodies, each answered in turn.
func TestProxyKeepAlive(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, _ := rawHTTPUpstream(t, echoAnswer)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			for i := 0; i < 100; i++ {
				n := strconv.Itoa(i)
				req, want := "GET /k"+n+" HTTP/1.1\r\nHost: a\r\n\r\n", "GET /k"+n+" HTTP/1.1\n"
				if i%2 == 1 {
					req, want = "POST /p"+n+" HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(len(n))+"\r\n\r\n"+n, "POST /p"+n+" HTTP/1.1\n"+n
				}
				resp := roundTripRaw(t, c, br, "GET", req)
				if resp.status() != 200 || string(resp.body) != want {
					t.Fatalf("request %d: %q %q, want body %q", i, resp.line, resp.body, want)
				}
				if resp.fields.get("Connection") == "close" {
					t.Fatalf("request %d: the gateway closes the connection", i)
				}
			}
		})
	}
}

// TestProxyPipelining: requests written in one go are answered in order.
func TestProxyPipelining(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, _ := rawHTTPUpstream(t, echoAnswer)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /one HTTP/1.1\r\nHost: a\r\n\r\n"+
				"POST /two HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"+
				"POST /three HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n"+
				"GET /four HTTP/1.1\r\nHost: a\r\n\r\n")
			for _, want := range []string{"GET /one HTTP/1.1\n", "POST /two HTTP/1.1\nabc", "POST /three HTTP/1.1\nde", "GET /four HTTP/1.1\n"} {
				resp, err := readReply(br, "GET")
				if err != nil || resp.status() != 200 || string(resp.body) != want {
					t.Fatalf("want body %q, got %q %q %v", want, resp.line, resp.body, err)
				}
			}
		})
	}
}
