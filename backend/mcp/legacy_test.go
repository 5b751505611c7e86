package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
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

// rawLegacy opens a legacy SSE stream on a raw connection, reads up to
// its endpoint event and returns the
// connection, a reader of the stream's body and the endpoint URL: the test
// then decides when the client reads.
func rawLegacy(t *testing.T, base string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req, _ := http.NewRequest(http.MethodGet, base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4<<10), req)
	if err != nil {
		t.Fatal(err)
	}
	body := bufio.NewReader(resp.Body)
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if data, ok := strings.CutPrefix(line, "data: /sse?sessionId="); ok {
			return conn, body, base + "/sse?sessionId=" + strings.TrimSpace(data)
		}
	}
}

// callCounter counts the calls of one method the backend answered
// (Metrics).
type callCounter struct {
	method string
	n      atomic.Int64
}

func (c *callCounter) ObserveMCP(method, _, _ string, _ bool, _ time.Duration) {
	if method == c.method {
		c.n.Add(1)
	}
}

// TestRelayLegacySlowReaderLosesNoAnswer: answers for a legacy SSE client
// that reads slowly wait for it (their calls held back), and all arrive;
// one that reads nothing for clientStall has its stream, and so its
// session, ended rather than answers dropped. The stream's 64-message
// queue used to drop what did not fit: 87 of 201 answers were lost.
func TestRelayLegacySlowReaderLosesNoAnswer(t *testing.T) {
	const calls = 200
	// The answers (25 MiB) outgrow the sockets' buffers and the stream's
	// queue together.
	big := strings.Repeat("x", 128<<10)
	start := func(t *testing.T, stall time.Duration) (*Backend, *bufio.Reader, net.Conn, *legacyClient) {
		srv := mcptest.StartHTTP(t, "a", mcptest.HTTPOptions{Options: mcptest.Options{Tools: []string{"echo"}}})
		b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: srv.URL}}})
		b.maxCalls = calls + 1
		answered := &callCounter{method: "tools/call"}
		b.opts.Metrics = answered
		b.clientStall = stall
		b.legacyKeepAlive = 20 * time.Millisecond
		base := strings.TrimSuffix(serveBackend(t, b, nil), "/mcp")
		conn, br, endpoint := rawLegacy(t, base)
		c := &legacyClient{t: t, endpoint: endpoint}
		if status, _ := c.post(legacyInit); status != http.StatusAccepted {
			t.Fatalf("initialize: %d", status)
		}
		accepted := 0
		for id := 2; id < calls+2; id++ {
			body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + big + `"}}}`
			status, out := c.post(body)
			if status == http.StatusNotFound && stall < time.Second {
				break // the stream has ended already
			}
			if status != http.StatusAccepted {
				t.Fatalf("call %d: %d %s", id, status, out)
			}
			accepted++
		}
		// Every call has its answer, which waits for the client.
		mcptest.WaitFor(t, func() bool { return answered.n.Load() == int64(accepted) })
		return b, br, conn, c
	}

	t.Run("slow reader gets every answer", func(t *testing.T) {
		_, br, conn, _ := start(t, time.Minute)
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		seen := map[string]bool{}
		for len(seen) < calls+1 { // the initialize's answer too
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%d answers of %d, then: %v", len(seen), calls+1, err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal([]byte(data), &m) == nil && len(m.ID) > 0 {
					seen[string(m.ID)] = true
				}
			}
		}
	})

	t.Run("a client that reads nothing loses its session", func(t *testing.T) {
		b, br, conn, c := start(t, 50*time.Millisecond)
		mcptest.WaitFor(t, func() bool { return b.SessionCount() == 0 })
		if status, _ := c.post(`{"jsonrpc":"2.0","id":999,"method":"ping"}`); status != http.StatusNotFound {
			t.Fatalf("a POST after the stream ended: %d, want 404", status)
		}
		// The stream ends once what was written drains.
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatalf("the stream did not end: %v", err)
		}
	})
}
