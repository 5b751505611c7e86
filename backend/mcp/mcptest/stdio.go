package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment of a stdio server process (the test binary re-executed).
const (
	// EnvStdioServer names the server RunStdioIfRequested serves.
	EnvStdioServer = "MCPTEST_STDIO_SERVER"
	// EnvRecord is a file the server appends its Recorder's events to, as
	// JSON lines (read them with ReadStdioRecord).
	EnvRecord = "MCPTEST_RECORD"
	// EnvTools restricts the tools: names separated by commas.
	EnvTools = "MCPTEST_TOOLS"
	// EnvLinger makes the server stay alive this long (a Go duration) after
	// stdin closed, as a process busy with work does, and write its pid to
	// the file EnvPidFile names when set.
	EnvLinger  = "MCPTEST_LINGER"
	EnvPidFile = "MCPTEST_PIDFILE"
)

// RunStdioIfRequested serves an MCP server on stdin/stdout and exits the
// process when stdin closes (status 0) if EnvStdioServer is set, and returns
// otherwise. A test package whose tests start stdio targets calls it first
// in TestMain:
//
//	func TestMain(m *testing.M) {
//		mcptest.RunStdioIfRequested()
//		os.Exit(m.Run())
//	}
//
// The server exits with status 3 when its crash tool is called.
func RunStdioIfRequested() {
	name := os.Getenv(EnvStdioServer)
	if name == "" {
		return
	}
	if err := runStdio(name); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest stdio server:", err)
	}
	os.Exit(0)
}

func runStdio(name string) error {
	opts := Options{ExitOnCrash: true}
	if t := os.Getenv(EnvTools); t != "" {
		opts.Tools = strings.Split(t, ",")
	}
	rec := NewRecorder()
	if path := os.Getenv(EnvRecord); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		rec.sink = f
	}
	if path := os.Getenv(EnvPidFile); path != "" {
		if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return err
		}
	}
	sh := newShared(name, opts, rec)
	sh.stdio = true
	err := sh.newServer(context.Background(), "").Run(context.Background(), &mcp.StdioTransport{})
	rec.add(Event{Kind: KindClosed, Session: sh.label(nil)})
	if d, perr := time.ParseDuration(os.Getenv(EnvLinger)); perr == nil {
		time.Sleep(d) // a busy process, not a wait in a test
	}
	return err
}

// StdioCommand returns the command that runs a stdio server named name:
// this test binary, with arguments that run no test, and the environment to
// add to the current one (EnvStdioServer, and GORACE so that a race-enabled
// child exits at once). Add EnvRecord and EnvTools to env as needed.
func StdioCommand(name string) (cmd string, args []string, env map[string]string) {
	cmd, err := os.Executable()
	if err != nil {
		cmd, _ = filepath.Abs(os.Args[0])
	}
	return cmd, []string{"-test.run=^$"}, map[string]string{
		EnvStdioServer: name,
		"GORACE":       "atexit_sleep_ms=0",
	}
}

// maxRecordBytes bounds ReadStdioRecord.
const maxRecordBytes = 64 << 20

// ReadStdioRecord reads the events stdio servers appended to path
// (EnvRecord) into a Recorder; a missing file is an empty one. Processes
// append whole lines, so the file can be read at any time; a last line
// without its newline (a process still writing) is ignored.
func ReadStdioRecord(tb testing.TB, path string) *Recorder {
	tb.Helper()
	rec := NewRecorder()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec
	}
	if err != nil {
		tb.Fatalf("mcptest: reading the stdio record: %v", err)
	}
	if len(data) > maxRecordBytes {
		tb.Fatalf("mcptest: stdio record %s is larger than %d bytes", path, maxRecordBytes)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxRecordBytes)
	for n := 1; sc.Scan(); n++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			tb.Fatalf("mcptest: stdio record %s line %d: %v", path, n, err)
		}
		rec.events = append(rec.events, e)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("mcptest: reading the stdio record: %v", err)
	}
	return rec
}
