package mcp

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Bounds of the log lines a stdio target's stderr makes: 200 MB of stderr
// used to become 97,700 INFO lines (410 MB of log).
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

// stderrLog logs one process' stderr lines within the bounds above.
type stderrLog struct {
	log *zap.Logger

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
}

func newStderrLog(log *zap.Logger) *stderrLog {
	return &stderrLog{log: log, tokens: stderrBurst, last: time.Now()}
}

// line logs a line, or counts it when over the rate.
func (l *stderrLog) line(line string) {
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
	if n > 0 {
		l.log.Info("mcp target stderr", zap.String("line", line), zap.Int("suppressedBefore", n))
		return
	}
	l.log.Info("mcp target stderr", zap.String("line", line))
}

// flush logs the count of lines suppressed since the last one logged.
func (l *stderrLog) flush() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		l.log.Info("mcp target stderr: lines suppressed (rate limit)", zap.Int("suppressed", n))
	}
}
