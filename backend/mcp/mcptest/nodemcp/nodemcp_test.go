package nodemcp_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest/nodemcp"
)

// connectStdio connects the Go SDK's client to a stdio command line from
// nodemcp and logs the initialize result.
func connectStdio(t *testing.T, ctx context.Context, cmd string, args []string, env map[string]string) *mcp.ClientSession {
	t.Helper()
	if !filepath.IsAbs(cmd) || !filepath.IsAbs(args[0]) {
		t.Fatalf("want absolute paths, got %s %v", cmd, args)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "nodemcp-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: nodemcp.Cmd(cmd, args, env), TerminateDuration: time.Second}, nil)
	if err != nil {
		t.Fatalf("connect %s %v: %v", cmd, args, err)
	}
	t.Cleanup(func() { cs.Close() })
	init := cs.InitializeResult()
	caps, _ := json.Marshal(init.Capabilities)
	t.Logf("initialize: protocol %s, server %s %s, capabilities %s", init.ProtocolVersion, init.ServerInfo.Name, init.ServerInfo.Version, caps)
	return cs
}

func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	t.Logf("tools: %v", names)
	return names
}

func TestEverythingStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, args, env := nodemcp.EverythingStdio(t)
	cs := connectStdio(t, ctx, cmd, args, env)
	init := cs.InitializeResult()
	c := init.Capabilities
	if c.Tools == nil || c.Resources == nil || c.Prompts == nil {
		t.Errorf("capabilities lack tools, resources or prompts: %+v", c)
	}
	names := toolNames(t, ctx, cs)
	for _, want := range []string{"echo", "get-sum", "trigger-long-running-operation"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tool %q in %v", want, names)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("echo: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "hi") {
		t.Errorf("echo = %q", text)
	}
	rs, err := cs.ListResources(ctx, nil)
	if err != nil || len(rs.Resources) == 0 {
		t.Fatalf("resources/list: %v %+v", err, rs)
	}
	var uris []string
	for _, r := range rs.Resources {
		uris = append(uris, r.URI)
	}
	t.Logf("resources: %v", uris)
}

func TestFilesystemStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from go"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, args, env := nodemcp.Filesystem(t, dir)
	cs := connectStdio(t, ctx, cmd, args, env)
	names := toolNames(t, ctx, cs)
	if !slices.Contains(names, "read_text_file") || !slices.Contains(names, "list_allowed_directories") {
		t.Fatalf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(dir, "hello.txt")}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("read_text_file: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "hello from go" {
		t.Errorf("read_text_file = %q", text)
	}
}

func TestMemoryStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, args, env := nodemcp.Memory(t)
	file := env["MEMORY_FILE_PATH"]
	cs := connectStdio(t, ctx, cmd, args, env)
	names := toolNames(t, ctx, cs)
	if !slices.Contains(names, "create_entities") || !slices.Contains(names, "read_graph") {
		t.Fatalf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_entities", Arguments: map[string]any{
		"entities": []map[string]any{{"name": "gateway", "entityType": "service", "observations": []string{"fronts MCP servers"}}},
	}})
	if err != nil || res.IsError {
		t.Fatalf("create_entities: %v %+v", err, res)
	}
	data, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(data), "gateway") {
		t.Fatalf("memory file %s: %v %q", file, err, data)
	}
}

func TestInspectorCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		transport string
		start     func(testing.TB) string
	}{
		{"http", nodemcp.StartEverythingHTTP},
		{"sse", nodemcp.StartEverythingSSE},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			url := tc.start(t)
			out, err := nodemcp.Inspector(t, ctx, url, "--transport", tc.transport, "--method", "tools/list")
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("tools/list output: %v: %s", err, out)
			}
			if !slices.ContainsFunc(res.Tools, func(x struct{ Name string }) bool { return x.Name == "echo" }) {
				t.Fatalf("no echo tool in %s", out)
			}
			out, err = nodemcp.Inspector(t, ctx, url, "--transport", tc.transport, "--method", "tools/call",
				"--tool-name", "get-sum", "--tool-arg", "a=2", "--tool-arg", "b=3")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "5") {
				t.Fatalf("get-sum 2+3: %s", out)
			}
		})
	}
}

func TestTSClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := nodemcp.StartEverythingHTTP(t)
	rep, err := nodemcp.TSClient(t, ctx, url, []nodemcp.Step{
		{Op: "listTools"},
		{Op: "callTool", Name: "trigger-long-running-operation", Args: map[string]any{"duration": 0.3, "steps": 3}, Progress: true},
		{Op: "listResources"},
		{Op: "readResource", URI: "demo://resource/static/document/features.md"},
		{Op: "listPrompts"},
		{Op: "setLoggingLevel", Level: "debug"},
		{Op: "callTool", Name: "no-such-tool"},
		{Op: "terminate"},
		{Op: "listTools"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Connected || rep.SessionID == "" || rep.ProtocolVersion == "" {
		t.Fatalf("connected %v (%v), session %q, protocol %q", rep.Connected, rep.ConnectError, rep.SessionID, rep.ProtocolVersion)
	}
	t.Logf("protocol %s, server %s, capabilities %s", rep.ProtocolVersion, rep.ServerInfo, rep.ServerCapabilities)
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(rep.ServerCapabilities, &caps); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"tools", "resources", "prompts", "logging", "completions"} {
		if caps[c] == nil {
			t.Errorf("no %s capability in %s", c, rep.ServerCapabilities)
		}
	}
	if len(rep.Steps) != 9 {
		t.Fatalf("%d steps", len(rep.Steps))
	}
	for i, s := range rep.Steps[:6] {
		if !s.OK || s.SessionID != rep.SessionID {
			t.Errorf("step %d %s: ok %v, error %v, session %q", i, s.Op, s.OK, s.Error, s.SessionID)
		}
	}
	if p := rep.Steps[1].Progress; len(p) != 3 || p[0].Progress != 1 || p[2].Progress != 3 || p[2].Total != 3 {
		t.Errorf("progress = %+v", p)
	}
	var call struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(rep.Steps[1].Result, &call); err != nil || len(call.Content) == 0 || !strings.Contains(call.Content[0].Text, "completed") {
		t.Errorf("long running result = %s (%v)", rep.Steps[1].Result, err)
	}
	// An unknown tool: a tool error result (isError) or a JSON-RPC error.
	if s := rep.Steps[6]; s.OK && !strings.Contains(string(s.Result), `"isError":true`) {
		t.Errorf("no-such-tool: %+v %s", s, s.Result)
	}
	if s := rep.Steps[7]; !s.OK || s.SessionID != "" {
		t.Errorf("terminate: ok %v, error %v, session %q", s.OK, s.Error, s.SessionID)
	}
	if s := rep.Steps[8]; s.OK {
		t.Errorf("tools/list after terminate succeeded")
	} else {
		t.Logf("tools/list after terminate: %v", s.Error)
	}
}

func TestTSClientSSE(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := nodemcp.StartEverythingSSE(t)
	rep, err := nodemcp.TSClient(t, ctx, url, []nodemcp.Step{
		{Op: "listTools"},
		{Op: "callTool", Name: "echo", Args: map[string]any{"message": "over sse"}},
		{Op: "terminate"},
	}, &nodemcp.ClientOptions{Transport: "sse"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Connected || rep.ProtocolVersion == "" {
		t.Fatalf("connected %v (%v), protocol %q", rep.Connected, rep.ConnectError, rep.ProtocolVersion)
	}
	if !rep.Steps[0].OK || !rep.Steps[1].OK || !strings.Contains(string(rep.Steps[1].Result), "over sse") {
		t.Errorf("steps = %+v", rep.Steps[:2])
	}
	if rep.Steps[2].OK {
		t.Errorf("terminate over sse succeeded")
	}
}

func TestTSClientConnectError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A port nothing listens on: connect fails, the report says why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rep, err := nodemcp.TSClient(t, ctx, "http://"+addr+"/mcp", []nodemcp.Step{{Op: "listTools"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Connected || rep.ConnectError == nil || len(rep.Steps) != 0 {
		t.Fatalf("report = %+v", rep)
	}
	t.Logf("connect error: %v", rep.ConnectError)
}
