package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioModeEnv makes the test binary run as an MCP server on stdin/stdout.
const stdioModeEnv = "TRANSPORT_TEST_STDIO_MODE"

// stdioBannerEnv makes that server print lines that are not JSON-RPC
// messages on stdout before it serves, as servers that print() a banner
// or log to stdout do.
const stdioBannerEnv = "TRANSPORT_TEST_STDIO_BANNER"

// noiseLines are what the noise tool, and the server started with
// stdioBannerEnv, write on stdout: none is a JSON-RPC message or batch.
var noiseLines = []string{
	"transport test server v1 starting",
	`{"level":"info","msg":"listening on stdio"}`,
	`{"jsonrpc":"2.0","id":7,"result":{}} trailing`,
	`{"jsonrpc":"1.0","id":7,"result":{}}`,
	`[]`,
	`[{"jsonrpc":"2.0","id":7,"result":{}},{"level":"info"}]`,
	`{"jsonrpc":"2.0","id":`,
	strings.Repeat("long banner ", 1000),
}

func TestMain(m *testing.M) {
	if os.Getenv(stdioModeEnv) == "server" {
		fmt.Fprintln(os.Stderr, "stdio test server starting")
		if os.Getenv(stdioBannerEnv) != "" {
			fmt.Println(strings.Join(noiseLines, "\n"))
		}
		if err := newMCPServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "stdio test server:", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// newMCPServer builds the SDK server every test talks to.
func newMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "transport-test", Version: "1.0.0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "returns its text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return textResult(in.Text), nil, nil
		})
	// progress_roots sends two progress notifications, asks the client for
	// its roots and returns them.
	mcp.AddTool(s, &mcp.Tool{Name: "progress_roots", Description: "progress and a request to the client"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 2; i++ {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2}); err != nil {
						return nil, nil, err
					}
				}
			}
			//lint:ignore SA1019 roots is deprecated from 2026-07-28 but is what the tests negotiate; any request to the client will do
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			var uris []string
			for _, r := range roots.Roots {
				uris = append(uris, r.URI)
			}
			return textResult("roots: " + strings.Join(uris, ",")), nil, nil
		})
	// interrupt closes its SSE stream in the middle of the call (SEP-1699);
	// the client resumes it with Last-Event-ID.
	mcp.AddTool(s, &mcp.Tool{Name: "interrupt", Description: "closes the SSE stream mid-call"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1})
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 5 * time.Millisecond})
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2})
			return textResult("resumed"), nil, nil
		})
	type envIn struct {
		Name string `json:"name"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "returns an environment variable"},
		func(_ context.Context, _ *mcp.CallToolRequest, in envIn) (*mcp.CallToolResult, any, error) {
			return textResult(os.Getenv(in.Name)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "exits the process"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "about to crash")
			os.Exit(3)
			return nil, nil, nil
		})
	// noise writes lines that are not JSON-RPC messages on stdout before
	// its answer (the SDK writes nothing else meanwhile).
	mcp.AddTool(s, &mcp.Tool{Name: "noise", Description: "prints noise on stdout"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Println(strings.Join(noiseLines, "\r\n") + "\r\n\n   \t")
			return textResult("after the noise"), nil, nil
		})
	// huge answers with a frame past the SDK's 16 MiB line bound.
	mcp.AddTool(s, &mcp.Tool{Name: "huge", Description: "answers 17 MiB of text"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return textResult(strings.Repeat("x", 17<<20)), nil, nil
		})
	return s
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

const testVersion = "2025-06-18"

func initParams(version string) map[string]any {
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"roots": map[string]any{"listChanged": false}},
		"clientInfo":      map[string]any{"name": "transport-test", "version": "1"},
	}
}

// driver speaks raw JSON-RPC over a connection, like the relay does.
type driver struct {
	t    *testing.T
	conn mcp.Connection
	next int64

	progress   []float64 // progress notifications seen
	rootsAsked int       // roots/list requests answered
	writes     []chan error
}

func newDriver(t *testing.T, conn mcp.Connection) *driver {
	return &driver{t: t, conn: conn, next: 100}
}

func mustRaw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (d *driver) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	d.t.Cleanup(cancel)
	return ctx
}

func (d *driver) notify(method string, params any) {
	d.t.Helper()
	if err := d.conn.Write(d.ctx(), &jsonrpc.Request{Method: method, Params: mustRaw(d.t, params)}); err != nil {
		d.t.Fatalf("notify %s: %v", method, err)
	}
}

// send writes a request and returns its id. It writes in the background,
// as the relay's reader is independent of its writers: a target answering
// in JSON sends the response head only after the call, which may first need
// an answer from the client.
func (d *driver) send(method string, params any) jsonrpc.ID {
	d.t.Helper()
	d.next++
	id, _ := jsonrpc.MakeID(float64(d.next))
	req := &jsonrpc.Request{ID: id, Method: method, Params: mustRaw(d.t, params)}
	ctx := d.ctx()
	errc := make(chan error, 1)
	d.writes = append(d.writes, errc)
	go func() { errc <- d.conn.Write(ctx, req) }()
	return id
}

// writeErrors checks the background writes that finished.
func (d *driver) writeErrors() {
	d.t.Helper()
	pending := d.writes[:0]
	for _, errc := range d.writes {
		select {
		case err := <-errc:
			if err != nil {
				d.t.Fatalf("write: %v", err)
			}
		default:
			pending = append(pending, errc)
		}
	}
	d.writes = pending
}

// read returns the next message, failing the test on an error.
func (d *driver) read() jsonrpc.Message {
	d.t.Helper()
	m, err := d.conn.Read(d.ctx())
	if err != nil {
		d.t.Fatalf("read: %v", err)
	}
	return m
}

// wait reads until the response to id, handling what the server sends
// meanwhile: progress is counted, roots/list is answered.
func (d *driver) wait(id jsonrpc.ID) *jsonrpc.Response {
	d.t.Helper()
	for {
		switch m := d.read().(type) {
		case *jsonrpc.Response:
			if m.ID == id {
				d.writeErrors()
				return m
			}
			d.t.Fatalf("response to an unknown id %v", m.ID.Raw())
		case *jsonrpc.Request:
			switch m.Method {
			case "notifications/progress":
				var p struct {
					Progress float64 `json:"progress"`
				}
				if err := json.Unmarshal(m.Params, &p); err != nil {
					d.t.Fatal(err)
				}
				d.progress = append(d.progress, p.Progress)
			case "roots/list":
				d.rootsAsked++
				res := mustRaw(d.t, map[string]any{"roots": []map[string]any{{"uri": "file:///workspace/project", "name": "project"}}})
				if err := d.conn.Write(d.ctx(), &jsonrpc.Response{ID: m.ID, Result: res}); err != nil {
					d.t.Fatalf("answering roots/list: %v", err)
				}
			default:
				if m.ID.IsValid() {
					d.t.Fatalf("unexpected request %s", m.Method)
				}
			}
		}
	}
}

func (d *driver) call(method string, params any) *jsonrpc.Response {
	d.t.Helper()
	return d.wait(d.send(method, params))
}

// result decodes a successful response.
func result[T any](t *testing.T, r *jsonrpc.Response) T {
	t.Helper()
	var v T
	if r.Error != nil {
		t.Fatalf("error response: %v", r.Error)
	}
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return v
}

type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

func (d *driver) tool(name string, args any, meta map[string]any) string {
	d.t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	res := result[toolResult](d.t, d.call("tools/call", params))
	if res.IsError || len(res.Content) != 1 {
		d.t.Fatalf("tool %s: %+v", name, res)
	}
	return res.Content[0].Text
}

// exercise runs the relay's sequence: initialize, initialized, tools/list
// and calls; serverRequests adds a call with progress and a request to the
// client.
func exercise(t *testing.T, d *driver, serverRequests bool) {
	t.Helper()
	init := result[struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}](t, d.call("initialize", initParams(testVersion)))
	if init.ProtocolVersion != testVersion || init.ServerInfo.Name != "transport-test" {
		t.Fatalf("initialize result %+v", init)
	}
	d.notify("notifications/initialized", map[string]any{})
	tools := result[struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}](t, d.call("tools/list", map[string]any{}))
	found := false
	for _, tool := range tools.Tools {
		found = found || tool.Name == "echo"
	}
	if !found {
		t.Fatalf("tools/list has no echo: %+v", tools)
	}
	if got := d.tool("echo", map[string]any{"text": "hello"}, nil); got != "hello" {
		t.Fatalf("echo = %q", got)
	}
	if !serverRequests {
		return
	}
	got := d.tool("progress_roots", map[string]any{}, map[string]any{"progressToken": "tok-1"})
	if got != "roots: file:///workspace/project" {
		t.Fatalf("progress_roots = %q: the server did not get our roots", got)
	}
	if d.rootsAsked != 1 || len(d.progress) != 2 || d.progress[0] != 1 || d.progress[1] != 2 {
		t.Fatalf("roots asked %d times, progress %v", d.rootsAsked, d.progress)
	}
}

// seen is one request a test server received.
type seen struct {
	Method, RPC                             string
	Session, Version, Accept, CType, LastID string
	Auth                                    string
	Status                                  int
}

// recorder records the requests a handler serves and counts SSE streams
// of GETs that flushed (i.e. are open on the server).
type recorder struct {
	mu      sync.Mutex
	reqs    []*seen
	flushed atomic.Int32
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &seen{
			Method: r.Method, Session: r.Header.Get("Mcp-Session-Id"), Version: r.Header.Get("MCP-Protocol-Version"),
			Accept: r.Header.Get("Accept"), CType: r.Header.Get("Content-Type"), LastID: r.Header.Get("Last-Event-ID"),
			Auth: r.Header.Get("Authorization"),
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			s.RPC = m.Method
			if s.RPC == "" {
				s.RPC = "(response)"
			}
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, s)
		rec.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if r.Method == http.MethodGet {
			sw.onFlush = func() { rec.flushed.Add(1) }
		}
		h.ServeHTTP(sw, r)
		rec.mu.Lock()
		s.Status = sw.status
		rec.mu.Unlock()
	})
}

func (rec *recorder) all() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make([]seen, len(rec.reqs))
	for i, s := range rec.reqs {
		out[i] = *s
	}
	return out
}

func (rec *recorder) count(method string) int {
	n := 0
	for _, s := range rec.all() {
		if s.Method == method {
			n++
		}
	}
	return n
}

type statusWriter struct {
	http.ResponseWriter
	status  int
	once    sync.Once
	onFlush func()
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	w.ResponseWriter.(http.Flusher).Flush()
	if w.onFlush != nil {
		w.once.Do(w.onFlush)
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// poll waits, bounded, until cond holds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
