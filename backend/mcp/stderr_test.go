package mcp

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/backend/mcp/transport"
)

// TestRelayThrottlesStdioStderr: a stdio target's stderr is logged at
// most stderrBurst lines and then stderrRate a second, each cut at
// stderrLogLine; the lines left out are counted in the log. Every line
// used to be logged (200 MB of stderr: 97,700 lines, 410 MB of log).
func TestRelayThrottlesStdioStderr(t *testing.T) {
	const lines = 20000
	cmd, args, env := mcptest.StdioCommand("noisy")
	// The process writes its stderr flood, one very long line included,
	// then becomes the test's MCP server.
	script := `head -c 3000 /dev/zero | tr '\0' x >&2; echo >&2; seq 1 ` + strconv.Itoa(lines-1) + ` >&2; exec "$0" "$@"`
	core, logs := observer.New(zapcore.InfoLevel)
	start := time.Now()
	b := stdioBackend(t, Options{Logger: zap.New(core)}, "/bin/sh", append([]string{"-c", script, cmd}, args...), env)
	endpoint := serveBackend(t, b, nil)
	initSession(t, endpoint)
	b.Close()                    // the process ends: what was suppressed is counted
	elapsed := time.Since(start) // the most the rate allows lines for

	logged, suppressed, cut := 0, 0, false
	for _, e := range logs.FilterMessageSnippet("mcp target stderr").All() {
		ctx := e.ContextMap()
		if line, ok := ctx["line"].(string); ok {
			logged++
			if len(line) > stderrLogLine+len("…") {
				t.Errorf("a logged line of %d bytes", len(line))
			}
			cut = cut || strings.HasSuffix(line, "x…")
		}
		for _, k := range []string{"suppressed", "suppressedBefore"} {
			if n, ok := ctx[k].(int64); ok {
				suppressed += int(n)
			}
		}
	}
	if limit := stderrBurst + int(elapsed.Seconds()*stderrRate) + 1; logged > limit {
		t.Fatalf("%d stderr lines logged in %v, want at most %d", logged, elapsed, limit)
	}
	if !cut {
		t.Error("the long line was not logged cut")
	}
	if logged+suppressed != lines {
		t.Fatalf("%d lines logged and %d counted as suppressed, want %d in all", logged, suppressed, lines)
	}
}

// TestRelaySkipsStdoutLinesThatAreNotMessages: a stdio target that prints a
// banner and log lines on stdout before it serves works; the lines are
// logged within the stderr bounds, each cut to a short snippet. The banner
// used to fail initialize ("its output broke: invalid character").
func TestRelaySkipsStdoutLinesThatAreNotMessages(t *testing.T) {
	const lines = 100
	cmd, args, env := mcptest.StdioCommand("banner")
	script := `echo "server v1 starting $(head -c 3000 /dev/zero | tr '\0' x)"; seq 2 ` + strconv.Itoa(lines) + `; exec "$0" "$@"`
	core, logs := observer.New(zapcore.InfoLevel)
	start := time.Now()
	b := stdioBackend(t, Options{Logger: zap.New(core)}, "/bin/sh", append([]string{"-c", script, cmd}, args...), env)
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	if status, _, body := (rpc{session: id, accept: "application/json", body: toolsList}).post(t, endpoint); status != http.StatusOK || !strings.Contains(body, `"name":"echo"`) {
		t.Fatalf("tools/list: %d %s", status, body)
	}
	b.Close() // the process ends: what was suppressed is counted
	elapsed := time.Since(start)

	logged, suppressed, banner := 0, 0, false
	for _, e := range logs.FilterMessageSnippet("mcp target stdout").All() {
		ctx := e.ContextMap()
		if line, ok := ctx["line"].(string); ok {
			logged++
			if len(line) > transport.MaxSkippedSnippet {
				t.Errorf("a logged line of %d bytes", len(line))
			}
			banner = banner || strings.HasPrefix(line, "server v1 starting xxx")
			if ctx["reason"] == nil {
				t.Errorf("a skipped line logged without its reason: %v", ctx)
			}
		}
		for _, k := range []string{"suppressed", "suppressedBefore"} {
			if n, ok := ctx[k].(int64); ok {
				suppressed += int(n)
			}
		}
	}
	if limit := stderrBurst + int(elapsed.Seconds()*stderrRate) + 1; logged > limit {
		t.Fatalf("%d skipped lines logged in %v, want at most %d", logged, elapsed, limit)
	}
	if !banner {
		t.Error("the banner was not logged")
	}
	if logged+suppressed != lines {
		t.Fatalf("%d lines logged and %d counted as suppressed, want %d in all", logged, suppressed, lines)
	}
}
