package mcptest

import (
	"context"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ListedToolNames returns the names of the tools a client session lists
// (tools/list through cs), sorted; a failed list fails the test.
func ListedToolNames(tb testing.TB, cs *mcp.ClientSession) []string {
	tb.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		tb.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}
