package main

import (
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
)

// The access log is written by logline.AccessWriter: each line built on
// the stack straight from the request's record (no zap entry or fields),
// gathered in memory, and written by a goroutine, one write(2) per 256 KiB
// of lines or per second when traffic is light, instead of one per request.
// nginx advises the same for busy servers (`access_log ... buffer=64k
// flush=1s`). BenchmarkAccessLog compares the ways; bench/logcost.sh
// counts a line's instructions beside nginx's. The price: up to a second of
// lines is lost if the process is killed (SIGKILL); on SIGTERM or SIGINT
// run flushes them.
const (
	accessLogBufferSize    = 256 << 10
	accessLogFlushInterval = time.Second
)

// logSettings are the parts of config.logging the loggers are built from.
type logSettings struct {
	level       string // process log: debug, info, warn, error or off
	accessLevel string // the "access" module's level
	format      string // text or json
}

// logSettingsOf reads config.logging: `level` ("info", or per module:
// "info,access=warn") and `format` (text or json). The module "access"
// controls the access log; without it the access log follows `level`.
func logSettingsOf(f *config.File) logSettings {
	s := logSettings{level: "info", format: "text"}
	if f.Config != nil && f.Config.Logging != nil {
		lg := f.Config.Logging
		if lg.Format != "" {
			s.format = lg.Format
		}
		if lg.Level != nil {
			if lg.Level.Default != "" {
				s.level = lg.Level.Default
			}
			s.accessLevel = lg.Level.Modules["access"]
		}
	}
	if s.accessLevel == "" {
		s.accessLevel = s.level
	}
	return s
}

// newLoggers builds the process logger and the access logger from
// config.logging. Both write to out: the process log at once, line by line
// (errors must not wait), the access log through a buffer (see
// accessLogBufferSize), its lines written by logline.AccessWriter in the
// process log's format. The returned flush writes out what the buffer
// holds and stops its timer; call it after the last request is logged (a
// second call does nothing).
func newLoggers(f *config.File, out io.Writer) (log *zap.Logger, access logline.AccessLogger, flush func(), err error) {
	s := logSettingsOf(f)
	// One lock for both loggers, so that a buffer of access lines and a
	// process log line never interleave within a line.
	sink := zapcore.Lock(zapcore.AddSync(out))
	log = zap.New(zapcore.NewCore(newLogEncoder(s.format), sink, zapLevel(s.level)))
	if !zapLevel(s.accessLevel).Enabled(zapcore.InfoLevel) {
		// Access lines are info lines: a higher level turns them off.
		return log, logline.ZapAccess(zap.NewNop()), func() {}, nil
	}
	w := logline.NewAccessWriter(s.format, sink, logline.AccessWriterOptions{
		BufferSize:    accessLogBufferSize,
		FlushInterval: accessLogFlushInterval,
	})
	return log, w, func() { _ = w.Stop() }, nil
}

// newLogEncoder returns the encoder of the given format: JSON, or zap's
// console text with ISO 8601 times and capital levels. Both are
// codec/logline's, which write what zap's JSON and console encoders write
// with those settings (logline.JSONConfig, logline.ConsoleConfig), at a
// third of the cost or less (BenchmarkAccessLog).
func newLogEncoder(format string) zapcore.Encoder {
	if format == "json" {
		return logline.NewJSON()
	}
	return logline.NewConsole()
}

func zapLevel(l string) zapcore.LevelEnabler {
	switch l {
	case "trace", "debug":
		return zapcore.DebugLevel
	case "warn":
		return zapcore.WarnLevel
	case "error":
		return zapcore.ErrorLevel
	case "off":
		return zapcore.FatalLevel + 1
	}
	return zapcore.InfoLevel
}
