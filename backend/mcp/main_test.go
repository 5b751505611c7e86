package mcp

import (
	"os"
	"testing"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.RunStdioIfRequested()
	os.Exit(m.Run())
}
