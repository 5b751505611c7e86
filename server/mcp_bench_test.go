package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchMCPTarget is a streamable HTTP MCP server with one echo tool.
func benchMCPTarget(b *testing.B) string {
	srv := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo"}}}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: true}))
	b.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func benchToolsCall(b *testing.B, endpoint string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMCPToolsCallDirect is the baseline: the SDK client calling the
// SDK server.
func BenchmarkMCPToolsCallDirect(b *testing.B) { benchToolsCall(b, benchMCPTarget(b)) }

// BenchmarkMCPToolsCallGateway is the same call through the gateway, with a
// rule checked; the difference to Direct is the gateway's added latency
// (the goal is under 300 us).
func BenchmarkMCPToolsCallGateway(b *testing.B) {
	addr := startGatewayBench(b, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        mcpAuthorization:
          rules: ['mcp.tool.name == "echo"']
      backends:
      - mcp:
          targets:
          - { name: bench, mcp: { host: '`+benchMCPTarget(b)+`' } }
`, TransportStd)
	benchToolsCall(b, "http://"+addr+"/mcp")
}
