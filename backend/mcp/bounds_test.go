package mcp

import (
	"encoding/json"
	"fmt"
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

// fakeTarget is a hand-written streamable HTTP MCP target on 127.0.0.1
// answering in plain JSON: initialize declares the tools capability,
// notifications get 202, and every other request is answered by handle
// (a nil result: method not found; a rawAnswer: the body it makes). It
// counts the requests per method.
type fakeTarget struct {
	URL   string
	calls map[string]*atomic.Int64
}

func (f *fakeTarget) count(method string) int64 {
	if c := f.calls[method]; c != nil {
		return c.Load()
	}
	return 0
}

func startFakeTarget(t *testing.T, handle func(method string, params json.RawMessage) any) *fakeTarget {
	t.Helper()
	f := &fakeTarget{calls: map[string]*atomic.Int64{}}
	for _, m := range []string{"initialize", "tools/list", "tools/call", "notifications/cancelled", "notifications/initialized", "notifications/roots/list_changed", "other"} {
		f.calls[m] = new(atomic.Int64)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		data, _ := io.ReadAll(r.Body)
		if json.Unmarshal(data, &msg) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c := f.calls[msg.Method]
		if c == nil {
			c = f.calls["other"]
		}
		c.Add(1)
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result any
		if msg.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "fake-session")
			result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "fake", "version": "1"}}
		} else {
			result = handle(msg.Method, msg.Params)
		}
		if raw, ok := result.(rawAnswer); ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(raw(msg.ID))
			return
		}
		resp := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		if result == nil {
			resp["error"] = map[string]any{"code": -32601, "message": "Method not found"}
		} else {
			resp["result"] = result
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	f.URL = "http://" + ln.Addr().String() + "/mcp"
	return f
}

// rawAnswer is a fakeTarget answer written as it is: the body for a
// request id.
type rawAnswer func(id json.RawMessage) []byte

// pager answers tools/list with pages of n tools whose names are padded to
// pad bytes, the last page being last (-1: never).
func pager(n, pad, last int) func(string, json.RawMessage) any {
	return func(method string, params json.RawMessage) any {
		if method != "tools/list" {
			return nil
		}
		var p struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(params, &p)
		page := len(p.Cursor) // the cursor is one more "x" per page
		tools := make([]map[string]any, n)
		for i := range tools {
			tools[i] = map[string]any{"name": "t" + strings.Repeat("x", pad) + string(rune('a'+i%26)), "inputSchema": map[string]any{"type": "object"}}
		}
		res := map[string]any{"tools": tools}
		if last < 0 || page < last {
			res["nextCursor"] = strings.Repeat("x", page+1)
		}
		return res
	}
}

// TestRelayBoundsListAggregation: a list request reads at most maxPages
// pages of a target and at most maxListBytes / maxListItems over all its
// targets; past a bound it fails with an error naming it, never cut short
// in silence. It used to keep every page (20 pages of 13.5 MB: 3.3 GB) and
// to answer the first 100 pages of an endless pager as if complete.
func TestRelayBoundsListAggregation(t *testing.T) {
	bigPage := pager(1, maxListBytes/3, -1) // three pages make a full message
	cases := []struct {
		name    string
		targets []func(string, json.RawMessage) any
		want    string // in the answer
		pages   int64  // at most, per target
	}{
		{"within bounds", []func(string, json.RawMessage) any{pager(10, 0, 2)}, `"tools":[`, 3},
		{"endless big pages", []func(string, json.RawMessage) any{bigPage}, "bound for one list request (16 MiB, 100000 items)", 4},
		{"big pages over two targets", []func(string, json.RawMessage) any{pager(1, maxListBytes*2/3, 0), pager(1, maxListBytes*2/3, 0)}, "bound for one list request (16 MiB", 1},
		{"tiny items", []func(string, json.RawMessage) any{pager(maxListItems/2+1, 0, 1)}, "100000 items", 2},
		{"endless pager", []func(string, json.RawMessage) any{pager(1, 0, -1)}, "tools/list has more than 100 pages", maxPages},
		{"not an array", []func(string, json.RawMessage) any{func(string, json.RawMessage) any { return map[string]any{"tools": map[string]any{"name": "x"}} }}, "malformed tools/list result", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.MCPBackend{}
			var fakes []*fakeTarget
			for i, h := range tc.targets {
				f := startFakeTarget(t, h)
				fakes = append(fakes, f)
				cfg.Targets = append(cfg.Targets, config.MCPTarget{Name: string(rune('a' + i)), Kind: config.MCPTargetStreamable, URL: f.URL})
			}
			endpoint := serveBackend(t, newTestBackend(t, cfg), nil)
			id := initSession(t, endpoint)
			status, _, body := rpc{session: id, accept: "application/json", body: toolsList}.post(t, endpoint)
			if status != http.StatusOK || !strings.Contains(body, tc.want) {
				t.Fatalf("tools/list: %d %.300s; want %q in it", status, body, tc.want)
			}
			for _, f := range fakes {
				if n := f.count("tools/list"); n > tc.pages {
					t.Errorf("a target was asked for %d pages, want at most %d", n, tc.pages)
				}
			}
		})
	}
}

// TestRelayCancelsCallBeforeResponseHead: a call that times out before a
// plain-JSON target sent its response head (it sends it with the answer)
// is cancelled at the target. The failed Write skipped the
// notifications/cancelled that a call ending later gets.
func TestRelayCancelsCallBeforeResponseHead(t *testing.T) {
	release := make(chan struct{})
	f := startFakeTarget(t, func(method string, _ json.RawMessage) any {
		if method != "tools/call" {
			return nil
		}
		<-release
		return map[string]any{"content": []any{}}
	})
	t.Cleanup(func() { close(release) }) // before the target closes
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: f.URL}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := serveBackendOn(t, b, ln, func(r *Request) { r.Timeout = 100 * time.Millisecond })
	id := initSession(t, endpoint)
	_, _, body := rpc{session: id, accept: "application/json", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{}}}`}.post(t, endpoint)
	if !strings.Contains(body, "target a: timed out") {
		t.Fatalf("the call answered %s", body)
	}
	mcptest.WaitFor(t, func() bool { return f.count("notifications/cancelled") == 1 })
}

// TestRelayForwardsOnlyMCPMethods: a request whose method MCP does not
// define answers -32601 and a notification MCP does not define from a
// client is dropped; neither reaches the target, with one target or
// several. They used to be forwarded raw (a notification "tools/call"
// naming a denied tool, "Tools/call", "tools/call\x00").
func TestRelayForwardsOnlyMCPMethods(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(strconv.Itoa(n)+" targets", func(t *testing.T) {
			cfg := &config.MCPBackend{}
			var fakes []*fakeTarget
			for i := range n {
				f := startFakeTarget(t, func(string, json.RawMessage) any { return map[string]any{} })
				fakes = append(fakes, f)
				cfg.Targets = append(cfg.Targets, config.MCPTarget{Name: string(rune('a' + i)), Kind: config.MCPTargetStreamable, URL: f.URL})
			}
			endpoint := serveBackend(t, newTestBackend(t, cfg), nil)
			id := initSession(t, endpoint)
			post := func(body string) (int, string) {
				status, _, out := rpc{session: id, accept: "application/json", body: body}.post(t, endpoint)
				return status, out
			}
			for _, method := range []string{"Tools/call", `tools/call\u0000`, "secret/method", "notifications/tools/call"} {
				status, out := post(`{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{"name":"secret"}}`)
				if status != http.StatusOK || !strings.Contains(out, `"code":-32601`) {
					t.Errorf("request %q: %d %s, want -32601", method, status, out)
				}
			}
			for _, method := range []string{"tools/call", "Tools/call", "notifications/whatever", `notifications/initialized\u0000`} {
				if status, out := post(`{"jsonrpc":"2.0","method":"` + method + `","params":{"name":"secret"}}`); status != http.StatusAccepted {
					t.Errorf("notification %q: %d %s, want 202", method, status, out)
				}
			}
			// What MCP defines still passes.
			if status, _ := post(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`); status != http.StatusAccepted {
				t.Fatalf("roots/list_changed: %d", status)
			}
			for _, f := range fakes {
				if got := f.count("notifications/roots/list_changed"); got != 1 {
					t.Errorf("a target got roots/list_changed %d times, want 1", got)
				}
				if got := f.count("other") + f.count("tools/call"); got != 0 {
					t.Errorf("a target got %d messages of undefined methods", got)
				}
			}
		})
	}
}

// TestRelayClientCancelAnswersCallBeforeResponseHead: a client's
// notifications/cancelled answers its call at once (-32603 cancelled, as
// when the target answers with an event stream) even when the target
// answers in plain JSON and ignores the cancellation: its response head
// comes only with the answer. The POST used to wait for the call's bound
// (10 minutes), keeping its place among the session's calls.
func TestRelayClientCancelAnswersCallBeforeResponseHead(t *testing.T) {
	for _, accept := range []string{"application/json", "application/json, text/event-stream"} {
		t.Run(accept, func(t *testing.T) {
			release := make(chan struct{})
			f := startFakeTarget(t, func(method string, _ json.RawMessage) any {
				if method != "tools/call" {
					return nil
				}
				<-release // deaf to notifications/cancelled
				return map[string]any{"content": []any{}}
			})
			t.Cleanup(func() { close(release) }) // before the target closes
			b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: f.URL}}})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			endpoint := serveBackendOn(t, b, ln, func(r *Request) { r.Timeout = time.Minute })
			id := initSession(t, endpoint)
			type answer struct {
				status int
				body   string
			}
			answered := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{}}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", accept)
				req.Header.Set("Mcp-Session-Id", id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answered <- answer{body: err.Error()}
					return
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				answered <- answer{resp.StatusCode, string(body)}
			}()
			mcptest.WaitFor(t, func() bool { return f.count("tools/call") == 1 })
			if status, _, body := (rpc{session: id, body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`}).post(t, endpoint); status != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: %d %s", status, body)
			}
			select {
			case a := <-answered:
				if a.status != http.StatusOK || !strings.Contains(a.body, `"id":3`) || !strings.Contains(a.body, `"code":-32603`) || !strings.Contains(a.body, "cancelled") {
					t.Fatalf("the cancelled call answered %d %s", a.status, a.body)
				}
			case <-time.After(10 * time.Second): // a bound, well under the call's minute
				t.Fatal("the cancelled call was not answered")
			}
			mcptest.WaitFor(t, func() bool { return f.count("notifications/cancelled") == 1 })
			if n := inFlight(b); n != 0 {
				t.Fatalf("%d calls still in flight", n)
			}
		})
	}
}

// TestRelayRefusesResponseWithoutResult: a target's response with neither
// a result nor an error (a null or missing result) is answered with a
// clean -32603 error naming the target, as other malformed answers are,
// and a list counts it as a failure. It used to reach the client as
// "result":null, which no client can use.
func TestRelayRefusesResponseWithoutResult(t *testing.T) {
	bodies := map[string]string{
		"null":    `{"jsonrpc":"2.0","id":%s,"result":null}`,
		"absent":  `{"jsonrpc":"2.0","id":%s}`,
		"spaced":  `{"jsonrpc":"2.0","id":%s,"result": null }`,
		"present": `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"fine"}]}}`,
	}
	f := startFakeTarget(t, func(method string, params json.RawMessage) any {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(params, &p)
		if method == "tools/list" {
			p.Name = "null"
		}
		return rawAnswer(func(id json.RawMessage) []byte { return []byte(fmt.Sprintf(bodies[p.Name], id)) })
	})
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: f.URL}}})
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	for _, tc := range []struct{ name, body, want string }{
		{"null", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"null","arguments":{}}}`, "target a: bad response"},
		{"absent", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"absent","arguments":{}}}`, "target a: bad response"},
		{"spaced", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"spaced","arguments":{}}}`, "target a: bad response"},
		{"list", toolsList, "target a: bad response"},
		{"present", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"present","arguments":{}}}`, `"text":"fine"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, out := rpc{session: id, accept: "application/json", body: tc.body}.post(t, endpoint)
			if status != http.StatusOK || !strings.Contains(out, tc.want) || strings.Contains(out, `"result":null`) {
				t.Fatalf("%d %s, want %s", status, out, tc.want)
			}
			if tc.name != "present" && !strings.Contains(out, `"code":-32603`) {
				t.Fatalf("%s: not a -32603 error", out)
			}
		})
	}
}
