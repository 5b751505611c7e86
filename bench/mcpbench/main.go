// Command mcpbench is the MCP case of the benchmark harness (bench/run.sh):
// `mcpbench serve` runs a streamable HTTP MCP server with one echo tool
// (the official SDK's), and `mcpbench measure` times sequential tools/call
// requests over one session, straight to that server and through the
// gateway, and writes the comparison as a Markdown section.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mcpbench serve -addr HOST:PORT | mcpbench measure -direct URL -gateway URL [-n N] -out FILE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "measure":
		err = measure(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		log.Fatal(err)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	_ = fs.Parse(args)
	srv := sdk.NewServer(&sdk.Implementation{Name: "mcpbench", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo"}}}, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	hs := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		_ = hs.Close()
	}()
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func measure(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ExitOnError)
	direct := fs.String("direct", "", "MCP endpoint of the server")
	gateway := fs.String("gateway", "", "MCP endpoint of the gateway in front of it")
	n := fs.Int("n", 2000, "calls measured per endpoint (after 200 warm-up calls)")
	out := fs.String("out", "", "Markdown file to write")
	_ = fs.Parse(args)
	if *direct == "" || *gateway == "" || *out == "" {
		return errors.New("-direct, -gateway and -out are required")
	}
	d, err := timeCalls(*direct, *n)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	g, err := timeCalls(*gateway, *n)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	added := g.p50 - d.p50
	verdict := "met"
	if added > 300*time.Microsecond {
		verdict = "not met"
	}
	md := fmt.Sprintf(`
## MCP: tools/call over one session

%d sequential calls each (after 200 warm-up calls) with the official Go SDK client; the target is
the SDK's streamable HTTP server (bench/mcpbench).

| path | p50 | p99 |
|---|---|---|
| direct | %s | %s |
| through the gateway | %s | %s |

Added p50: %s (goal under 300 µs: %s).
`, *n, us(d.p50), us(d.p99), us(g.p50), us(g.p99), us(added), verdict)
	return os.WriteFile(*out, []byte(md), 0o644)
}

type latencies struct{ p50, p99 time.Duration }

func timeCalls(endpoint string, n int) (latencies, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "mcpbench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return latencies{}, err
	}
	defer cs.Close()
	times := make([]time.Duration, 0, n)
	for i := range n + 200 {
		start := time.Now()
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"}); err != nil {
			return latencies{}, err
		}
		if i >= 200 {
			times = append(times, time.Since(start))
		}
	}
	return percentiles(times), nil
}

// percentiles returns the p50 and p99 of ts (sorted in place).
func percentiles(ts []time.Duration) latencies {
	if len(ts) == 0 {
		return latencies{}
	}
	slices.Sort(ts)
	at := func(q float64) time.Duration { return ts[min(len(ts)-1, int(q*float64(len(ts))))] }
	return latencies{p50: at(0.50), p99: at(0.99)}
}

func us(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }
