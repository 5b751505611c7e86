package mcp

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Bounds of the log lines a stdio target's stderr (or its stdout lines that
// are not messages) makes: 200 MB of stderr used to become 97,700 INFO
// lines (410 MB of log).
const (
	// stderrLogLine cuts a logged line (the transport already cuts one at
	// transport.MaxStderrLine).
	stderrLogLine = 1 << 10
	// stderrBurst lines are logged at once, then stderrRate a second; the
	// lines past that are counted and the count logged with the next line
	// that is, or when the process ends.
	stderrBurst = 20
	stderrRate  = 5.0
)

// lineLog logs one process' lines of one kind (its stderr, its stdout
// lines that are not messages) within the bounds above.
type lineLog struct {
	log *zap.Logger
	msg string

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
}

func newLineLog(log *zap.Logger, msg string) *lineLog {
	return &lineLog{log: log, msg: msg, tokens: stderrBurst, last: time.Now()}
}

// newStderrLog logs a process' stderr lines.
func newStderrLog(log *zap.Logger) *lineLog { return newLineLog(log, "mcp target stderr") }

// newSkippedLog logs the start of the lines a process wrote on stdout that
// are not JSON-RPC messages (transport.StdioOptions.Skipped), and why.
func newSkippedLog(log *zap.Logger) *lineLog {
	return newLineLog(log, "mcp target stdout: line skipped, not a JSON-RPC message")
}

// skipped is transport.StdioOptions.Skipped.
func (l *lineLog) skipped(snippet string, reason error) {
	l.line(snippet, zap.NamedError("reason", reason))
}

// line logs a line, or counts it when over the rate.
func (l *lineLog) line(line string, fields ...zap.Field) {
	now := time.Now()
	l.mu.Lock()
	l.tokens = min(stderrBurst, l.tokens+now.Sub(l.last).Seconds()*stderrRate)
	l.last = now
	if l.tokens < 1 {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.tokens--
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if len(line) > stderrLogLine {
		line = strings.ToValidUTF8(line[:stderrLogLine], "") + "…"
	}
	fields = append(fields, zap.String("line", line))
	if n > 0 {
		fields = append(fields, zap.Int("suppressedBefore", n))
	}
	l.log.Info(l.msg, fields...)
}

// flush logs the count of lines suppressed since the last one logged.
func (l *lineLog) flush() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		l.log.Info(l.msg+": lines suppressed (rate limit)", zap.Int("suppressed", n))
	}
}
