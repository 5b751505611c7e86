package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
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
	// Skipped receives, for each line on stdout that is not a JSON-RPC
	// message or batch (a banner from print(), a log line), its start (at
	// most MaxSkippedSnippet bytes) and why it is not one. The line is
	// dropped and reading goes on, as the TypeScript SDK's stdio client
	// does. Nil drops them silently.
	Skipped func(snippet string, reason error)
	// TerminateAfter is how long Close waits after closing stdin before
	// SIGTERM, and again before SIGKILL (default: the SDK's 5s).
	TerminateAfter time.Duration
	// OnExit, when set, runs once the process has been reaped: after
	// Close, or after Read reported that it exited on its own.
	OnExit func()
}

// MaxStderrLine bounds one stderr line passed to StdioOptions.Stderr.
const MaxStderrLine = 4 << 10

// MaxSkippedSnippet bounds what StdioOptions.Skipped gets of a line.
const MaxSkippedSnippet = 200

// MaxStdoutLine bounds one line (one message) on a process' stdout: past it
// the process is stopped (its output broke), as the SDK's stdio transport
// does.
const MaxStdoutLine = mcp.DefaultMaxLineLength

// defaultTerminateAfter is StdioOptions.TerminateAfter's default (the
// SDK's).
const defaultTerminateAfter = 5 * time.Second

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
		return nil, fmt.Errorf("%w: no command", ErrProcessStart)
	}
	pathEnv, ok := o.Env["PATH"]
	if !ok {
		pathEnv = os.Getenv("PATH")
	}
	path, err := lookPath(o.Cmd, pathEnv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProcessStart, err)
	}
	cmd := exec.Command(path, o.Args...)
	cmd.Args[0] = o.Cmd
	cmd.Env = buildEnv(o.Env, o.ClearEnv)
	lines := &lineWriter{fn: o.Stderr}
	cmd.Stderr = lines
	cmd.WaitDelay = stdioWaitDelay
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio target %s: %w", o.Cmd, err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_ = stdout.Close()
		return nil, fmt.Errorf("stdio target %s: %w", o.Cmd, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProcessStart, o.Cmd, err)
	}
	terminate := o.TerminateAfter
	if terminate <= 0 {
		terminate = defaultTerminateAfter
	}
	// The SDK's newline-delimited JSON connection, over a stdout that
	// carries only JSON-RPC lines: its reader stops at the first line that
	// is not one. stdout is not closed: the connection closes by closing
	// stdin (processInput.Close); Wait closes stdout.
	out := &stdoutFilter{r: bufio.NewReaderSize(stdout, stdoutBuffer), max: MaxStdoutLine, skipped: o.Skipped}
	in := &processInput{cmd: cmd, stdin: stdin, terminate: terminate}
	conn, err := (&mcp.IOTransport{Reader: io.NopCloser(out), Writer: in, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		_ = in.Close()
		return nil, fmt.Errorf("stdio target %s: %w", o.Cmd, err)
	}
	return &stdioConn{Connection: conn, name: o.Cmd, stderr: lines, done: make(chan struct{}), failed: make(chan struct{}), onExit: o.OnExit}, nil
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
	closing bool          // Close was called
	failure error         // how the process ended, once seen by Read
	failed  chan struct{} // closed once failure is set
}

// Write sends msg. When the process' stdin broke (it exited, a write
// answered EPIPE), the error is how the process ended, as Read reports it,
// once Read has seen the end (within stdioWaitDelay): a call to a process
// that died at start was answered "broken pipe" or how it exited, by
// which came first.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if err == nil || ctx.Err() != nil {
		return err
	}
	t := time.NewTimer(stdioWaitDelay)
	defer t.Stop()
	select {
	case <-c.failed:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.failure
	case <-c.done: // closed, not failed
	case <-ctx.Done():
	case <-t.C:
	}
	return err
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
		close(c.failed)
	}
	return nil, c.failure
}

func (c *stdioConn) exitError(readErr, waitErr error) error {
	var exit *exec.ExitError
	e := &ProcessExit{wait: waitErr}
	ended := "its output ended"
	switch {
	case errors.As(waitErr, &exit):
		e.Status = exit.String() // "exit status 3", "signal: killed"
		ended = e.Status
	case waitErr != nil:
		ended = waitErr.Error()
	}
	msg := fmt.Sprintf("stdio target %s exited: %s", c.name, ended)
	if readErr != nil && !errors.Is(readErr, io.EOF) && !errors.Is(readErr, io.ErrUnexpectedEOF) {
		// Its output broke (a frame past the line bound, bytes that are
		// not JSON) and the gateway stopped it: the exit status then says
		// only that, the read error why.
		e.Broke = readErr
		msg = fmt.Sprintf("stdio target %s stopped: its output broke: %v (%s)", c.name, readErr, ended)
	}
	if last := c.stderr.last(); last != "" {
		msg += fmt.Sprintf(" (last stderr line: %q)", last)
	}
	e.text = msg
	return e
}

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

// processInput is the process' stdin; closing it stops the process: stdin
// is closed, then the process gets TerminateAfter to exit, SIGTERM, again
// TerminateAfter, and SIGKILL (the MCP spec's shutdown, as the SDK's
// CommandTransport does it). Close returns how the process ended.
type processInput struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration
}

func (p *processInput) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *processInput) Close() error {
	_ = p.stdin.Close() // an error (closed already) still waits for the exit
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(p.terminate)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	// Killed, or it exited meanwhile (ErrProcessDone): it is reaped at
	// once, and Wait is bounded by WaitDelay. A timer here reported a
	// process that the kill had ended as unresponsive on a loaded machine.
	return <-exited
}

// stdoutBuffer is the read buffer of a process' stdout (a line longer than
// it is assembled from several reads).
const stdoutBuffer = 64 << 10

// stdoutFilter reads a process' stdout line by line and passes on only the
// lines that are a JSON-RPC message or batch, each trimmed and ending in a
// newline. The others (a startup banner, a log line) are reported to
// skipped and dropped: the SDK's reader would end the connection at the
// first, which killed servers that work in SDK hosts. A line past max
// bytes is an error (the output broke).
type stdoutFilter struct {
	r       *bufio.Reader
	max     int
	skipped func(snippet string, reason error)

	line []byte // the line read last
	rest []byte // what Read has still to return of it
	err  error  // where the output ended, returned once rest is empty
}

func (f *stdoutFilter) Read(p []byte) (int, error) {
	for len(f.rest) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.readLine()
		f.err = err // a last line without newline still counts
		msg := bytes.TrimSpace(line)
		if len(msg) == 0 {
			continue
		}
		if reason := checkMessage(msg); reason != nil {
			if f.skipped != nil {
				f.skipped(snippet(msg), reason)
			}
			continue
		}
		// readLine ends every line in a newline, which TrimSpace took:
		// msg has room for it.
		start := cap(line) - cap(msg)
		end := start + len(msg)
		line[end] = '\n'
		f.rest = line[start : end+1]
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	return n, nil
}

// keepLineBuffer is the largest line buffer kept for the next line: a
// process that once sent a large message does not hold its size forever.
const keepLineBuffer = 1 << 20

// readLine reads the next line, its newline included (one is added to a
// last line without one). At the end of the output it returns what is left
// with the error.
func (f *stdoutFilter) readLine() ([]byte, error) {
	if cap(f.line) > keepLineBuffer {
		f.line = nil
	}
	f.line = f.line[:0]
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(f.line)+len(chunk) > f.max {
			return nil, fmt.Errorf("a line on stdout is longer than %d bytes, the maximum line length", f.max)
		}
		f.line = append(f.line, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			if len(f.line) > 0 {
				f.line = append(f.line, '\n')
			}
			return f.line, err
		}
		return f.line, nil
	}
}

// checkMessage reports why a line is not a JSON-RPC message or a non-empty
// batch of them, as the SDK's connection reads them (nil when it is): one
// JSON value (the SDK's jsonrpc.DecodeMessage alone ignores what follows
// the value, which its reader refuses) that decodes as messages.
func checkMessage(line []byte) error {
	if !json.Valid(line) {
		var raw json.RawMessage
		if err := json.Unmarshal(line, &raw); err != nil {
			return err // the syntax error, found before anything is kept
		}
		return errors.New("not one JSON value")
	}
	if line[0] != '[' {
		_, err := jsonrpc.DecodeMessage(line)
		return err
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(line, &batch); err != nil {
		return err
	}
	if len(batch) == 0 {
		return errors.New("an empty batch")
	}
	for _, raw := range batch {
		if _, err := jsonrpc.DecodeMessage(raw); err != nil {
			return err
		}
	}
	return nil
}

// snippet is the start of a skipped line, for a log.
func snippet(line []byte) string {
	if len(line) > MaxSkippedSnippet {
		line = line[:MaxSkippedSnippet]
	}
	return strings.ToValidUTF8(string(line), "")
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
