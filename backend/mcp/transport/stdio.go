package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioOptions configure a target run as a local process speaking MCP over
// stdin/stdout.
type StdioOptions struct {
	Cmd  string
	Args []string
	// Env is added to the gateway's environment, or is the whole
	// environment with ClearEnv.
	Env      map[string]string
	ClearEnv bool
	// Stderr receives each line the process writes to stderr (lines are cut
	// at MaxStderrLine bytes). Nil drops them.
	Stderr func(line string)
	// TerminateAfter is how long Close waits after closing stdin before
	// SIGTERM, and again before SIGKILL (default: the SDK's 5s).
	TerminateAfter time.Duration
	// OnExit, when set, runs once the process has been reaped: after
	// Close, or after Read reported that it exited on its own.
	OnExit func()
}

// MaxStderrLine bounds one stderr line passed to StdioOptions.Stderr.
const MaxStderrLine = 4 << 10

// stdioWaitDelay bounds how long the process' pipes may stay open (held by
// its children) after it exited.
const stdioWaitDelay = 2 * time.Second

// StartStdio starts the process and returns its connection. Cmd is looked
// up in the PATH of Env when it sets one, else in the gateway's. ctx bounds
// only the start: the process lives until Close. When the process exits on
// its own, Read returns an error naming its exit status and last stderr
// line.
func StartStdio(ctx context.Context, o StdioOptions) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Cmd == "" {
		return nil, errors.New("stdio target: no command")
	}
	pathEnv, ok := o.Env["PATH"]
	if !ok {
		pathEnv = os.Getenv("PATH")
	}
	path, err := lookPath(o.Cmd, pathEnv)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, o.Args...)
	cmd.Args[0] = o.Cmd
	cmd.Env = buildEnv(o.Env, o.ClearEnv)
	lines := &lineWriter{fn: o.Stderr}
	cmd.Stderr = lines
	cmd.WaitDelay = stdioWaitDelay
	conn, err := (&mcp.CommandTransport{Command: cmd, TerminateDuration: o.TerminateAfter}).Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("stdio target %s: %w", o.Cmd, err)
	}
	return &stdioConn{Connection: conn, name: o.Cmd, stderr: lines, done: make(chan struct{}), onExit: o.OnExit}, nil
}

// lookPath finds cmd: a name with a slash as is, else in pathEnv (relative
// PATH entries are skipped, as exec does).
func lookPath(cmd, pathEnv string) (string, error) {
	if strings.ContainsRune(cmd, filepath.Separator) || strings.ContainsRune(cmd, '/') {
		p, err := exec.LookPath(cmd)
		if err != nil {
			return "", fmt.Errorf("stdio target: command %q: %w", cmd, err)
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, cmd)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("stdio target: command %q not found in PATH: %w", cmd, exec.ErrNotFound)
}

// buildEnv is the parent environment with env applied, or env alone.
func buildEnv(env map[string]string, clear bool) []string {
	var out []string
	if !clear {
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			if _, override := env[k]; !override {
				out = append(out, kv)
			}
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	if out == nil {
		out = []string{} // an empty, not the inherited, environment
	}
	return out
}

// stdioConn reports the process' exit as a Read error.
type stdioConn struct {
	mcp.Connection
	name   string
	stderr *lineWriter

	onExit    func()
	closeOnce sync.Once
	closeErr  error
	done      chan struct{} // closed when shut down

	mu      sync.Mutex
	closing bool  // Close was called
	failure error // how the process ended, once seen by Read
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	c.mu.Lock()
	failure := c.failure
	c.mu.Unlock()
	if failure != nil {
		return nil, failure
	}
	m, err := c.Connection.Read(ctx)
	if err == nil || ctx.Err() != nil {
		return m, err
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return nil, err
	}
	// The output ended or broke: the process is gone or going. Stop it and
	// say how it ended.
	waitErr := c.shutdown()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing && c.failure == nil {
		return nil, err // Close raced us
	}
	if c.failure == nil {
		c.failure = c.exitError(err, waitErr)
	}
	return nil, c.failure
}

func (c *stdioConn) exitError(readErr, waitErr error) error {
	var exit *exec.ExitError
	ended := "its output ended"
	switch {
	case errors.As(waitErr, &exit):
		ended = exit.String() // "exit status 3", "signal: killed"
	case waitErr != nil:
		ended = waitErr.Error()
	}
	msg := fmt.Sprintf("stdio target %s exited: %s", c.name, ended)
	if readErr != nil && !errors.Is(readErr, io.EOF) && !errors.Is(readErr, io.ErrUnexpectedEOF) {
		// Its output broke (a frame past the line bound, bytes that are
		// not JSON) and the gateway stopped it: the exit status then says
		// only that, the read error why.
		msg = fmt.Sprintf("stdio target %s stopped: its output broke: %v (%s)", c.name, readErr, ended)
	}
	if last := c.stderr.last(); last != "" {
		msg += fmt.Sprintf(" (last stderr line: %q)", last)
	}
	if waitErr != nil {
		return fmt.Errorf("%s: %w", msg, waitErrWrap{waitErr})
	}
	return errors.New(msg)
}

// waitErrWrap keeps the wait error reachable (errors.As *exec.ExitError)
// without repeating its text.
type waitErrWrap struct{ err error }

func (w waitErrWrap) Error() string { return "process ended" }
func (w waitErrWrap) Unwrap() error { return w.err }

// shutdown closes the SDK connection (stdin, then SIGTERM and SIGKILL after
// TerminateAfter each) once, and returns how the process ended.
func (c *stdioConn) shutdown() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.Connection.Close()
		c.stderr.flush()
		if c.onExit != nil {
			c.onExit()
		}
		close(c.done)
	})
	<-c.done
	return c.closeErr
}

// Close stops the process; Read returns io.EOF (or the exit error it has
// already reported) afterwards.
func (c *stdioConn) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	err := c.shutdown()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // the process was told to stop; how it ended is no failure
	}
	return err
}

// lineWriter splits what a process writes into lines.
type lineWriter struct {
	fn func(string)

	mu       sync.Mutex
	buf      []byte
	lastLine string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := MaxStderrLine - len(w.buf)
			if len(p) < room {
				w.buf = append(w.buf, p...)
				break
			}
			w.buf = append(w.buf, p[:room]...)
			p = p[room:]
			w.emitLocked()
			continue
		}
		chunk := p[:i]
		p = p[i+1:]
		for len(w.buf)+len(chunk) > MaxStderrLine {
			room := MaxStderrLine - len(w.buf)
			w.buf = append(w.buf, chunk[:room]...)
			chunk = chunk[room:]
			w.emitLocked()
		}
		w.buf = append(w.buf, chunk...)
		w.emitLocked()
	}
	return n, nil
}

// emitLocked passes on the buffered line.
func (w *lineWriter) emitLocked() {
	line := strings.TrimRight(string(w.buf), "\r")
	w.buf = w.buf[:0]
	if line == "" {
		return
	}
	w.lastLine = line
	if w.fn != nil {
		w.fn(line)
	}
}

// flush passes on a last line without a newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emitLocked()
	}
}

// last is the last non-empty line, cut to 200 bytes.
func (w *lineWriter) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.lastLine
	if len(l) > 200 {
		l = l[:200]
	}
	return l
}
