package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
)

// lockedBuffer is an io.Writer safe for the access log's flush goroutine
// and the test reading it at once.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *lockedBuffer) writeCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes
}

func parseConfig(t *testing.T, yaml string) *config.File {
	t.Helper()
	f, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return f
}

// TestLoggersBufferTheAccessLogOnly: process lines reach the output at
// once; access lines only when flushed, and then all of them; levels and
// formats hold as before.
func TestLoggersBufferTheAccessLogOnly(t *testing.T) {
	tests := []struct {
		desc       string
		logging    string // config.logging, YAML flow map; "" for none
		wantAccess bool   // access lines are written at all
		accessLine *regexp.Regexp
	}{
		{desc: "defaults: text, info", logging: "", wantAccess: true,
			accessLine: regexp.MustCompile(`^\S+\tINFO\taccess\trequest\t\{"method": "GET", "path": "/x", "status": 200, "duration": 0.000087, "route": "r", "backend": "b", "bytes_in": 0, "bytes_out": 2, "src": "127.0.0.1:5000"\}$`)},
		{desc: "json", logging: "{format: json}", wantAccess: true,
			accessLine: regexp.MustCompile(`^\{"level":"info","ts":"[^"]+","logger":"access","msg":"request","method":"GET","path":"/x","status":200,"duration":0.000087,"route":"r","backend":"b","bytes_in":0,"bytes_out":2,"src":"127.0.0.1:5000"\}$`)},
		{desc: "access off", logging: "{level: 'info,access=off'}", wantAccess: false},
		{desc: "warn silences the access log too", logging: "{level: warn}", wantAccess: false},
		{desc: "access on, the rest warn", logging: "{level: 'warn,access=info'}", wantAccess: true,
			accessLine: regexp.MustCompile(`\taccess\trequest\t`)},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			yaml := "binds: []\n"
			if tc.logging != "" {
				yaml = "config:\n  logging: " + tc.logging + "\n" + yaml
			}
			var out lockedBuffer
			log, access, flush, err := newLoggers(parseConfig(t, yaml), &out)
			if err != nil {
				t.Fatal(err)
			}
			defer flush() // a second call must be harmless
			const n = 3
			for range n {
				access.Log(&logline.Access{
					Method: []byte("GET"), Path: []byte("/x"), Status: 200, Duration: 87 * time.Microsecond,
					Route: "r", Backend: "b", BytesOut: 2, Src: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000},
				})
			}
			log.Error("upstream gone")
			if got := out.String(); strings.Contains(got, "request") || !strings.Contains(got, "upstream gone") {
				t.Fatalf("before the flush the output is %q, want the error line alone", got)
			}
			flush()
			var accessLines []string
			for line := range strings.Lines(out.String()) {
				if strings.Contains(line, "request") {
					accessLines = append(accessLines, strings.TrimSuffix(line, "\n"))
				}
			}
			if !tc.wantAccess {
				if len(accessLines) != 0 {
					t.Fatalf("access lines written: %q", accessLines)
				}
				return
			}
			if len(accessLines) != n {
				t.Fatalf("%d access lines after the flush, want %d:\n%s", len(accessLines), n, out.String())
			}
			for _, l := range accessLines {
				if !tc.accessLine.MatchString(l) {
					t.Errorf("access line %q does not match %s", l, tc.accessLine)
				}
			}
		})
	}
}

// TestAccessLogFlushesOnItsOwn: without a flush call, buffered lines are
// written within the flush interval.
func TestAccessLogFlushesOnItsOwn(t *testing.T) {
	var out lockedBuffer
	_, access, flush, err := newLoggers(parseConfig(t, "binds: []\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	defer flush()
	access.Log(&logline.Access{Method: []byte("GET")})
	deadline := time.Now().Add(accessLogFlushInterval + 5*time.Second)
	for !strings.Contains(out.String(), "request") {
		if time.Now().After(deadline) {
			t.Fatalf("the access line was not written within %v", accessLogFlushInterval+5*time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAccessLogWritesWholeLines: many access lines, more than the buffer
// holds, interleaved with process lines from other goroutines, come out as
// whole lines, all of them, in far fewer writes than lines.
func TestAccessLogWritesWholeLines(t *testing.T) {
	var out lockedBuffer
	log, access, flush, err := newLoggers(parseConfig(t, "binds: []\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	const workers, perWorker = 4, 2000
	pad := strings.Repeat("x", 100)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				access.Log(&logline.Access{Path: fmt.Appendf(nil, "/%d/%d", w, i), Route: pad, Src: &net.TCPAddr{}})
				if i%500 == 0 {
					log.Warn("slow upstream", zap.Int("worker", w))
				}
			}
		})
	}
	wg.Wait()
	flush()
	accessRe := regexp.MustCompile(`^\S+\tINFO\taccess\trequest\t\{"method": "", "path": "/\d/\d+", "status": 0, "duration": 0, "route": "x{100}", "backend": "", "bytes_in": 0, "bytes_out": 0, "src": ":0"\}$`)
	processRe := regexp.MustCompile(`^\S+\tWARN\tslow upstream\t\{"worker": \d\}$`)
	accessLines, processLines := 0, 0
	for line := range strings.Lines(out.String()) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case accessRe.MatchString(line):
			accessLines++
		case processRe.MatchString(line):
			processLines++
		default:
			t.Fatalf("torn or unexpected line %q", line)
		}
	}
	if accessLines != workers*perWorker || processLines != workers*perWorker/500 {
		t.Fatalf("%d access and %d process lines, want %d and %d", accessLines, processLines, workers*perWorker, workers*perWorker/500)
	}
	// About 1.3 MB of access lines through a 256 KiB buffer: a handful of
	// writes for them, plus one per process line.
	if w := out.writeCount(); w > accessLines/100 {
		t.Fatalf("%d writes for %d access lines: not buffered", w, accessLines)
	}
}

// TestBinaryFlushesAccessLogOnSIGTERM: the real binary writes every access
// line before it exits on SIGTERM, including those still in the buffer.
func TestBinaryFlushesAccessLogOnSIGTERM(t *testing.T) {
	port := freePort(t)
	cfg := filepath.Join(t.TempDir(), "gw.yaml")
	writeConfig(t, cfg, fmt.Sprintf(`config:
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
binds:
- port: %d
  listeners:
  - routes:
    - policies:
        directResponse: {status: 200, body: ok}
`, port))
	// A race-enabled binary sleeps a second at exit unless told not to,
	// which would let the flush timer write the lines.
	p := startProc(t, cfg, "GORACE=atexit_sleep_ms=0")
	p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
	// No connection stays open to slow the drain down: the process should
	// exit well within the flush interval, so that the lines reach the
	// output only if the exit flushes them.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const n = 20
	for i := range n {
		url := fmt.Sprintf("http://%s/req-%d", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), i)
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("GET %s: %d %q", url, resp.StatusCode, body)
		}
	}
	signalled := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("gateway did not exit after SIGTERM")
	}
	t.Logf("exited %v after SIGTERM", time.Since(signalled))
	logs := p.logs()
	for i := range n {
		if !strings.Contains(logs, fmt.Sprintf(`"path": "/req-%d"`, i)) {
			t.Fatalf("no access line for /req-%d:\n%s", i, logs)
		}
	}
}

// BenchmarkAccessLog writes the access line server/handler.go's record
// writes for a plain proxied GET to a file, the ways newLoggers has built
// the access log: "zap" (a zap logger with zap's console encoder, into a
// zapcore.BufferedWriteSyncer of 256 KiB), "logline" (the same with
// codec/logline's encoder) and "writer" (logline.AccessWriter, newLoggers's
// now, at a few buffer sizes, and unbuffered: one write(2) a line); "off"
// is the check of an access log that is off, "fields" the zap entry and
// its fields alone, not encoded. Beside wall time per line it reports CPU
// time per line (cpu-ns/op, all the process's threads: the writing
// goroutine and the garbage collector too), which a machine busy with
// other work disturbs far less.
func BenchmarkAccessLog(b *testing.B) {
	rec := &logline.Access{
		Method: []byte("GET"), Path: []byte("/small"), Status: 200, Duration: 87 * time.Microsecond,
		Route: "bind/8080/route0", Backend: "127.0.0.1:9000", BytesOut: 100,
		Src: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234},
	}
	viaZap := func(enc func(format string) zapcore.Encoder) accessLogFunc {
		return func(f zapcore.WriteSyncer) (logline.AccessLogger, func()) {
			ws := &zapcore.BufferedWriteSyncer{WS: zapcore.Lock(f), Size: accessLogBufferSize, FlushInterval: accessLogFlushInterval}
			l := zap.New(zapcore.NewCore(enc("text"), ws, zapLevel("info"))).Named(logline.AccessLoggerName)
			return logline.ZapAccess(l), func() { _ = ws.Stop() }
		}
	}
	writer := func(size int) accessLogFunc {
		return func(f zapcore.WriteSyncer) (logline.AccessLogger, func()) {
			w := logline.NewAccessWriter("text", zapcore.Lock(f), logline.AccessWriterOptions{BufferSize: size, FlushInterval: accessLogFlushInterval})
			return w, func() { _ = w.Stop() }
		}
	}
	ways := []struct {
		name string
		log  accessLogFunc
	}{
		{"off", func(zapcore.WriteSyncer) (logline.AccessLogger, func()) {
			return logline.ZapAccess(zap.NewNop()), func() {}
		}},
		{"fields", func(zapcore.WriteSyncer) (logline.AccessLogger, func()) {
			return logline.ZapAccess(zap.New(fieldsOnlyCore{})), func() {}
		}},
		{"zap", viaZap(zapLogEncoder)},
		{"logline", viaZap(newLogEncoder)},
		{"writer-unbuffered", writer(0)},
		{"writer-64KiB", writer(64 << 10)},
		{"writer-256KiB", writer(accessLogBufferSize)},
		{"writer-1MiB", writer(1 << 20)},
	}
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			file, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
			if err != nil {
				b.Fatal(err)
			}
			defer file.Close()
			access, stop := w.log(file)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for b.Loop() {
				access.Log(rec)
			}
			stop()
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// accessLogFunc builds an access logger writing to the benchmark's file;
// stop writes out what it holds.
type accessLogFunc func(file zapcore.WriteSyncer) (access logline.AccessLogger, stop func())

// processCPU returns the CPU time the process has used on all its threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// zapLogEncoder is the encoder newLogEncoder returned before codec/logline:
// zap's own, with the settings logline's encoders match.
func zapLogEncoder(format string) zapcore.Encoder {
	if format == "json" {
		return zapcore.NewJSONEncoder(logline.JSONConfig())
	}
	return zapcore.NewConsoleEncoder(logline.ConsoleConfig())
}

// fieldsOnlyCore takes every entry and encodes none: what is left is the
// cost of the entry and of building its fields.
type fieldsOnlyCore struct{}

func (fieldsOnlyCore) Enabled(zapcore.Level) bool          { return true }
func (c fieldsOnlyCore) With([]zapcore.Field) zapcore.Core { return c }
func (c fieldsOnlyCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (fieldsOnlyCore) Write(zapcore.Entry, []zapcore.Field) error { return nil }
func (fieldsOnlyCore) Sync() error                                { return nil }
