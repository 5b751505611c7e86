package nodemcp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RunTimeout bounds one Inspector or TSClient process when ctx has no
// earlier deadline.
const RunTimeout = 60 * time.Second

// runNode runs `node args...` in dir, bounded by ctx and RunTimeout, and
// kills its process group when that ends. The error of a failed run quotes
// its stderr.
func runNode(ctx context.Context, node, dir string, env []string, args ...string) (stdout []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, node, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	ownGroup(c)
	c.Cancel = func() error { return killGroup(c) }
	c.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err = c.Run()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
		err = fmt.Errorf("node %s: %w; stderr:\n%s", strings.Join(args, " "), err, errb.Bytes())
	}
	return out.Bytes(), err
}

// Script runs `node script args...` in Dir (script is a file there, such
// as llm-client.mjs), bounded by ctx and RunTimeout, and returns its
// standard output (see Require).
func Script(ctx context.Context, tb testing.TB, script string, args ...string) ([]byte, error) {
	tb.Helper()
	in := get(tb)
	return runNode(ctx, in.node, in.dir, nil, append([]string{script}, args...)...)
}
