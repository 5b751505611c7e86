package nodemcp

import (
	"context"
	"path/filepath"
	"testing"
)

// Inspector runs the MCP Inspector's CLI mode
// (@modelcontextprotocol/inspector-cli, whose build/index.js is what
// `npx @modelcontextprotocol/inspector --cli` runs, without the launcher and
// without any web UI or listening socket) and returns its stdout: the JSON of
// the result. args are its own, the target first:
//
//	nodemcp.Inspector(t, ctx, url, "--transport", "http", "--method", "tools/list")
//	nodemcp.Inspector(t, ctx, sseURL, "--transport", "sse", "--method", "resources/list")
//	nodemcp.Inspector(t, ctx, url, "--transport", "http", "--method", "tools/call",
//		"--tool-name", "echo", "--tool-arg", "message=hi")
//	nodemcp.Inspector(t, ctx, url, "--transport", "http", "--method", "tools/list",
//		"--header", "Authorization: Bearer x")
//
// Methods: tools/list, tools/call, resources/list, resources/read (--uri),
// resources/templates/list, prompts/list, prompts/get (--prompt-name,
// --prompt-args k=v), logging/setLevel (--log-level). --transport is
// http (streamable HTTP), sse or stdio; without it a URL ending in /mcp
// means http and any other URL sse. A non-nil error (exit status not 0, or
// ctx or RunTimeout over) carries its stderr, where it prints its errors.
func Inspector(tb testing.TB, ctx context.Context, args ...string) (stdout []byte, err error) {
	tb.Helper()
	in := get(tb)
	build := filepath.Join(PackageDir(tb, "@modelcontextprotocol/inspector-cli"), "build")
	// It imports "../package.json" relative to its own file if that path
	// exists relative to the working directory: run it from build/.
	return runNode(ctx, in.node, build, nil, append([]string{filepath.Join(build, "index.js")}, args...)...)
}
