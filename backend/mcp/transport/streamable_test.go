package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testToken = "Bearer test-token"

// testCredentials are the credentials the tests' targets check.
func testCredentials() (http.Header, error) {
	return http.Header{"Authorization": {testToken}}, nil
}

// startSDK serves the SDK's Streamable HTTP handler on 127.0.0.1.
func startSDK(t *testing.T, opts *mcp.StreamableHTTPOptions) (*httptest.Server, *recorder) {
	t.Helper()
	srv := newMCPServer()
	rec := &recorder{}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	ts := httptest.NewServer(rec.wrap(h))
	t.Cleanup(ts.Close)
	return ts, rec
}

func dial(t *testing.T, o StreamableOptions) mcp.Connection {
	t.Helper()
	conn, err := DialStreamable(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestStreamableSDKServer(t *testing.T) {
	tests := []struct {
		name      string
		opts      *mcp.StreamableHTTPOptions
		stateless bool
	}{
		{name: "sse responses", opts: &mcp.StreamableHTTPOptions{}},
		{name: "json responses", opts: &mcp.StreamableHTTPOptions{JSONResponse: true}},
		{name: "stateless", opts: &mcp.StreamableHTTPOptions{Stateless: true}, stateless: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, rec := startSDK(t, tt.opts)
			conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client(), HeaderFunc: testCredentials})
			d := newDriver(t, conn)
			exerciseStreamable(t, d, rec, tt.opts.JSONResponse, tt.stateless)
			sid := conn.SessionID()
			if tt.stateless != (sid == "") {
				t.Fatalf("session id %q (stateless %v)", sid, tt.stateless)
			}
			// The standalone GET stream opens on a goroutine of its own after
			// initialize: wait for it to reach the server before closing, or
			// a fast exercise closes first and the GET is never sent.
			for deadline := time.Now().Add(5 * time.Second); rec.count(http.MethodGet) == 0; {
				if time.Now().After(deadline) {
					t.Fatal("the client never opened its GET stream")
				}
				time.Sleep(time.Millisecond)
			}
			if err := conn.Close(); err != nil {
				t.Fatal(err)
			}
			// Close waited for every goroutine: the record is complete.
			reqs := rec.all()
			var deletes, gets int
			for i, s := range reqs {
				if s.Auth != testToken {
					t.Errorf("request %d (%s %s) without the extra header", i, s.Method, s.RPC)
				}
				switch s.Method {
				case http.MethodPost:
					if s.CType != "application/json" || s.Accept != "application/json, text/event-stream" {
						t.Errorf("POST %s: Content-Type %q, Accept %q", s.RPC, s.CType, s.Accept)
					}
					if s.RPC == "initialize" {
						if s.Session != "" || s.Version != "" {
							t.Errorf("initialize sent session %q version %q", s.Session, s.Version)
						}
						continue
					}
					if s.Session != sid || s.Version != testVersion {
						t.Errorf("POST %s: session %q version %q, want %q %q", s.RPC, s.Session, s.Version, sid, testVersion)
					}
				case http.MethodGet:
					gets++
					if s.Accept != "text/event-stream" || s.Session != sid {
						t.Errorf("GET: Accept %q session %q", s.Accept, s.Session)
					}
					if tt.stateless && s.Status != http.StatusMethodNotAllowed {
						t.Errorf("stateless GET answered %d", s.Status)
					}
				case http.MethodDelete:
					deletes++
					if s.Session != sid {
						t.Errorf("DELETE of session %q, want %q", s.Session, sid)
					}
				}
			}
			if tt.stateless {
				if deletes != 0 || gets != 1 {
					t.Errorf("stateless: %d DELETEs, %d GETs (405 must stop the stream)", deletes, gets)
				}
			} else if deletes != 1 || gets < 1 {
				t.Errorf("%d DELETEs, %d GETs", deletes, gets)
			}
			if _, err := conn.Read(context.Background()); err != io.EOF {
				t.Errorf("Read after Close: %v", err)
			}
			if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "ping"}); err == nil {
				t.Error("Write after Close succeeded")
			}
		})
	}
}

func exerciseStreamable(t *testing.T, d *driver, rec *recorder, jsonMode, stateless bool) {
	t.Helper()
	exercise(t, d, false)
	if stateless {
		// The SDK rejects requests to the client without a session. The
		// client opens its standalone stream on a goroutine of its own:
		// the test's count of GETs waits for the server to have seen it
		// (answered 405), which under load may come after the calls.
		poll(t, "the standalone stream's GET", func() bool {
			for _, s := range rec.all() {
				if s.Method == http.MethodGet {
					return true
				}
			}
			return false
		})
		return
	}
	if jsonMode {
		// Requests to the client travel on the standalone stream: wait
		// until the server has it open.
		poll(t, "the standalone stream", func() bool { return rec.flushed.Load() > 0 })
	}
	got := d.tool("progress_roots", map[string]any{}, map[string]any{"progressToken": "tok-1"})
	if got != "roots: file:///workspace/project" {
		t.Fatalf("progress_roots = %q: the server did not get our roots", got)
	}
	if d.rootsAsked != 1 || len(d.progress) != 2 {
		t.Fatalf("roots asked %d times, progress %v", d.rootsAsked, d.progress)
	}
}

// A second connection resumes the session of the first; when the session is
// gone, requests are answered with ErrSessionExpired and Close sends no
// DELETE for it.
func TestStreamableResumeAndExpiry(t *testing.T) {
	ts, rec := startSDK(t, &mcp.StreamableHTTPOptions{})
	first := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	d1 := newDriver(t, first)
	exercise(t, d1, false)
	sid := first.SessionID()
	if sid == "" {
		t.Fatal("no session id")
	}

	second := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client(), SessionID: sid, ProtocolVersion: testVersion})
	if second.SessionID() != sid {
		t.Fatalf("resumed session id %q", second.SessionID())
	}
	d2 := newDriver(t, second)
	if got := d2.tool("echo", map[string]any{"text": "resumed"}, nil); got != "resumed" {
		t.Fatalf("echo on the resumed session = %q", got)
	}
	d2.rootsAsked = 0
	if got := d2.tool("progress_roots", map[string]any{}, nil); got != "roots: file:///workspace/project" || d2.rootsAsked != 1 {
		t.Fatalf("progress_roots on the resumed session = %q", got)
	}
	// Closing the second connection ends the upstream session.
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(http.MethodDelete); n != 1 {
		t.Fatalf("%d DELETEs after Close", n)
	}

	r := d1.call("tools/list", map[string]any{})
	if r.Error == nil || !errors.Is(r.Error, ErrSessionExpired) {
		t.Fatalf("after the session was deleted: %+v", r)
	}
	wire, err := jsonrpc.EncodeMessage(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(wire), fmt.Sprintf(`"code":%d`, CodeSessionExpired)) || !strings.Contains(string(wire), "expired") {
		t.Fatalf("expired response on the wire: %s", wire)
	}
	_ = first.Close()
	if n := rec.count(http.MethodDelete); n != 1 {
		t.Fatalf("%d DELETEs: Close deleted an expired session", n)
	}
}

// The server closes the SSE stream of a call midway (SEP-1699); the
// connection resumes it with Last-Event-ID and gets the rest.
func TestStreamableResumesPostStream(t *testing.T) {
	ts, rec := startSDK(t, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	d := newDriver(t, conn)
	result[map[string]any](t, d.call("initialize", initParams("2025-11-25")))
	d.notify("notifications/initialized", map[string]any{})
	if got := d.tool("interrupt", map[string]any{}, map[string]any{"progressToken": 7}); got != "resumed" {
		t.Fatalf("interrupt = %q", got)
	}
	if len(d.progress) != 2 {
		t.Fatalf("progress %v", d.progress)
	}
	resumed := false
	for _, s := range rec.all() {
		if s.Method == http.MethodGet && s.LastID != "" {
			resumed = true
		}
	}
	if !resumed {
		t.Fatalf("no GET with Last-Event-ID: %+v", rec.all())
	}
}

// fake is a scripted Streamable HTTP server.
func fake(t *testing.T, h http.HandlerFunc) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	ts := httptest.NewServer(rec.wrap(h))
	t.Cleanup(ts.Close)
	return ts, rec
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func TestStreamableHTTPFailures(t *testing.T) {
	tests := []struct {
		name    string
		session string // resume with this session id
		max     int
		reply   func(w http.ResponseWriter)
		kind    error
		code    int64
		want    []string
	}{
		{name: "401", reply: func(w http.ResponseWriter) { http.Error(w, "token expired", http.StatusUnauthorized) },
			kind: ErrUnauthorized, code: jsonrpc.CodeInternalError, want: []string{"authorization", "401", "token expired"}},
		{name: "403", reply: func(w http.ResponseWriter) { w.WriteHeader(http.StatusForbidden) },
			kind: ErrUnauthorized, code: jsonrpc.CodeInternalError, want: []string{"authorization", "403"}},
		{name: "500", reply: func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) },
			code: jsonrpc.CodeInternalError, want: []string{"server error", "HTTP 500", "boom"}},
		{name: "503 with a JSON-RPC error", reply: func(w http.ResponseWriter) {
			writeJSON(w, 503, `{"jsonrpc":"2.0","id":101,"error":{"code":-32000,"message":"overloaded"}}`)
		}, code: -32000, want: []string{"HTTP 503", "overloaded"}},
		{name: "400", reply: func(w http.ResponseWriter) { http.Error(w, "bad accept", http.StatusBadRequest) },
			code: jsonrpc.CodeInternalError, want: []string{"rejected tools/list", "HTTP 400", "bad accept"}},
		{name: "404 without a session", reply: func(w http.ResponseWriter) { http.NotFound(w, nil) },
			code: jsonrpc.CodeInternalError, want: []string{"HTTP 404"}},
		{name: "404 with a session", session: "s-1", reply: func(w http.ResponseWriter) { http.Error(w, "session not found", http.StatusNotFound) },
			kind: ErrSessionExpired, code: CodeSessionExpired, want: []string{"expired", "404"}},
		// The TypeScript SDK examples' answer to a session id they do not know.
		{name: "400 with a session, answering no request", session: "s-1", reply: func(w http.ResponseWriter) {
			writeJSON(w, 400, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
		}, kind: ErrSessionExpired, code: CodeSessionExpired, want: []string{"expired", "HTTP 400", "No valid session ID"}},
		{name: "400 with a session, plain text", session: "s-1", reply: func(w http.ResponseWriter) { http.Error(w, "unknown session", http.StatusBadRequest) },
			kind: ErrSessionExpired, code: CodeSessionExpired, want: []string{"expired", "HTTP 400", "unknown session"}},
		// The TypeScript SDK's answer to a message its schema refuses (a
		// "_meta": null): the request's refusal, not the session's.
		{name: "400 with a session, parse error without id", session: "s-1", reply: func(w http.ResponseWriter) {
			writeJSON(w, 400, `{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: Invalid JSON-RPC message"},"id":null}`)
		}, code: jsonrpc.CodeParseError, want: []string{"rejected tools/list", "HTTP 400", "Parse error"}},
		{name: "400 with a session, invalid request without id", session: "s-1", reply: func(w http.ResponseWriter) {
			writeJSON(w, 400, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: Server already initialized"}}`)
		}, code: jsonrpc.CodeInvalidRequest, want: []string{"rejected tools/list", "HTTP 400", "already initialized"}},
		{name: "400 with a session, answering the request", session: "s-1", reply: func(w http.ResponseWriter) {
			writeJSON(w, 400, `{"jsonrpc":"2.0","id":101,"error":{"code":-32602,"message":"bad cursor"}}`)
		}, code: -32602, want: []string{"rejected tools/list", "HTTP 400", "bad cursor"}},
		{name: "unsupported content type", reply: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "hi")
		}, code: jsonrpc.CodeInternalError, want: []string{"unsupported content type"}},
		{name: "body over the bound", max: 64, reply: func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":101,"result":{"padding":"`+strings.Repeat("x", 100)+`"}}`)
		}, code: jsonrpc.CodeInternalError, want: []string{"bad response", "larger than 64"}},
		{name: "SSE event over the bound", max: 64, reply: func(w http.ResponseWriter) {
			sseHead(w)
			sseEvent(w, `data: {"jsonrpc":"2.0","id":101,"result":{"padding":"`+strings.Repeat("x", 100)+`"}}`+"\n\n")
		}, code: jsonrpc.CodeInternalError, want: []string{"broke before the response", "too large"}},
		{name: "JSON answer to another id", reply: func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`)
		}, code: jsonrpc.CodeInternalError, want: []string{"bad response", "does not answer tools/list"}},
		{name: "JSON notification without the answer", reply: func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
		}, code: jsonrpc.CodeInternalError, want: []string{"bad response", "does not answer tools/list"}},
		{name: "bad JSON", reply: func(w http.ResponseWriter) { writeJSON(w, 200, `{"jsonrpc":`) },
			code: jsonrpc.CodeInternalError, want: []string{"bad response"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				tt.reply(w)
			})
			conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client(), SessionID: tt.session, MaxMessageBytes: tt.max})
			d := newDriver(t, conn)
			r := d.call("tools/list", map[string]any{})
			if r.Error == nil {
				t.Fatalf("no error: %s", r.Result)
			}
			for _, kind := range []error{ErrSessionExpired, ErrUnauthorized} {
				if errors.Is(r.Error, kind) != (kind == tt.kind) {
					t.Errorf("errors.Is(%v, %v) = %v", r.Error, kind, !(kind == tt.kind))
				}
			}
			var w *jsonrpc.Error
			if !errors.As(r.Error, &w) || w.Code != tt.code {
				t.Errorf("code of %v: %+v, want %d", r.Error, w, tt.code)
			}
			for _, s := range tt.want {
				if !strings.Contains(r.Error.Error(), s) {
					t.Errorf("error %q does not mention %q", r.Error, s)
				}
			}
		})
	}
}

// A notification the server refuses is only logged; the next request's
// answer is the next message.
func TestStreamableRefusedNotification(t *testing.T) {
	ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case strings.Contains(string(body), "notifications/"):
			http.Error(w, "no", http.StatusInternalServerError)
		default:
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":101,"result":{"tools":[]}}`)
		}
	})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	d := newDriver(t, conn)
	d.notify("notifications/initialized", map[string]any{})
	if r := d.call("tools/list", nil); r.Error != nil {
		t.Fatal(r.Error)
	}
}

func TestStreamableJSONBatch(t *testing.T) {
	ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}},
			{"jsonrpc":"2.0","id":101,"result":{"ok":true}}]`)
	})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	d := newDriver(t, conn)
	d.send("tools/list", nil)
	if m, ok := d.read().(*jsonrpc.Request); !ok || m.Method != "notifications/message" {
		t.Fatalf("first message %+v", m)
	}
	if m, ok := d.read().(*jsonrpc.Response); !ok || string(m.Result) != `{"ok":true}` {
		t.Fatalf("second message %+v", m)
	}
}

func sseHead(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
}

func sseEvent(w http.ResponseWriter, ev string) {
	_, _ = io.WriteString(w, ev)
	w.(http.Flusher).Flush()
}

// A stream that ends without the response (and without event ids to resume
// it) is answered with an error.
func TestStreamableStreamEndsEarly(t *testing.T) {
	ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		sseHead(w)
		sseEvent(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
	})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	d := newDriver(t, conn)
	r := d.call("tools/call", map[string]any{"name": "x"})
	if len(d.progress) != 1 || r.Error == nil || !strings.Contains(r.Error.Error(), "ended the stream before the response") {
		t.Fatalf("progress %v, response %+v", d.progress, r)
	}
}

// Write returns at the response head, while the stream goes on.
func TestStreamableWriteReturnsAtHead(t *testing.T) {
	release := make(chan struct{})
	ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		sseHead(w)
		sseEvent(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		sseEvent(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":101,\"result\":{}}\n\n")
	})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	d := newDriver(t, conn)
	id, _ := jsonrpc.MakeID(float64(101))
	if err := conn.Write(d.ctx(), &jsonrpc.Request{ID: id, Method: "tools/call", Params: mustRaw(t, map[string]any{"name": "x"})}); err != nil {
		t.Fatal(err) // Write returned although the stream is open
	}
	if m, ok := d.read().(*jsonrpc.Request); !ok || m.Method != "notifications/progress" {
		t.Fatalf("first message %+v", m)
	}
	close(release)
	if r := d.wait(id); r.Error != nil {
		t.Fatal(r.Error)
	}
}

// Write's context bounds the wait for the response head.
func TestStreamableWriteContext(t *testing.T) {
	arrived := make(chan struct{}, 1)
	ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		id, _ := jsonrpc.MakeID(float64(1))
		errc <- conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/list"})
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want context.Canceled", err)
	}
}

// The standalone stream reconnects after a clean end, with Last-Event-ID.
func TestStreamableStandaloneReconnects(t *testing.T) {
	var mu sync.Mutex
	gets := 0
	ts, rec := fake(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			w.Header().Set("Mcp-Session-Id", "sess-9")
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":101,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"f","version":"1"}}}`)
		case http.MethodGet:
			mu.Lock()
			gets++
			n := gets
			mu.Unlock()
			sseHead(w)
			if n == 1 {
				sseEvent(w, "retry: 1\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
				return // a clean end
			}
			sseEvent(w, fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":%q}}\n\n", r.Header.Get("Last-Event-ID")))
			<-r.Context().Done()
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	d := newDriver(t, conn)
	d.call("initialize", initParams(testVersion))
	if conn.SessionID() != "sess-9" {
		t.Fatalf("session id %q", conn.SessionID())
	}
	if m, ok := d.read().(*jsonrpc.Request); !ok || m.Method != "notifications/tools/list_changed" {
		t.Fatalf("first stream message %+v", m)
	}
	m, ok := d.read().(*jsonrpc.Request)
	if !ok || m.Method != "notifications/message" || !strings.Contains(string(m.Params), `"e1"`) {
		t.Fatalf("after reconnecting: %+v", m)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range rec.all() {
		if s.Method != http.MethodPost && s.Session != "sess-9" {
			t.Errorf("%s without the session id", s.Method)
		}
	}
	if rec.count(http.MethodDelete) != 1 {
		t.Error("Close sent no DELETE")
	}
}

// With ListenOnDemand the standalone stream opens at Listen, closes at
// Unlisten (its upstream request ends) and opens again at the next
// Listen; a target that refused it (405) is not asked again.
func TestStreamableListenOnDemand(t *testing.T) {
	tests := []struct {
		name     string
		stream   bool
		wantGets int64 // after Listen, Unlisten, Listen
	}{
		{"stream", true, 2},
		{"no stream", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var open, gets atomic.Int64
			ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
				switch r.Method {
				case http.MethodPost:
					w.Header().Set("Mcp-Session-Id", "sess-1")
					writeJSON(w, 200, `{"jsonrpc":"2.0","id":101,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"f","version":"1"}}}`)
				case http.MethodGet:
					gets.Add(1)
					if !tt.stream {
						w.WriteHeader(http.StatusMethodNotAllowed)
						return
					}
					open.Add(1)
					defer open.Add(-1)
					sseHead(w)
					<-r.Context().Done()
				case http.MethodDelete:
					w.WriteHeader(http.StatusNoContent)
				}
			})
			conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client(), ListenOnDemand: true})
			c := conn.(*streamable)
			d := newDriver(t, conn)
			d.call("initialize", initParams(testVersion))
			if gets.Load() != 0 {
				t.Fatal("the stream opened before Listen")
			}
			wantOpen := int64(0)
			if tt.stream {
				wantOpen = 1
			}
			c.Listen()
			poll(t, "the stream", func() bool { return gets.Load() == 1 && open.Load() == wantOpen })
			if !tt.stream {
				poll(t, "the refusal noted", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.noStream })
			}
			c.Unlisten()
			poll(t, "the stream's end", func() bool { return open.Load() == 0 })
			c.Listen()
			poll(t, "the stream again", func() bool { return gets.Load() == tt.wantGets && open.Load() == wantOpen })
			c.mu.Lock()
			listening := c.listening
			c.mu.Unlock()
			if listening != tt.stream {
				t.Fatalf("listening %v after the second Listen", listening)
			}
			_ = conn.Close()
			poll(t, "the stream's end at Close", func() bool { return open.Load() == 0 })
		})
	}
}

// When nobody reads, the connection holds at most queueSize messages and
// loses none.
func TestStreamableBackpressure(t *testing.T) {
	const n = 300
	ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		sseHead(w)
		for i := range n {
			_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":%d}}\n\n", i)
		}
		sseEvent(w, "data: {\"jsonrpc\":\"2.0\",\"id\":101,\"result\":{}}\n\n")
	})
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	c := conn.(*streamable)
	d := newDriver(t, conn)
	id := d.send("tools/call", nil)
	poll(t, "a full queue", func() bool { return len(c.incoming) == queueSize })
	d.wait(id)
	if len(d.progress) != n {
		t.Fatalf("%d of %d notifications", len(d.progress), n)
	}
	for i, p := range d.progress {
		if int(p) != i {
			t.Fatalf("notification %d has progress %v", i, p)
		}
	}
}

// Close unblocks Read, may run concurrently and more than once, and
// later Writes fail.
func TestStreamableClose(t *testing.T) {
	ts, _ := fake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) })
	conn := dial(t, StreamableOptions{URL: ts.URL, Client: ts.Client()})
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		errc <- err
	}()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { _ = conn.Close() })
	}
	wg.Wait()
	if err := <-errc; err != io.EOF {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "x"}); !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

func TestDialStreamableOptions(t *testing.T) {
	tests := []struct {
		name string
		o    StreamableOptions
		want string
	}{
		{"no client", StreamableOptions{URL: "http://127.0.0.1/"}, "no HTTP client"},
		{"relative URL", StreamableOptions{URL: "/mcp", Client: http.DefaultClient}, "not an absolute"},
		{"bad scheme", StreamableOptions{URL: "ftp://x/", Client: http.DefaultClient}, "not an absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DialStreamable(context.Background(), tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestStandardHeaders(t *testing.T) {
	tests := []struct {
		name, version, method, params string
		wantMethod, wantName          string
	}{
		{"old version", "2025-06-18", "tools/call", `{"name":"echo"}`, "", ""},
		{"tools/call", "2026-07-28", "tools/call", `{"name":"echo"}`, "tools/call", "echo"},
		{"prompts/get", "2026-07-28", "prompts/get", `{"name":"p"}`, "prompts/get", "p"},
		{"resources/read", "2026-07-28", "resources/read", `{"uri":"file:///a"}`, "resources/read", "file:///a"},
		{"other method", "2026-07-28", "tools/list", `{}`, "tools/list", ""},
		{"unsafe name", "2026-07-28", "tools/call", `{"name":"a\nb"}`, "tools/call", ""},
		{"no version", "", "tools/call", `{"name":"echo"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.version != "" {
				h.Set(headerVersion, tt.version)
			}
			setStandardHeaders(h, &jsonrpc.Request{Method: tt.method, Params: []byte(tt.params)})
			if h.Get(headerMethod) != tt.wantMethod || h.Get(headerName) != tt.wantName {
				t.Fatalf("Mcp-Method %q, Mcp-Name %q", h.Get(headerMethod), h.Get(headerName))
			}
		})
	}
}
