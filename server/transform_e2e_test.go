package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestTransformationsE2E: request headers computed from the request and
// its API key reach the backend; response headers computed from the
// answer reach the client; a route's transformations replace its
// listener's.
func TestTransformationsE2E(t *testing.T) {
	up, seen := headerRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Upstream", "u1")
		w.WriteHeader(201)
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - policies:
      transformations:
        request:
          set: {x-agentgateway-req-message: "'Hello from AgentGateway!'"}
    routes:
    - matches: [{path: {pathPrefix: /keyed}}]
      policies:
        apiKey:
          location: {header: {name: x-api-key}}
          keys: [{key: k1, metadata: {team: blue}}]
        transformations:
          request:
            set: {x-team: apiKey.team, x-path: request.path}
            remove: [x-drop]
          response:
            set: {x-was: 'string(response.code) + "/" + response.headers["x-upstream"]'}
      backends: [{host: '${UP}'}]
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	resp, _ := get(t, tg.url(3000)+"/keyed/x", "X-Api-Key", "k1", "X-Drop", "d")
	h := seen()
	if resp.StatusCode != 201 || h.Get("X-Team") != "blue" || h.Get("X-Path") != "/keyed/x" || h.Get("X-Drop") != "" {
		t.Errorf("%d; the backend saw x-team %q x-path %q x-drop %q", resp.StatusCode, h.Get("X-Team"), h.Get("X-Path"), h.Get("X-Drop"))
	}
	if h.Get("X-Agentgateway-Req-Message") != "" {
		t.Error("the listener's transformations ran beside the route's own")
	}
	if got := resp.Header.Get("X-Was"); got != "201/u1" {
		t.Errorf("x-was %q", got)
	}
	resp, _ = get(t, tg.url(3000)+"/other")
	h = seen()
	if resp.StatusCode != 201 || h.Get("X-Agentgateway-Req-Message") != "Hello from AgentGateway!" {
		t.Errorf("the listener's transformations did not apply: %q", h.Get("X-Agentgateway-Req-Message"))
	}
}

// TestTransformationsSetReplacesEveryValueE2E: a set replaces every value
// of its header, as agentgateway's does. A client that sends x-user twice
// (hoping the second copy reaches the backend beside the gateway's) and an
// upstream that answers x-cache twice see only the gateway's values, over
// HTTP/1.1 and HTTP/2 alike; a set to a list gives exactly the list.
func TestTransformationsSetReplacesEveryValueE2E(t *testing.T) {
	var mu sync.Mutex
	var last http.Header
	seen := func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	// (HTTP/2 requests go upstream in HTTP/2.)
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
		w.Header().Add("X-Cache", "hit")
		w.Header().Add("X-Cache", "forged")
		w.Write([]byte("ok")) //nolint:errcheck
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        transformations:
          request:
            set: {x-user: '"alice"', x-roles: '["reader", "writer"]'}
          response:
            set: {x-cache: '"miss"'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, tc := range bothClients() {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tg.url(3000)+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range [][2]string{{"X-User", "alice"}, {"X-User", "admin"}, {"X-Roles", "admin"}, {"X-Roles", "root"}} {
				req.Header.Add(kv[0], kv[1])
			}
			resp, body := doWith(t, tc.client, req)
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
			h := seen()
			for _, want := range []struct {
				name   string
				values []string
			}{{"X-User", []string{"alice"}}, {"X-Roles", []string{"reader", "writer"}}} {
				if got := h.Values(want.name); !slices.Equal(got, want.values) {
					t.Errorf("the backend saw %s %q, want %q", want.name, got, want.values)
				}
			}
			if got := resp.Header.Values("X-Cache"); !slices.Equal(got, []string{"miss"}) {
				t.Errorf("the client saw X-Cache %q, want [miss]", got)
			}
		})
	}
}

// seenRequest is what a bodyRecorder upstream got.
type seenRequest struct {
	header           http.Header
	body             []byte
	length           int64    // Content-Length, -1 for a chunked body
	transferEncoding []string // as net/http read it
}

// bodyRecorder is an upstream that reads each request's body whole, keeps
// the last request, and answers with answer (200 "ok" when nil); last
// returns the last request and the number of requests so far.
func bodyRecorder(t *testing.T, answer http.HandlerFunc) (addr string, last func() (seenRequest, int)) {
	t.Helper()
	var mu sync.Mutex
	var seen seenRequest
	calls := 0
	addr = upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(599)
			return
		}
		mu.Lock()
		seen = seenRequest{header: r.Header.Clone(), body: body, length: r.ContentLength, transferEncoding: r.TransferEncoding}
		calls++
		mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		w.Write([]byte("ok")) //nolint:errcheck
	}))
	return addr, func() (seenRequest, int) {
		mu.Lock()
		defer mu.Unlock()
		return seen, calls
	}
}

// postBody sends a POST with body; chunked hides its length, so that it
// goes chunked.
func postBody(t *testing.T, url, body string, chunked bool) (*http.Response, string) {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.MultiReader(r)
	}
	req, err := http.NewRequest(http.MethodPost, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

// bodyTransformConfig is the gateway of the body transformation tests:
// maxBufferSize 4096, and access log fields that read the bodies.
const bodyTransformConfig = `
frontendPolicies:
  http: {maxBufferSize: 4096}
  accessLog:
    add:
      sent.greeting: 'json(request.body).greeting'
      answer: 'string(response.body)'
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /rewrite}}]
      policies:
        transformations:
          request:
            set: {x-name: 'json(request.body).name'}
            body: '{"greeting": "hello " + json(request.body).name}'
          response:
            set: {x-upstream-length: 'string(size(response.body))'}
            body: 'json(response.body).with(b, {"code": b.user_code, "verify": "https://gw.test/verify?code=" + b.user_code})'
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /fixed}}]
      policies:
        transformations:
          request: {body: '"fixed"'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /sent}}]
      policies:
        transformations:
          request: {body: '"sent:" + string(request.body)'}
          response: {body: 'b"done:" + request.body'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /failing}}]
      policies:
        transformations:
          request: {body: 'json(request.body).missing'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /big}}]
      policies:
        transformations:
          response: {body: 'string(size(response.body))'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /stream}}]
      policies:
        transformations:
          request: {set: {x-path: request.path}}
          response:
            set: {x-code: 'string(response.code)'}
            body: '"replaced"'
      backends: [{host: '${UP}'}]
`

// bodyAnswer is the upstream of the body transformation tests: JSON with a
// user code (in chunks for /rewrite/chunked), 8 KiB for /big, else "ok".
func bodyAnswer(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/rewrite/json":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"user_code": "ABC-123", "interval": 5}`)) //nolint:errcheck
	case "/rewrite/chunked":
		w.Write([]byte(`{"user_code": `)) //nolint:errcheck
		w.(http.Flusher).Flush()
		w.Write([]byte(`"XYZ"}`)) //nolint:errcheck
	case "/big":
		w.Write(bytes.Repeat([]byte("b"), 8192)) //nolint:errcheck
	default:
		w.Write([]byte("ok")) //nolint:errcheck
	}
}

// TestTransformationsBodyE2E: request and response bodies rewritten from
// their JSON fields reach the upstream and the client with their
// Content-Length; a body replaced without being read; a failing body
// expression empties the body; a request body over maxBufferSize on a
// route that reads it is answered 413 without reaching the upstream, and
// a response body over it 502; the access log's fields see the bodies as
// they were sent.
func TestTransformationsBodyE2E(t *testing.T) {
	up, last := bodyRecorder(t, bodyAnswer)
	tg := startGateway(t, bodyTransformConfig, map[string]string{"UP": up})
	base := tg.url(3000)

	for _, chunked := range []bool{false, true} {
		resp, body := postBody(t, base+"/rewrite/json", `{"name": "alice", "other": 1}`, chunked)
		want := `{"code":"ABC-123","verify":"https://gw.test/verify?code=ABC-123"}`
		if resp.StatusCode != 200 || body != want || resp.ContentLength != int64(len(want)) {
			t.Fatalf("chunked %v: client got %d %q (length %d), want %q", chunked, resp.StatusCode, body, resp.ContentLength, want)
		}
		if got := resp.Header.Get("X-Upstream-Length"); got != "39" {
			t.Errorf("x-upstream-length %q, want the upstream's body's 39", got)
		}
		seen, _ := last()
		wantUp := `{"greeting":"hello alice"}`
		if string(seen.body) != wantUp || seen.length != int64(len(wantUp)) || len(seen.transferEncoding) != 0 || seen.header.Get("X-Name") != "alice" {
			t.Errorf("chunked %v: the upstream got %q (length %d, transfer-encoding %q, x-name %q), want %q",
				chunked, seen.body, seen.length, seen.transferEncoding, seen.header.Get("X-Name"), wantUp)
		}
	}
	line := lastAccessLine(t, tg.accessLogs(), 2)
	if line["sent.greeting"] != "hello alice" || line["answer"] != `{"code":"ABC-123","verify":"https://gw.test/verify?code=ABC-123"}` {
		t.Errorf("access log fields: sent.greeting %q, answer %q", line["sent.greeting"], line["answer"])
	}

	t.Run("a response that streamed in chunks", func(t *testing.T) {
		resp, body := postBody(t, base+"/rewrite/chunked", `{"name": "bob"}`, false)
		if resp.StatusCode != 200 || body != `{"code":"XYZ","verify":"https://gw.test/verify?code=XYZ"}` {
			t.Fatalf("client got %d %q", resp.StatusCode, body)
		}
	})

	t.Run("a body replaced without being read", func(t *testing.T) {
		resp, body := postBody(t, base+"/fixed", "whatever the client sent", true)
		if seen, _ := last(); resp.StatusCode != 200 || body != "ok" || string(seen.body) != "fixed" {
			t.Fatalf("client got %d %q; the upstream got %q", resp.StatusCode, body, seen.body)
		}
	})

	t.Run("the response sees the request body as forwarded", func(t *testing.T) {
		resp, body := postBody(t, base+"/sent", "abc", false)
		if seen, _ := last(); resp.StatusCode != 200 || body != "done:sent:abc" || string(seen.body) != "sent:abc" {
			t.Fatalf("client got %d %q; the upstream got %q", resp.StatusCode, body, seen.body)
		}
	})

	t.Run("a failing body expression empties the body", func(t *testing.T) {
		resp, _ := postBody(t, base+"/failing", `{"name": "x"}`, false)
		if seen, _ := last(); resp.StatusCode != 200 || len(seen.body) != 0 || seen.length != 0 {
			t.Fatalf("%d; the upstream got %q (length %d)", resp.StatusCode, seen.body, seen.length)
		}
	})

	t.Run("a request body over maxBufferSize is refused", func(t *testing.T) {
		big := `{"name": "` + strings.Repeat("n", 5000) + `"}`
		for _, chunked := range []bool{false, true} {
			_, before := last()
			resp, body := postBody(t, base+"/rewrite/json", big, chunked)
			if resp.StatusCode != 413 || !strings.Contains(body, "too large") {
				t.Errorf("chunked %v: %d %q, want 413", chunked, resp.StatusCode, body)
			}
			if _, now := last(); now != before {
				t.Errorf("chunked %v: the upstream was called", chunked)
			}
		}
	})

	t.Run("a response body over maxBufferSize is answered 502", func(t *testing.T) {
		resp, body := get(t, base+"/big")
		if resp.StatusCode != 502 || !strings.Contains(body, "too large") {
			t.Fatalf("%d %q, want 502", resp.StatusCode, body)
		}
	})
}

// TestTransformationsBodyStreamsUntouched: on a route whose
// transformations do not name the request's body, a chunked body far over
// maxBufferSize streams through: the upstream reads its start before the
// client sends the rest (a buffered body would wait for its end), and all
// of it arrives.
func TestTransformationsBodyStreamsUntouched(t *testing.T) {
	const first, total = 32 << 10, 256 << 10
	firstSeen := make(chan struct{})
	var once sync.Once
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head := make([]byte, first)
		n, _ := io.ReadFull(r.Body, head)
		once.Do(func() { close(firstSeen) })
		rest, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Got", strconv.Itoa(n+int(rest)))
		w.Header().Set("X-Path-Seen", r.Header.Get("X-Path"))
		w.Write([]byte("streamed")) //nolint:errcheck
	}))
	tg := startGateway(t, bodyTransformConfig, map[string]string{"UP": up})
	pr, pw := io.Pipe()
	go func() {
		chunk := payload(total, 7)
		if _, err := pw.Write(chunk[:first]); err != nil {
			return
		}
		select {
		case <-firstSeen:
		case <-time.After(10 * time.Second):
			pw.CloseWithError(errors.New("the upstream got nothing before the body's end: the body was buffered"))
			return
		}
		if _, err := pw.Write(chunk[first:]); err != nil {
			return
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/stream/up", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, req)
	if resp.StatusCode != 200 || resp.Header.Get("X-Got") != strconv.Itoa(total) || resp.Header.Get("X-Path-Seen") != "/stream/up" {
		t.Fatalf("%d: the upstream got %s bytes (x-path %q), want %d", resp.StatusCode, resp.Header.Get("X-Got"), resp.Header.Get("X-Path-Seen"), total)
	}
	if body != "replaced" || resp.Header.Get("X-Code") != "200" {
		t.Errorf("client got %q (x-code %q)", body, resp.Header.Get("X-Code"))
	}
}

// TestTransformationsBodyExpectContinue: a client that waits for 100
// Continue gets it, and its body, sent after it, is what the
// transformation reads and rewrites; a body replaced without being read
// replaces the one sent after 100 Continue too.
func TestTransformationsBodyExpectContinue(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, last := bodyRecorder(t, bodyAnswer)
			tg := startGatewayWith(t, bodyTransformConfig, map[string]string{"UP": up}, tr)
			for _, tc := range []struct {
				path, body, wantUp, wantClient string
			}{
				{"/rewrite/json", `{"name": "carol"}`, `{"greeting":"hello carol"}`, `{"code":"ABC-123","verify":"https://gw.test/verify?code=ABC-123"}`},
				{"/fixed", "sent after 100", "fixed", "ok"},
				{"/sent", "after 100", "sent:after 100", "done:sent:after 100"},
			} {
				c, br := dialRaw(t, tg.addr(3000))
				if _, err := io.WriteString(c, "POST "+tc.path+" HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(tc.body))+"\r\nExpect: 100-continue\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				m, err := readReply(br, "POST")
				if err != nil || m.status() != 100 {
					t.Fatalf("%s: want 100 Continue before the body, got %d (%v)", tc.path, m.status(), err)
				}
				if _, err := io.WriteString(c, tc.body); err != nil {
					t.Fatal(err)
				}
				if m, err = readReply(br, "POST"); err != nil || m.status() != 200 || string(m.body) != tc.wantClient {
					t.Fatalf("%s: %d %q (%v), want 200 %q", tc.path, m.status(), m.body, err, tc.wantClient)
				}
				if seen, _ := last(); string(seen.body) != tc.wantUp {
					t.Fatalf("%s: the upstream got %q, want %q", tc.path, seen.body, tc.wantUp)
				}
			}
		})
	}
}

// TestMetadataVariables: transformations' metadata is what CEL's
// `metadata` shows to the same transformation's edits, to the response's
// and to the access log; the external processor's dynamic metadata is
// `extproc`; the picked backend is `backend`.
func TestMetadataVariables(t *testing.T) {
	up, seen := headerRecorder(t, nil)
	proc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		a := extproctest.Reply(st, m, nil, nil)
		if m.GetRequestHeaders() != nil {
			a.DynamicMetadata, _ = structpb.NewStruct(map[string]any{"tier": "gold"})
		}
		return []*procv3.ProcessingResponse{a}
	}}
	tg := startGateway(t, `
frontendPolicies:
  accessLog:
    add: {user: metadata.user}
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extProc:
          host: '${PROC}'
          processingOptions: {requestBodyMode: none, responseBodyMode: none, responseHeaderMode: skip}
        transformations:
          request:
            metadata: {user: 'request.headers["x-user"]', missing: 'jwt.sub'}
            set: {x-meta: 'metadata.user', x-tier: 'extproc.tier', x-has-missing: 'string(has(metadata.missing))'}
          response:
            set: {x-meta-back: 'metadata.user', x-backend: 'backend.type + "/" + backend.protocol + "/" + string(backend.name == "${UP}")'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "PROC": extproctest.Start(t, proc)})
	resp, _ := get(t, tg.url(3000)+"/", "X-User", "alice")
	h := seen()
	if h.Get("X-Meta") != "alice" || h.Get("X-Tier") != "gold" || h.Get("X-Has-Missing") != "false" {
		t.Errorf("upstream got x-meta %q, x-tier %q, x-has-missing %q", h.Get("X-Meta"), h.Get("X-Tier"), h.Get("X-Has-Missing"))
	}
	if resp.Header.Get("X-Meta-Back") != "alice" {
		t.Errorf("the response side saw metadata.user %q", resp.Header.Get("X-Meta-Back"))
	}
	if got := resp.Header.Get("X-Backend"); got != "static/http/true" {
		t.Errorf("the response side saw backend %q", got)
	}
	if line := lastAccessLine(t, tg.accessLogs(), 1); line["user"] != "alice" {
		t.Errorf("access log user = %v", line["user"])
	}
}

// TestTransformPseudoHeadersFromClientInput: request-line parts computed
// from what a client sent are set only when they are valid there: a path
// with a space, or an authority with a slash, would break the line or the
// Host field upstream, and is left out.
func TestTransformPseudoHeadersFromClientInput(t *testing.T) {
	got := make(chan string, 4)
	up := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		m, err := readRequest(bufio.NewReader(c))
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- m.line + " host=" + m.fields.get("Host")
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        transformations:
          request:
            set: {':path': 'request.headers["x-path"]', ':authority': 'request.headers["x-host"]'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, tc := range []struct{ path, host, want string }{
		{"/ok?x=1", "svc.internal:81", "GET /ok?x=1 HTTP/1.1 host=svc.internal:81"},
		// (the client's Host goes on: the backend is an address)
		{"/a b HTTP/1.1", "evil/x", "GET /orig HTTP/1.1 host=" + strings.TrimPrefix(tg.url(3000), "http://")},
	} {
		resp, _ := get(t, tg.url(3000)+"/orig", "X-Path", tc.path, "X-Host", tc.host)
		if resp.StatusCode != 200 {
			t.Fatalf("%q: status %d", tc.path, resp.StatusCode)
		}
		line := <-got
		if line != tc.want {
			t.Errorf("upstream got %q, want %q", line, tc.want)
		}
	}
}

// TestTransformStatusE2E: a response transformation's :status goes out
// with its own reason phrase (not the upstream's "OK"), and a 1xx, which
// is no answer (101 would tell the client the connection switched
// protocols), is refused: the upstream's status goes out.
func TestTransformStatusE2E(t *testing.T) {
	up := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        transformations:
          response:
            set: {':status': 'request.headers["x-status"]'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, tc := range []struct{ set, want string }{
		{"201", "201 Created"},
		{"503", "503 Service Unavailable"},
		{"100", "200 OK"},
		{"101", "200 OK"},
		{"103", "200 OK"},
	} {
		c, br := dialRaw(t, tg.addr(3000))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nX-Status: "+tc.set+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, body := readResponse(t, br, http.MethodGet)
		if resp.Status != tc.want || body != "ok" || resp.Header.Get("Upgrade") != "" {
			t.Errorf(":status %s: got %q %q (upgrade %q), want %q", tc.set, resp.Status, body, resp.Header.Get("Upgrade"), tc.want)
		}
	}
}

// TestTransformReplaceKeepsFramingE2E: a whole-header-set replace computed
// from a client's header cannot set Content-Length, Transfer-Encoding or a
// hop-by-hop field on the request or on the response, as header edits
// never do: a client's `{"content-length": "2"}` cut its 5-byte body
// short upstream (502 "body stream exceeds content-length"), and a larger
// one had the gateway answer 400 blaming the client.
func TestTransformReplaceKeepsFramingE2E(t *testing.T) {
	up, seen := rawHTTPUpstream(t, func(message) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Up: u\r\n\r\nworld", false
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /req}}]
      policies:
        transformations:
          request:
            replace: 'json(request.headers["x-h"])'
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /resp}}]
      policies:
        transformations:
          response:
            replace: 'json(request.headers["x-h"])'
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, set := range []string{
		`{"content-length": "2", "x-a": "1"}`,
		`{"content-length": "50", "x-a": "1"}`,
		`{"transfer-encoding": "chunked", "x-a": "1"}`,
		`{"connection": "upgrade", "upgrade": "h2c", "te": "trailers", "keep-alive": "timeout=1", "x-a": "1"}`,
	} {
		t.Run(set, func(t *testing.T) {
			c, br := dialRaw(t, tg.addr(3000))
			if _, err := io.WriteString(c, "POST /req HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-H: "+set+"\r\n\r\nhello"); err != nil {
				t.Fatal(err)
			}
			resp, body := readResponse(t, br, http.MethodPost)
			if resp.StatusCode != 200 || body != "world" {
				t.Fatalf("request replaced: client got %d %q", resp.StatusCode, body)
			}
			m := <-seen
			if got := m.fields.get("Content-Length"); got != "5" || string(m.body) != "hello" || m.fields.get("X-A") != "1" {
				t.Errorf("upstream got Content-Length %q body %q x-a %q", got, m.body, m.fields.get("X-A"))
			}
			for _, name := range []string{"Transfer-Encoding", "Connection", "Upgrade", "Te", "Keep-Alive"} {
				if m.fields.has(name) {
					t.Errorf("upstream got %s: %q", name, m.fields.get(name))
				}
			}

			// The response, on the same connection: its framing holds.
			if _, err := io.WriteString(c, "POST /resp HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-H: "+set+"\r\n\r\nhello"); err != nil {
				t.Fatal(err)
			}
			resp, body = readResponse(t, br, http.MethodPost)
			<-seen
			if resp.StatusCode != 200 || body != "world" || resp.ContentLength != 5 || resp.Header.Get("X-A") != "1" || resp.Header.Get("X-Up") != "" {
				t.Fatalf("response replaced: client got %d %q %v", resp.StatusCode, body, resp.Header)
			}
			for _, name := range []string{"Connection", "Upgrade", "Te", "Keep-Alive"} {
				if v := resp.Header.Get(name); v != "" {
					t.Errorf("client got %s: %q", name, v)
				}
			}
			if len(resp.TransferEncoding) > 0 {
				t.Errorf("client got Transfer-Encoding %q", resp.TransferEncoding)
			}
			if resp.Close {
				t.Error("the client's connection was closed")
			}
		})
	}
}

// TestTransformMethodE2E: a :method computed from client input reaches the
// upstream only when it is one the gateway can forward safely. CONNECT
// went upstream as `CONNECT /m HTTP/1.1` on a pooled connection, which an
// upstream answering 2xx would have made a tunnel; a HEAD made a GET had
// the GET's body relayed to the HEAD client, and a GET made a HEAD had its
// answer sent without a body, each read by the client as the start of the
// next answer on its connection. Those leave the client's method alone
// (as a failing expression does), and the next request on the connection
// is answered in step.
func TestTransformMethodE2E(t *testing.T) {
	up, seen := rawHTTPUpstream(t, func(m message) (string, bool) {
		if m.method() == http.MethodHead {
			return "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n", false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody", false
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        transformations:
          request:
            set: {':method': 'request.query["m"]'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, tc := range []struct {
		method, set, want string
	}{
		{"GET", "DELETE", "DELETE"},
		{"GET", "CONNECT", "GET"},
		{"GET", "connect", "GET"},
		{"GET", "HEAD", "GET"},
		{"HEAD", "GET", "HEAD"},
	} {
		t.Run(tc.method+" to "+tc.set, func(t *testing.T) {
			c, br := dialRaw(t, tg.addr(3000))
			if _, err := io.WriteString(c, tc.method+" /m?m="+tc.set+" HTTP/1.1\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, body := readResponse(t, br, tc.method)
			m := <-seen
			if resp.StatusCode != 200 || m.line != tc.want+" /m?m="+tc.set+" HTTP/1.1" {
				t.Fatalf("client got %d %q; upstream got %q, want method %s", resp.StatusCode, body, m.line, tc.want)
			}
			if tc.want == "DELETE" && m.fields.get("Content-Length") != "0" {
				// fasthttp frames every method but GET and HEAD, as for a
				// client's own bodiless DELETE.
				t.Errorf("upstream got Content-Length %q", m.fields.get("Content-Length"))
			}
			resp, body = readResponse(t, br, http.MethodGet)
			if m := <-seen; resp.StatusCode != 200 || body != "body" || m.line != "GET /next HTTP/1.1" {
				t.Fatalf("next request: client got %d %q, upstream got %q", resp.StatusCode, body, m.line)
			}
		})
	}
}

// TestTransformPathNormalizedE2E: a :path computed from client input is
// normalized as incoming paths are, before the upstream sees it: `?p=
// /a/../admin` reached the upstream as `GET /a/../admin`, for it to
// resolve into /admin, though the gateway normalizes every path it
// receives. A path normalization refuses (an encoded slash) leaves the
// request's own. With pathNormalization: raw the computed path goes as it
// is, as the client's do.
func TestTransformPathNormalizedE2E(t *testing.T) {
	up, seen := rawHTTPUpstream(t, okAnswer)
	const cfg = `
frontendPolicies: {http: {pathNormalization: ${MODE}}}
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        transformations:
          request:
            set: {':path': 'request.headers["x-p"]'}
      backends: [{host: '${UP}'}]
`
	for _, tc := range []struct {
		mode, set, want string
	}{
		{"normalize", "/a/../admin", "/admin"},
		{"normalize", "/a/%2e%2e/admin?x=/../y", "/admin?x=/../y"},
		{"normalize", "//a/./b/%7Ec", "/a/b/~c"},
		{"normalize", "/a/%2Fb", "/orig"},
		{"raw", "/a/../admin", "/a/../admin"},
	} {
		t.Run(tc.mode+" "+tc.set, func(t *testing.T) {
			tg := startGateway(t, cfg, map[string]string{"UP": up, "MODE": tc.mode})
			c, br := dialRaw(t, tg.addr(3000))
			if _, err := io.WriteString(c, "GET /orig HTTP/1.1\r\nHost: a\r\nX-P: "+tc.set+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if resp, body := readResponse(t, br, http.MethodGet); resp.StatusCode != 200 {
				t.Fatalf("client got %d %q", resp.StatusCode, body)
			}
			if m := <-seen; m.line != "GET "+tc.want+" HTTP/1.1" {
				t.Errorf("upstream got %q, want target %q", m.line, tc.want)
			}
		})
	}
}
