package transport

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// stderrLines collects what StdioOptions.Stderr receives.
type stderrLines struct {
	mu    sync.Mutex
	lines []string
}

func (s *stderrLines) add(line string) {
	s.mu.Lock()
	s.lines = append(s.lines, line)
	s.mu.Unlock()
}

func (s *stderrLines) has(line string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if l == line {
			return true
		}
	}
	return false
}

// startServer runs the test binary as a stdio MCP server.
func startServer(t *testing.T, o StdioOptions) (*driver, *stderrLines) {
	t.Helper()
	lines := &stderrLines{}
	if o.Cmd == "" {
		o.Cmd = os.Args[0]
	}
	if o.Env == nil {
		o.Env = map[string]string{}
	}
	o.Env[stdioModeEnv] = "server"
	o.Env["GORACE"] = "atexit_sleep_ms=0" // a race-enabled child would wait 1s at exit
	o.Stderr = lines.add
	if o.TerminateAfter == 0 {
		o.TerminateAfter = 5 * time.Second
	}
	conn, err := StartStdio(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return newDriver(t, conn), lines
}

func TestStdio(t *testing.T) {
	d, lines := startServer(t, StdioOptions{})
	exercise(t, d, true)
	poll(t, "the server's stderr line", func() bool { return lines.has("stdio test server starting") })
	if err := d.conn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := d.conn.Read(context.Background()); err != io.EOF {
		t.Fatalf("Read after Close: %v", err)
	}
}

func TestStdioCrash(t *testing.T) {
	d, lines := startServer(t, StdioOptions{})
	result[map[string]any](t, d.call("initialize", initParams(testVersion)))
	d.notify("notifications/initialized", map[string]any{})
	d.send("tools/call", map[string]any{"name": "crash", "arguments": map[string]any{}})
	var err error
	for err == nil {
		_, err = d.conn.Read(d.ctx())
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "about to crash") {
		t.Fatalf("Read error %q names neither the exit status nor the last stderr line", err)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("error %v does not carry the exit code", err)
	}
	// How it ended, without the command or its stderr, for the client.
	var pe *ProcessExit
	if !errors.As(err, &pe) || pe.Status != "exit status 3" || pe.Broke != nil {
		t.Fatalf("error %v: ProcessExit %+v", err, pe)
	}
	if _, again := d.conn.Read(d.ctx()); again == nil || again.Error() != err.Error() {
		t.Fatalf("second Read: %v", again)
	}
	if !lines.has("about to crash") {
		t.Fatal("stderr line not passed on")
	}
	if err := d.conn.Close(); err != nil {
		t.Fatalf("Close after a crash: %v", err)
	}
}

// TestStdioFrameTooLarge: a target whose answer is a frame past the line
// bound is stopped, and the error says why, not only how it ended. (The
// server, blocked writing the rest, ignores its closed stdin: it is
// terminated after TerminateAfter.)
func TestStdioFrameTooLarge(t *testing.T) {
	d, _ := startServer(t, StdioOptions{TerminateAfter: 100 * time.Millisecond})
	result[map[string]any](t, d.call("initialize", initParams(testVersion)))
	d.notify("notifications/initialized", map[string]any{})
	d.send("tools/call", map[string]any{"name": "huge", "arguments": map[string]any{}})
	var err error
	for err == nil {
		_, err = d.conn.Read(d.ctx())
	}
	if !strings.Contains(err.Error(), "its output broke") || !strings.Contains(err.Error(), "maximum line length") {
		t.Fatalf("Read error %q does not say the frame was too large", err)
	}
	if err := d.conn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestStdioEnv(t *testing.T) {
	home, hasHome := os.LookupEnv("HOME")
	tests := []struct {
		name  string
		clear bool
		want  map[string]string
	}{
		{name: "inherited and added", want: map[string]string{"TRANSPORT_TEST_FOO": "bar", "HOME": home}},
		{name: "cleared", clear: true, want: map[string]string{"TRANSPORT_TEST_FOO": "bar", "HOME": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.clear && !hasHome {
				t.Skip("HOME not set")
			}
			d, _ := startServer(t, StdioOptions{Env: map[string]string{"TRANSPORT_TEST_FOO": "bar"}, ClearEnv: tt.clear})
			result[map[string]any](t, d.call("initialize", initParams(testVersion)))
			d.notify("notifications/initialized", map[string]any{})
			for k, v := range tt.want {
				if got := d.tool("env", map[string]any{"name": k}, nil); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestStdioCommandLookup(t *testing.T) {
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		o       StdioOptions
		notFind bool
		want    string
	}{
		{name: "not in PATH", o: StdioOptions{Cmd: "no-such-mcp-server-xyz"}, notFind: true, want: `command "no-such-mcp-server-xyz" not found in PATH`},
		{name: "missing path", o: StdioOptions{Cmd: "/nonexistent/dir/server"}, want: "/nonexistent/dir/server"},
		{name: "empty", o: StdioOptions{}, want: "no command"},
		{name: "PATH from Env", o: StdioOptions{Cmd: filepath.Base(self), Env: map[string]string{"PATH": "/nonexistent:" + filepath.Dir(self)}}},
		{name: "Env PATH hides the gateway's", o: StdioOptions{Cmd: "sh", Env: map[string]string{"PATH": t.TempDir()}}, notFind: true, want: "not found in PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			if o.Env == nil {
				o.Env = map[string]string{}
			}
			o.Env[stdioModeEnv] = "server"
			o.Env["GORACE"] = "atexit_sleep_ms=0"
			conn, err := StartStdio(context.Background(), o)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				d := newDriver(t, conn)
				result[map[string]any](t, d.call("initialize", initParams(testVersion)))
				_ = conn.Close()
				return
			}
			if err == nil {
				_ = conn.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tt.want) || errors.Is(err, exec.ErrNotFound) != tt.notFind {
				t.Fatalf("err = %v, want %q (ErrNotFound %v)", err, tt.want, tt.notFind)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	long := strings.Repeat("x", MaxStderrLine+10)
	tests := []struct {
		name   string
		writes []string
		want   []string
	}{
		{"lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"split across writes", []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"CRLF and blank lines", []string{"a\r\n\r\n\nb\n"}, []string{"a", "b"}},
		{"unterminated last line", []string{"a\nrest"}, []string{"a", "rest"}},
		{"long line cut", []string{long + "\n"}, []string{long[:MaxStderrLine], "xxxxxxxxxx"}},
		{"long line across writes", []string{long[:MaxStderrLine-1], "xx\n"}, []string{long[:MaxStderrLine], "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			w := &lineWriter{fn: func(l string) { got = append(got, l) }}
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			w.flush()
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("lines %q, want %q", got, tt.want)
			}
			if w.last() != tt.want[len(tt.want)-1][:min(200, len(tt.want[len(tt.want)-1]))] {
				t.Fatalf("last = %q", w.last())
			}
		})
	}
}

// skippedLines collects what StdioOptions.Skipped receives.
type skippedLines struct {
	mu       sync.Mutex
	snippets []string
	reasons  []error
}

func (s *skippedLines) add(snippet string, reason error) {
	s.mu.Lock()
	s.snippets = append(s.snippets, snippet)
	s.reasons = append(s.reasons, reason)
	s.mu.Unlock()
}

func (s *skippedLines) get() ([]string, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.snippets), slices.Clone(s.reasons)
}

// TestStdioSkipsLinesThatAreNotMessages: lines on a target's stdout that
// are not JSON-RPC messages (a banner printed at startup, log lines, JSON
// that is no message, a broken message) are skipped and reported with a
// bounded snippet, and the target keeps working, as in the TypeScript
// SDK's stdio client. The first such line used to stop the target ("its
// output broke: invalid character").
func TestStdioSkipsLinesThatAreNotMessages(t *testing.T) {
	tests := []struct {
		name   string
		banner bool // the lines come before initialize, else from the noise tool mid-session
	}{
		{name: "startup banner", banner: true},
		{name: "mid-session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			skipped := &skippedLines{}
			o := StdioOptions{Skipped: skipped.add, Env: map[string]string{}}
			if tt.banner {
				o.Env[stdioBannerEnv] = "1"
			}
			d, _ := startServer(t, o)
			result[map[string]any](t, d.call("initialize", initParams(testVersion)))
			d.notify("notifications/initialized", map[string]any{})
			if !tt.banner {
				if got := d.tool("noise", map[string]any{}, nil); got != "after the noise" {
					t.Fatalf("noise = %q", got)
				}
			}
			if got := d.tool("echo", map[string]any{"text": "still here"}, nil); got != "still here" {
				t.Fatalf("echo after the skipped lines = %q", got)
			}
			snippets, reasons := skipped.get()
			if len(snippets) != len(noiseLines) {
				t.Fatalf("%d lines reported skipped, want %d: %q", len(snippets), len(noiseLines), snippets)
			}
			for i, line := range noiseLines {
				want := strings.TrimSpace(line)
				want = want[:min(len(want), MaxSkippedSnippet)]
				if snippets[i] != want || reasons[i] == nil {
					t.Errorf("skipped line %d reported as %q (%v), want %q with a reason", i, snippets[i], reasons[i], want)
				}
			}
		})
	}
}

// TestStdoutFilter: what the SDK's reader gets of a stdout: each message
// line trimmed and ending in a newline, a last line without one included,
// in reads of any size; a line past the bound is an error.
func TestStdoutFilter(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"result":{}}`
	tests := []struct {
		name    string
		in      string
		max     int
		want    string
		skipped int
		err     string
	}{
		{name: "messages and noise", in: "hello\n" + msg + "\r\n\n  \t" + msg + "  \nbye\n", want: msg + "\n" + msg + "\n", skipped: 2},
		{name: "batch", in: "[" + msg + "," + msg + "]\n", want: "[" + msg + "," + msg + "]\n"},
		{name: "last line without newline", in: "x\n" + msg, want: msg + "\n", skipped: 1},
		{name: "noise only", in: "a\nb\nc", skipped: 3},
		{name: "line past the bound", in: msg + "\n" + strings.Repeat("x", 200) + "\n" + msg + "\n", max: 100, want: msg + "\n", err: "maximum line length"},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 7, 4096} {
			t.Run(tt.name+"/read "+strconv.Itoa(size), func(t *testing.T) {
				skipped := 0
				f := &stdoutFilter{r: bufio.NewReaderSize(strings.NewReader(tt.in), 16), max: cmp.Or(tt.max, 1<<20), skipped: func(string, error) { skipped++ }}
				var got []byte
				buf := make([]byte, size)
				var err error
				for err == nil {
					var n int
					n, err = f.Read(buf)
					got = append(got, buf[:n]...)
				}
				if string(got) != tt.want || skipped != tt.skipped {
					t.Errorf("read %q with %d skipped, want %q with %d", got, skipped, tt.want, tt.skipped)
				}
				if tt.err == "" && err != io.EOF || tt.err != "" && !strings.Contains(err.Error(), tt.err) {
					t.Errorf("error %v, want %q", err, cmp.Or(tt.err, "EOF"))
				}
			})
		}
	}
}
