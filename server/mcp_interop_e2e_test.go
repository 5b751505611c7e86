package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/backend/mcp/mcptest/nodemcp"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// These tests put the third-party MCP parts that found issue 17's defects
// behind the gateway: the reference servers (everything, filesystem,
// memory) as targets, and the MCP Inspector CLI, the TypeScript SDK, the
// official Go SDK and mcp-go as clients.

// stdioYAML is a stdio target in a config's flow style.
func stdioYAML(name, cmd string, args []string, env map[string]string) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	var a []string
	for _, x := range args {
		a = append(a, quote(x))
	}
	var e []string
	for k, v := range env {
		e = append(e, k+": "+quote(v))
	}
	slices.Sort(e)
	return "{ name: " + name + ", stdio: { cmd: " + quote(cmd) + ", args: [" + strings.Join(a, ", ") + "], env: {" + strings.Join(e, ", ") + "} } }"
}

// mcpGateway starts a gateway with one route on port 3000 whose backend is
// an MCP backend with these targets (flow-style YAML each) and modes (the
// backend's other fields as "key: value" pairs separated by "; ").
func mcpGateway(t *testing.T, modes string, vars map[string]string, targets ...string) *testGateway {
	t.Helper()
	var b strings.Builder
	b.WriteString("binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n")
	for _, m := range strings.Split(modes, "; ") {
		if m != "" {
			b.WriteString("          " + m + "\n")
		}
	}
	b.WriteString("          targets:\n")
	for _, target := range targets {
		b.WriteString("          - " + target + "\n")
	}
	return startGateway(t, b.String(), vars)
}

// everythingAndFilesystem is a route with the everything and filesystem
// reference servers, whose capabilities differ: filesystem has tools only.
func everythingAndFilesystem(t *testing.T) *testGateway {
	t.Helper()
	nodemcp.Require(t)
	cmd, args, env := nodemcp.EverythingStdio(t)
	fcmd, fargs, fenv := nodemcp.Filesystem(t, t.TempDir())
	return mcpGateway(t, "", nil, stdioYAML("everything", cmd, args, env), stdioYAML("filesystem", fcmd, fargs, fenv))
}

func stepByOp(t *testing.T, r *nodemcp.Report, i int) nodemcp.StepResult {
	t.Helper()
	if i >= len(r.Steps) {
		t.Fatalf("report has %d steps, want step %d", len(r.Steps), i)
	}
	return r.Steps[i]
}

// TestMCPInteropMixedCapabilities (issue 17 items 1 and 6): with targets of
// different capabilities behind one route, the Inspector CLI and the
// TypeScript SDK list prompts, resources and templates, set the log level,
// and follow the resource URIs that results carry.
func TestMCPInteropMixedCapabilities(t *testing.T) {
	tg := everythingAndFilesystem(t)
	endpoint := tg.url(3000) + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, method := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		out, err := nodemcp.Inspector(t, ctx, endpoint, "--transport", "http", "--method", method)
		if err != nil {
			t.Fatalf("inspector %s: %v\n%s", method, err, out)
		}
		if method == "tools/list" && (!bytes.Contains(out, []byte(`"everything_echo"`)) || !bytes.Contains(out, []byte(`"filesystem_read_text_file"`)) && !bytes.Contains(out, []byte(`"filesystem_read_file"`))) {
			t.Fatalf("tools/list lacks a target's tools: %s", out)
		}
	}
	out, err := nodemcp.Inspector(t, ctx, endpoint, "--transport", "http", "--method", "logging/setLevel", "--log-level", "debug")
	if err != nil {
		t.Fatalf("inspector logging/setLevel: %v\n%s", err, out)
	}

	doc := "everything+demo://resource/static/document/features.md"
	report, err := nodemcp.TSClient(t, ctx, endpoint, []nodemcp.Step{
		{Op: "listPrompts"},
		{Op: "listResources"},
		{Op: "listResourceTemplates"},
		{Op: "setLoggingLevel", Level: "info"},
		{Op: "readResource", URI: doc},
		{Op: "callTool", Name: "everything_get-resource-links", Args: map[string]any{"count": 2}},
		{Op: "callTool", Name: "everything_get-resource-reference", Args: map[string]any{"resourceType": "Text", "resourceId": 1}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !report.Connected {
		t.Fatalf("connect: %v", report.ConnectError)
	}
	for i, s := range report.Steps {
		if !s.OK {
			t.Errorf("step %d %s: %v", i, s.Op, s.Error)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if p := stepByOp(t, report, 0); !bytes.Contains(p.Result, []byte(`"everything_simple-prompt"`)) {
		t.Errorf("prompts/list: %s", p.Result)
	}
	var read struct {
		Contents []struct{ URI string } `json:"contents"`
	}
	_ = json.Unmarshal(stepByOp(t, report, 4).Result, &read)
	if len(read.Contents) == 0 || read.Contents[0].URI != doc {
		t.Errorf("resources/read contents = %+v, want the uri %s", read.Contents, doc)
	}
	// Every URI a result names must be readable as it is.
	var uris []string
	for _, i := range []int{5, 6} {
		var res struct {
			Content []struct {
				Type     string `json:"type"`
				URI      string `json:"uri"`
				Resource *struct {
					URI string `json:"uri"`
				} `json:"resource"`
			} `json:"content"`
		}
		_ = json.Unmarshal(stepByOp(t, report, i).Result, &res)
		for _, c := range res.Content {
			switch {
			case c.Type == "resource_link":
				uris = append(uris, c.URI)
			case c.Type == "resource" && c.Resource != nil:
				uris = append(uris, c.Resource.URI)
			}
		}
	}
	if len(uris) < 3 {
		t.Fatalf("results named %d resources, want at least 3: %v", len(uris), uris)
	}
	var follow []nodemcp.Step
	for _, u := range uris {
		if !strings.HasPrefix(u, "everything+") {
			t.Errorf("result URI %q lacks the target prefix", u)
		}
		follow = append(follow, nodemcp.Step{Op: "readResource", URI: u})
	}
	report, err = nodemcp.TSClient(t, ctx, endpoint, follow, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range report.Steps {
		if !s.OK {
			t.Errorf("following %s: %v", uris[i], s.Error)
		}
	}
}

// TestMCPInteropTasks (issue 17 item 7): through a multiplexed route the
// TypeScript SDK's task-augmented call returns a task id with the target's
// prefix, and tasks/list lists it.
func TestMCPInteropTasks(t *testing.T) {
	tg := everythingAndFilesystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	report, err := nodemcp.TSClient(t, ctx, tg.url(3000)+"/mcp", []nodemcp.Step{
		{Op: "request", Method: "tools/call", Params: map[string]any{
			"name": "everything_simulate-research-query", "arguments": map[string]any{"topic": "gateways"}, "task": map[string]any{"ttl": 60000},
		}},
		{Op: "request", Method: "tasks/list", Params: map[string]any{}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := stepByOp(t, report, 0)
	var res struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if !created.OK || json.Unmarshal(created.Result, &res) != nil || !strings.HasPrefix(res.Task.TaskID, "everything+") {
		t.Fatalf("task-augmented call: %s %v", created.Result, created.Error)
	}
	if s := stepByOp(t, report, 1); !s.OK || !bytes.Contains(s.Result, []byte(`"taskId":"`+res.Task.TaskID+`"`)) {
		t.Fatalf("tasks/list: %s %v", s.Result, s.Error)
	}
}

// TestMCPInteropTaskLifecycle: tasks/get and tasks/result in the session
// that created the task route to its target.
func TestMCPInteropTaskLifecycle(t *testing.T) {
	tg := everythingAndFilesystem(t)
	endpoint := tg.url(3000) + "/mcp"
	id, status := rawInitialize(t, endpoint, "")
	if status != http.StatusOK {
		t.Fatalf("initialize: %d", status)
	}
	call := func(method string, params any) map[string]json.RawMessage {
		t.Helper()
		p, _ := json.Marshal(params)
		status, body := rawCall(t, endpoint, id, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+string(p)+`}`)
		var msg map[string]json.RawMessage
		if status != http.StatusOK || json.Unmarshal(body, &msg) != nil || msg["error"] != nil {
			t.Fatalf("%s: %d %s", method, status, body)
		}
		return msg
	}
	created := call("tools/call", map[string]any{"name": "everything_simulate-research-query", "arguments": map[string]any{"topic": "gateways"}, "task": map[string]any{"ttl": 60000}})
	var res struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if json.Unmarshal(created["result"], &res) != nil || !strings.HasPrefix(res.Task.TaskID, "everything+") {
		t.Fatalf("created: %s", created["result"])
	}
	got := call("tasks/get", map[string]any{"taskId": res.Task.TaskID})
	if !bytes.Contains(got["result"], []byte(`"taskId":"`+res.Task.TaskID+`"`)) {
		t.Fatalf("tasks/get: %s", got["result"])
	}
	result := call("tasks/result", map[string]any{"taskId": res.Task.TaskID})
	if !bytes.Contains(result["result"], []byte("gateways")) {
		t.Fatalf("tasks/result: %s", result["result"])
	}
}

// rawInitialize opens a session with a plain POST; it returns the session
// id and the status.
func rawInitialize(t *testing.T, endpoint, token string) (string, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, _ := do(t, req)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode == http.StatusOK {
		n, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		n.Header.Set("Content-Type", "application/json")
		n.Header.Set("Accept", "application/json, text/event-stream")
		n.Header.Set("Mcp-Session-Id", id)
		if token != "" {
			n.Header.Set("Authorization", "Bearer "+token)
		}
		do(t, n)
	}
	return id, resp.StatusCode
}

// rawCall POSTs one message in a session, asking for plain JSON.
func rawCall(t *testing.T, endpoint, session, body string, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, data := do(t, req)
	return resp.StatusCode, []byte(data)
}

// TestMCPInteropStatelessProgress (issue 17 item 5): a stateless route
// delivers progress on the POST's stream, as the everything server itself
// does.
func TestMCPInteropStatelessProgress(t *testing.T) {
	nodemcp.Require(t)
	target := nodemcp.StartEverythingHTTP(t)
	tg := mcpGateway(t, "statefulMode: stateless", map[string]string{"T": target}, `{ name: everything, mcp: { host: '${T}' } }`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	steps := []nodemcp.Step{{Op: "callTool", Name: "trigger-long-running-operation", Args: map[string]any{"duration": 0.3, "steps": 3}, Progress: true}}
	direct, err := nodemcp.TSClient(t, ctx, target, steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	through, err := nodemcp.TSClient(t, ctx, tg.url(3000)+"/mcp", steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, g := stepByOp(t, direct, 0), stepByOp(t, through, 0); !d.OK || !g.OK || len(d.Progress) != 3 || len(g.Progress) != len(d.Progress) {
		t.Fatalf("progress: directly %d (%v), through the gateway %d (%v)", len(d.Progress), d.Error, len(g.Progress), g.Error)
	}
}

// TestMCPInteropSessionEnd (issue 17 items 2 and 4): a session the client
// terminated is gone (404), and ending it never waits for a busy stdio
// process: the Go SDK's and mcp-go's Close return at once and cleanly.
func TestMCPInteropSessionEnd(t *testing.T) {
	cmd, args, env := mcptest.StdioCommand("busy")
	dir := t.TempDir()
	env[mcptest.EnvLinger] = "1m"
	env[mcptest.EnvPidFile] = filepath.Join(dir, "pid")
	nodemcp.Require(t)
	target := nodemcp.StartEverythingHTTP(t)
	tg := mcpGateway(t, "", map[string]string{"T": target}, stdioYAML("busy", cmd, args, env), `{ name: everything, mcp: { host: '${T}' } }`)
	endpoint := tg.url(3000) + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pid := func() int {
		data, err := os.ReadFile(env[mcptest.EnvPidFile])
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(data))
		return n
	}

	t.Run("TypeScript SDK terminate", func(t *testing.T) {
		report, err := nodemcp.TSClient(t, ctx, endpoint, []nodemcp.Step{{Op: "listTools"}, {Op: "terminate"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := stepByOp(t, report, 1); !s.OK {
			t.Fatalf("terminate: %v", s.Error)
		}
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			req, _ := http.NewRequest(method, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", report.SessionID)
			if resp, body := do(t, req); resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s after terminate: %d %s, want 404", method, resp.StatusCode, body)
			}
		}
	})
	t.Run("Go SDK Close", func(t *testing.T) {
		cs, err := mcpConnect(t, endpoint, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		p := pid()
		if err := cs.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if syscall.Kill(p, 0) != nil {
			t.Fatal("Close returned only after the stdio process ended")
		}
		mcptest.WaitFor(t, func() bool { return syscall.Kill(p, 0) != nil })
		if _, err := cs.ListTools(ctx, nil); err == nil {
			t.Fatal("the closed session still answered")
		}
	})
	t.Run("mcp-go Close", func(t *testing.T) {
		var logs bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c, err := mcpgoclient.NewStreamableHttpClient(endpoint, mcpgotransport.WithHTTPLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		init := mcpgo.InitializeRequest{}
		init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
		init.Params.ClientInfo = mcpgo.Implementation{Name: "mcp-go", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListTools(ctx, mcpgo.ListToolsRequest{}); err != nil {
			t.Fatal(err)
		}
		p := pid()
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if syscall.Kill(p, 0) != nil {
			t.Fatal("Close returned only after the stdio process ended")
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(logs.String(), "close request") {
			t.Fatalf("mcp-go logged a failed close: %s", logs.String())
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestMCPInteropLegacyOneShot (issue 17 item 8): the Inspector CLI over the
// legacy SSE transport never sends DELETE; its session and stdio process
// end when it closes its stream.
func TestMCPInteropLegacyOneShot(t *testing.T) {
	nodemcp.Require(t)
	cmd, args, env := mcptest.StdioCommand("oneshot")
	record := filepath.Join(t.TempDir(), "record")
	env[mcptest.EnvRecord] = record
	tg := mcpGateway(t, "", nil, stdioYAML("oneshot", cmd, args, env))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := nodemcp.Inspector(t, ctx, tg.url(3000)+"/sse", "--transport", "sse", "--method", "tools/list")
	if err != nil || !bytes.Contains(out, []byte(`"echo"`)) {
		t.Fatalf("inspector over SSE: %v %s", err, out)
	}
	mcptest.WaitFor(t, func() bool {
		rec := mcptest.ReadStdioRecord(t, record)
		return len(rec.Sessions()) == 1 && len(rec.Closed()) == 1
	})
}

// TestMCPSessionBoundToRouteAndToken (issue 17 item 3): a session id works
// only on the route that issued it and for the subject that opened it.
func TestMCPSessionBoundToRouteAndToken(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	target, _ := mcpTarget(t, "t", "echo")
	route := `
    - name: mcp
      backends:
      - mcp:
          targets:
          - { name: t, mcp: { host: '${T}' } }`
	tg := startGateway(t, `
config:
  session: { key: "0000000000000000000000000000000000000000000000000000000000000001" }
binds:
- port: 3000
  listeners:
  - routes:`+strings.Replace(route, "      backends:", "      policies:\n        jwtAuth: { issuer: i, jwks: { file: '${JWKS}' } }\n      backends:", 1)+`
- port: 3001
  listeners:
  - routes:`+route+`
`, map[string]string{"T": target, "JWKS": iss.WriteJWKSFile(t)})
	token := func(sub string) string {
		return iss.Sign(jwt.MapClaims{"iss": "i", "sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
	}
	alice := token("alice")
	id, status := rawInitialize(t, tg.url(3000)+"/mcp", alice)
	if status != http.StatusOK {
		t.Fatalf("initialize: %d", status)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, tc := range []struct {
		desc, endpoint, token string
		want                  int
	}{
		{"the same route and subject", tg.url(3000) + "/mcp", alice, http.StatusOK},
		{"another subject", tg.url(3000) + "/mcp", token("mallory"), http.StatusNotFound},
		{"the same-named route of another bind, without jwtAuth", tg.url(3001) + "/mcp", "", http.StatusNotFound},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var h []string
			if tc.token != "" {
				h = []string{"Authorization", "Bearer " + tc.token}
			}
			if status, body := rawCall(t, tc.endpoint, id, list, h...); status != tc.want {
				t.Fatalf("status %d %s, want %d", status, body, tc.want)
			}
		})
	}
}

// TestMCPProtocolVersionHeader (issue 17 item 9): an unknown
// Mcp-Protocol-Version is 400.
func TestMCPProtocolVersionHeader(t *testing.T) {
	target, _ := mcpTarget(t, "t", "echo")
	tg := mcpGateway(t, "", map[string]string{"T": target}, `{ name: t, mcp: { host: '${T}' } }`)
	endpoint := tg.url(3000) + "/mcp"
	id, _ := rawInitialize(t, endpoint, "")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if status, body := rawCall(t, endpoint, id, list, "Mcp-Protocol-Version", "1999-01-01"); status != http.StatusBadRequest {
		t.Fatalf("1999-01-01: %d %s, want 400", status, body)
	}
	if status, body := rawCall(t, endpoint, id, list, "Mcp-Protocol-Version", "2025-11-25"); status != http.StatusOK {
		t.Fatalf("2025-11-25: %d %s", status, body)
	}
}

// TestMCPMethodLabelsAreBounded (issue 17 item 10): method names a client
// makes up do not grow /metrics.
func TestMCPMethodLabelsAreBounded(t *testing.T) {
	target, _ := mcpTarget(t, "t", "echo")
	tg := mcpGateway(t, "", map[string]string{"T": target}, `{ name: t, mcp: { host: '${T}' } }`)
	endpoint := tg.url(3000) + "/mcp"
	id, _ := rawInitialize(t, endpoint, "")
	size := func() int {
		var buf bytes.Buffer
		tg.metrics().WritePrometheus(&buf)
		return buf.Len()
	}
	rawCall(t, endpoint, id, `{"jsonrpc":"2.0","id":2,"method":"x/warm-up"}`)
	before := size()
	long := strings.Repeat("m", 1000)
	for i := range 200 {
		rawCall(t, endpoint, id, `{"jsonrpc":"2.0","id":3,"method":"`+long+strconv.Itoa(i)+`"}`)
	}
	if after := size(); after > before+512 {
		t.Fatalf("/metrics grew from %d to %d bytes with made-up method names", before, after)
	}
	if n := scrapeValue(t, tg.gw, "agentgateway_mcp_requests_total", map[string]string{"method": "other"}); n != 201 {
		t.Fatalf("method=\"other\" counted %v calls, want 201", n)
	}
}

// TestMCPInteropMemoryServer: the memory reference server (tools and
// subscribable resources) beside the filesystem one (tools only): its
// resource is listed, read and subscribed to under its prefix, and its
// tools keep state within the session.
func TestMCPInteropMemoryServer(t *testing.T) {
	nodemcp.Require(t)
	mcmd, margs, menv := nodemcp.Memory(t)
	fcmd, fargs, fenv := nodemcp.Filesystem(t, t.TempDir())
	tg := mcpGateway(t, "", nil, stdioYAML("memory", mcmd, margs, menv), stdioYAML("filesystem", fcmd, fargs, fenv))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report, err := nodemcp.TSClient(t, ctx, tg.url(3000)+"/mcp", []nodemcp.Step{
		{Op: "listResources"},
		{Op: "callTool", Name: "memory_create_entities", Args: map[string]any{"entities": []any{
			map[string]any{"name": "gateway", "entityType": "project", "observations": []any{"fronts MCP servers"}},
		}}},
		{Op: "readResource", URI: "memory+memory://knowledge-graph"},
		{Op: "subscribeResource", URI: "memory+memory://knowledge-graph"},
		{Op: "listPrompts"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !report.Connected {
		t.Fatalf("connect: %v", report.ConnectError)
	}
	for i, s := range report.Steps[:4] {
		if !s.OK {
			t.Fatalf("step %d %s: %v", i, s.Op, s.Error)
		}
	}
	if r := stepByOp(t, report, 0).Result; !bytes.Contains(r, []byte(`"uri":"memory+memory://knowledge-graph"`)) {
		t.Fatalf("resources/list: %s", r)
	}
	if r := stepByOp(t, report, 2).Result; !bytes.Contains(r, []byte("fronts MCP servers")) || !bytes.Contains(r, []byte(`"uri":"memory+memory://knowledge-graph"`)) {
		t.Fatalf("resources/read: %s", r)
	}
	// Neither target has prompts: the gateway answers -32601 itself.
	if s := stepByOp(t, report, 4); s.OK || s.Error == nil || s.Error.Code == nil || *s.Error.Code != -32601 {
		t.Fatalf("prompts/list with no target serving prompts: %s %v, want -32601", s.Result, s.Error)
	}
}
