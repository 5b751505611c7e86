package nodemcp

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartTimeout bounds how long StartEverythingHTTP and StartEverythingSSE
// wait for the server to listen and answer.
const StartTimeout = 30 * time.Second

// listenPrefix starts the line everything-http.mjs prints once it listens.
const listenPrefix = "NODEMCP_LISTENING "

// StartEverythingHTTP starts the "everything" reference server over
// streamable HTTP on 127.0.0.1 (an OS-chosen port), waits until it answers,
// and returns its endpoint, http://127.0.0.1:<port>/mcp. It is killed
// (process group) in tb.Cleanup; its output is logged if tb failed.
//
// The command is `node testdata/node/everything-http.mjs streamableHttp`
// with PORT=0: a wrapper of server-everything's `dist/index.js
// streamableHttp` that binds loopback only (the upstream binds every
// interface on $PORT, default 3001).
func StartEverythingHTTP(tb testing.TB) string {
	tb.Helper()
	return startEverything(tb, "streamableHttp") + "/mcp"
}

// StartEverythingSSE is StartEverythingHTTP for the older HTTP+SSE
// transport; it returns http://127.0.0.1:<port>/sse (the GET stream; the
// server's endpoint event names /message?sessionId=... for POSTs).
func StartEverythingSSE(tb testing.TB) string {
	tb.Helper()
	return startEverything(tb, "sse") + "/sse"
}

func startEverything(tb testing.TB, transport string) string {
	tb.Helper()
	in := get(tb)
	c := exec.Command(in.node, filepath.Join(in.dir, "everything-http.mjs"), transport)
	c.Dir = in.dir
	c.Env = append(os.Environ(), "PORT=0")
	ownGroup(c)
	out := &tailBuffer{max: 256 << 10}
	c.Stderr = out
	stdout, err := c.StdoutPipe()
	if err != nil {
		tb.Fatalf("nodemcp: %v", err)
	}
	if err := c.Start(); err != nil {
		tb.Fatalf("nodemcp: starting everything (%s): %v", transport, err)
	}

	base := make(chan string, 1)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, listenPrefix); ok {
				select {
				case base <- u:
				default:
				}
			}
			out.Write([]byte(line + "\n"))
		}
		waitErr = c.Wait()
	}()
	tb.Cleanup(func() {
		_ = killGroup(c)
		<-exited
		if tb.Failed() {
			tb.Logf("nodemcp: output of everything (%s):\n%s", transport, out)
		}
	})

	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	var u string
	select {
	case u = <-base:
	case <-exited:
		tb.Fatalf("nodemcp: everything (%s) exited before listening: %v\n%s", transport, waitErr, out)
	case <-timer.C:
		tb.Fatalf("nodemcp: everything (%s) did not listen within %v\n%s", transport, StartTimeout, out)
	}

	// It listens; check that it answers HTTP (express answers 404 on /).
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/", nil)
	if err != nil {
		tb.Fatalf("nodemcp: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("nodemcp: everything (%s) listens on %s but does not answer: %v\n%s", transport, u, err, out)
	}
	resp.Body.Close()
	return u
}

// tailBuffer keeps the last max bytes written to it; it is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
