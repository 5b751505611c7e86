package mcp

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/config"
)

// legacyClient is a raw client of the legacy SSE transport: its stream
// and the endpoint it POSTs to.
type legacyClient struct {
	t        *testing.T
	endpoint string // from the endpoint event, absolute
	body     io.ReadCloser
	events   *bufio.Reader
}

// openLegacy opens a legacy SSE stream on base (http://host:port) and
// reads its endpoint event.
func openLegacy(t *testing.T, base string) *legacyClient {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET /sse: %d", resp.StatusCode)
	}
	c := &legacyClient{t: t, body: resp.Body, events: bufio.NewReader(resp.Body)}
	t.Cleanup(c.close)
	typ, data := c.event()
	if typ != "endpoint" {
		t.Fatalf("first event %q %q", typ, data)
	}
	c.endpoint = base + data
	return c
}

func (c *legacyClient) close() { c.body.Close() }

// event reads the next event (comments skipped): its type and data.
func (c *legacyClient) event() (string, string) {
	c.t.Helper()
	typ, data := "", ""
	for {
		line, err := c.events.ReadString('\n')
		if err != nil {
			c.t.Fatalf("legacy stream: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && (typ != "" || data != ""):
			if typ == "" {
				typ = "message"
			}
			return typ, data
		case strings.HasPrefix(line, "event: "):
			typ = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data += line[len("data: "):]
		}
	}
}

// message reads the next message event's data.
func (c *legacyClient) message() string {
	c.t.Helper()
	for {
		if typ, data := c.event(); typ == "message" {
			return data
		}
	}
}

// post sends a message to the session's endpoint; it returns the status
// and body.
func (c *legacyClient) post(body string) (int, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

const legacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestRelayLegacyRefusesSecondInitialize: initialize opens a legacy
// session once; another on the live session is a JSON-RPC error and
// reaches no target, and every upstream session ends with the stream. A
// second initialize used to connect every target again over the first's
// connections, which were then never closed (upstream sessions, HTTP
// connections and stdio processes leaked).
func TestRelayLegacyRefusesSecondInitialize(t *testing.T) {
	srv := mcptest.StartHTTP(t, "a", mcptest.HTTPOptions{})
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: srv.URL}}})
	b.legacyKeepAlive = 20 * time.Millisecond // a closed stream is noticed at once
	base := strings.TrimSuffix(serveBackend(t, b, nil), "/mcp")
	c := openLegacy(t, base)
	if status, _ := c.post(legacyInit); status != http.StatusAccepted {
		t.Fatalf("initialize: %d", status)
	}
	if msg := c.message(); !strings.Contains(msg, `"protocolVersion"`) {
		t.Fatalf("initialize answered %s", msg)
	}
	for id := 2; id <= 4; id++ {
		again := strings.Replace(legacyInit, `"id":1`, `"id":`+strconv.Itoa(id), 1)
		if status, _ := c.post(again); status != http.StatusAccepted {
			t.Fatalf("initialize again: %d", status)
		}
		if msg := c.message(); !strings.Contains(msg, `"id":`+strconv.Itoa(id)) || !strings.Contains(msg, `"code":-32600`) || !strings.Contains(msg, "already initialized") {
			t.Fatalf("initialize again answered %s", msg)
		}
	}
	if n := srv.Recorder.MethodCount("initialize"); n != 1 {
		t.Fatalf("the target saw %d initializes, want 1", n)
	}
	// The session works on its one upstream session.
	c.post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	if msg := c.message(); !strings.Contains(msg, `"id":9`) || !strings.Contains(msg, "hi") {
		t.Fatalf("echo answered %s", msg)
	}
	c.close()
	mcptest.WaitFor(t, func() bool {
		return len(srv.Recorder.Sessions()) == 1 && len(srv.Recorder.Closed()) == 1
	})
}

// sessionCalls is the client calls in flight on b's sessions.
func sessionCalls(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.sessions {
		n += int(s.calls.Load())
	}
	return n
}

// blockCall is a tools/call of the target's "block" tool, which runs until
// cancelled.
func blockCall(id int) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"block","arguments":{}}}`
}

func cancelCall(id int) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + strconv.Itoa(id) + `}}`
}

// TestRelayBoundsCallsPerSession: a session runs at most maxCalls client
// calls at once, over either transport; past it a call is refused with
// 429, a JSON-RPC error naming the bound, and reaches no target. A legacy
// SSE session used to accept any number (each answered 202 at once), each
// holding a goroutine and an upstream connection for up to 10 minutes.
func TestRelayBoundsCallsPerSession(t *testing.T) {
	const bound = 4
	cases := []struct {
		name string
		// start opens a session and returns a way to post to it, in the
		// background for calls that do not end.
		start func(t *testing.T, base string) (post func(body string, background bool) (int, string))
	}{
		{"legacy SSE", func(t *testing.T, base string) func(string, bool) (int, string) {
			c := openLegacy(t, base)
			c.post(legacyInit)
			c.message()
			return func(body string, _ bool) (int, string) { return c.post(body) }
		}},
		{"streamable HTTP", func(t *testing.T, base string) func(string, bool) (int, string) {
			endpoint := base + "/mcp"
			id := initSession(t, endpoint)
			return func(body string, background bool) (int, string) {
				r := rpc{session: id, accept: "application/json", body: body}
				if background {
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Accept", "application/json")
						req.Header.Set("Mcp-Session-Id", id)
						if resp, err := http.DefaultClient.Do(req); err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					}()
					return http.StatusAccepted, ""
				}
				status, _, body := r.post(t, endpoint)
				return status, body
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, calls := target(t, "a", "block")
			b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: url}}})
			b.maxCalls = bound
			b.legacyKeepAlive = 20 * time.Millisecond
			base := strings.TrimSuffix(serveBackend(t, b, nil), "/mcp")
			post := tc.start(t, base)
			for id := 1; id <= bound; id++ {
				if status, body := post(blockCall(id), true); status != http.StatusAccepted {
					t.Fatalf("call %d: %d %s", id, status, body)
				}
			}
			mcptest.WaitFor(t, func() bool { return calls.Load() == bound })
			status, body := post(blockCall(bound+1), false)
			if status != http.StatusTooManyRequests || !strings.Contains(body, `"id":5`) || !strings.Contains(body, "too many calls in flight on this session (4") {
				t.Fatalf("call past the bound: %d %s", status, body)
			}
			// A call that ends makes room for another.
			post(cancelCall(1), false)
			mcptest.WaitFor(t, func() bool { return sessionCalls(b) == bound-1 })
			if status, body := post(blockCall(bound+2), true); status != http.StatusAccepted {
				t.Fatalf("call after one ended: %d %s", status, body)
			}
			mcptest.WaitFor(t, func() bool { return calls.Load() == bound+1 })
			for id := 2; id <= bound+2; id++ {
				post(cancelCall(id), false)
			}
			mcptest.WaitFor(t, func() bool { return sessionCalls(b) == 0 })
		})
	}
}
