package server

import (
	"context"
	"os"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
)

// stdioServerEnv makes the test binary an MCP server over stdio (the
// gateway's stdio targets in tests start the test binary again with it).
const stdioServerEnv = "GATEWAY_TEST_MCP_STDIO"

func TestMain(m *testing.M) {
	mcptest.RunStdioIfRequested()
	if name := os.Getenv(stdioServerEnv); name != "" {
		runStdioServer(name)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runStdioServer serves tools echo (answers "<name>:echo:<pid>"), count
// (1, 2, 3... within one process) and crash (the process exits mid-call).
func runStdioServer(name string) {
	srv := sdk.NewServer(&sdk.Implementation{Name: name, Version: "1"}, nil)
	count := 0
	tool := func(n string, h func() string) {
		srv.AddTool(&sdk.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: h()}}}, nil
		})
	}
	tool("echo", func() string { return name + ":echo" })
	tool("pid", func() string { return itoa(os.Getpid()) })
	tool("count", func() string { count++; return itoa(count) })
	tool("crash", func() string {
		os.Stderr.WriteString("crashing on purpose\n")
		os.Exit(3)
		return ""
	})
	_ = srv.Run(context.Background(), &sdk.StdioTransport{})
}
