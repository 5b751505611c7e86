package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawChatRequest is an HTTP/1.1 chat completion request for raw clients.
func rawChatRequest(host string) string {
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a long answer, please"}]}`
	return "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: " +
		itoa(len(body)) + "\r\n\r\n" + body
}

// TestHTTP1HangupCancelsLLMAttempt: an HTTP/1.1 client hanging up (close,
// reset, or a half-close after its request, as nginx takes it) while a
// provider works on its answer ends the provider's request, and no other
// provider of the failover group is asked; over TLS too.
func TestHTTP1HangupCancelsLLMAttempt(t *testing.T) {
	pki := newTestPKI(t, "hangup")
	srv := pki.Server("llm.test", "llm.test")
	for _, c := range []struct {
		desc   string
		tls    bool
		hangUp func(net.Conn)
	}{
		{"close", false, func(c net.Conn) { c.Close() }},
		{"reset", false, func(c net.Conn) { c.(*net.TCPConn).SetLinger(0); c.Close() }},
		{"half-close", false, func(c net.Conn) { c.(*net.TCPConn).CloseWrite() }},
		{"close over TLS", true, func(c net.Conn) { c.Close() }},
	} {
		t.Run(c.desc, func(t *testing.T) {
			var held, other atomic.Int32
			gone := make(chan string, 4)
			first := heldUntilGone(t, &held, gone)
			second := heldUntilGone(t, &other, gone)
			tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - protocol: HTTP
    routes: [{name: llm, backends: [{ai: {groups: [{providers: [{name: first, hostOverride: "${FIRST}", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}]}, {providers: [{name: second, hostOverride: "${SECOND}", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}]}]}}]}]
- port: 3001
  listeners:
  - protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes: [{name: llm, backends: [{ai: {groups: [{providers: [{name: first, hostOverride: "${FIRST}", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}]}, {providers: [{name: second, hostOverride: "${SECOND}", provider: {openAI: {}}, policies: {backendAuth: {key: k}}}]}]}}]}]
`, map[string]string{"FIRST": first, "SECOND": second, "CERT": srv.CertFile, "KEY": srv.KeyFile})
			raw := dialTest(t, tg.addr(3000))
			conn := raw
			if c.tls {
				raw = dialTest(t, tg.addr(3001))
				tc := tls.Client(raw, &tls.Config{ServerName: "llm.test", RootCAs: pki.Pool})
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				conn = tc
			}
			if _, err := io.WriteString(conn, rawChatRequest("llm.test")); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "the request at the provider", func() bool { return held.Load() == 1 })
			if c.tls {
				c.hangUp(conn)
			} else {
				c.hangUp(raw)
			}
			requireProviderCancelled(t, tg, gone, &other)
		})
	}
}

// TestHTTP1PipelinedLLMRequestsAreAnswered: a request pipelined behind an
// LLM request (both in one write, so the second is on the connection while
// the provider works on the first) is not a hang-up: both are answered.
func TestHTTP1PipelinedLLMRequestsAreAnswered(t *testing.T) {
	provider := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	tg := providerGateway(t, provider, "openAI")
	conn := dialTest(t, tg.addr(3000))
	if _, err := io.WriteString(conn, rawChatRequest("a")+rawChatRequest("a")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"ok"`) {
			t.Fatalf("answer %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
}

// TestHTTP1HalfCloseOnPlainRouteIsAnswered: on a plain route a client
// that half-closes after its request still gets the upstream's answer,
// however slow (only LLM requests take a FIN for a hang-up).
func TestHTTP1HalfCloseOnPlainRouteIsAnswered(t *testing.T) {
	var reqs atomic.Int32
	release := make(chan struct{})
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		<-release
		io.WriteString(w, "late")
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes: [{backends: [{host: '${UP}'}]}]
`, map[string]string{"UP": up})
	c := dialTest(t, tg.addr(3000))
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the request upstream", func() bool { return reqs.Load() == 1 })
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// (A watch taking the FIN for a hang-up notes it within microseconds;
	// the release below comes later.)
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer after the half-close: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "late" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

// thinkingProvider answers a streamed chat request with its head at once
// and then holds its first token until its connection goes away, as a
// provider thinking for a long time before it writes; it reports on gone.
func thinkingProvider(t *testing.T, gone chan<- string) string {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			gone <- r.URL.Path
		case <-time.After(30 * time.Second):
		}
	}))
}

// TestHangupWhileProviderThinks: a client that hangs up after the
// provider's head, while the provider has yet to send its first token,
// ends the provider's request (over HTTP/1.1: its connection closed; over
// HTTP/2: its stream reset), whether the stream is translated or passed
// on as it is; the request is logged client_gone.
func TestHangupWhileProviderThinks(t *testing.T) {
	for _, c := range []struct {
		desc, provider string
		h2             bool
	}{
		{"HTTP/1.1, as it is", "openAI", false},
		{"HTTP/1.1, translated", "anthropic", false},
		{"HTTP/2, translated", "anthropic", true},
	} {
		t.Run(c.desc, func(t *testing.T) {
			gone := make(chan string, 1)
			provider := thinkingProvider(t, gone)
			tg := providerGateway(t, provider, c.provider)
			body := `{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"think hard"}]}`
			if c.h2 {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(3000)+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := h2cClient().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				cancel() // RST_STREAM while the provider thinks
				resp.Body.Close()
			} else {
				conn := dialTest(t, tg.addr(3000))
				io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				conn.Close()
			}
			requireProviderCancelled(t, tg, gone, new(atomic.Int32))
		})
	}
}

// TestHangupWhileProviderSendsLongAnswer: a non-streamed answer longer than
// what the backend reads with its head comes as a body stream, which the
// gateway reads whole before it answers. A client hanging up while that
// body is on its way (here: head and a first part sent, the rest held)
// ends the provider's request too, and the request is logged client_gone.
func TestHangupWhileProviderSendsLongAnswer(t *testing.T) {
	for _, c := range []struct {
		desc string
		h2   bool
	}{{"HTTP/1.1", false}, {"HTTP/2", true}} {
		t.Run(c.desc, func(t *testing.T) {
			gone := make(chan string, 1)
			sent := make(chan struct{})
			provider := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "40000") // past backend.ResponseStreamThreshold
				w.WriteHeader(200)
				io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`+strings.Repeat("a", 10000))
				w.(http.Flusher).Flush()
				close(sent)
				select {
				case <-r.Context().Done():
					gone <- r.URL.Path
				case <-time.After(30 * time.Second):
				}
			}))
			tg := providerGateway(t, provider, "openAI")
			body := `{"model":"m","messages":[{"role":"user","content":"write a lot"}]}`
			if c.h2 {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(3000)+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				done := make(chan struct{})
				go func() {
					defer close(done)
					if resp, err := h2cClient().Do(req); err == nil {
						resp.Body.Close()
					}
				}()
				<-sent
				cancel() // RST_STREAM while the answer's body is on its way
				<-done
			} else {
				conn := dialTest(t, tg.addr(3000))
				io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
				<-sent
				conn.Close()
			}
			requireProviderCancelled(t, tg, gone, new(atomic.Int32))
		})
	}
}

// providerGateway is a gateway whose port 3000 sends every request to one
// provider of kind (openAI, anthropic, ...) at addr, with key k.
func providerGateway(t *testing.T, addr, kind string) *testGateway {
	return startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes: [{backends: [{ai: {name: p, hostOverride: "${UP}", provider: {${KIND}: {}}, policies: {backendAuth: {key: k}}}}]}]
`, map[string]string{"UP": addr, "KIND": kind})
}
