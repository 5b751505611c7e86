// Package logline owns the encoding of log lines: zapcore.Encoders that
// write byte for byte what the gateway's two zap encoders write (the console
// text and the JSON of zap's production configuration with ISO 8601 times),
// at a fraction of the cost. Lines are appended into pooled buffers; the
// field types the gateway logs are written by a switch on the field type,
// without reflection or zap's interface call per value; the date and zone
// of a timestamp are formatted once per second. Fields of other types are written through zap's own dispatch
// (zapcore.Field.AddTo) into the same JSON writer, so every field type comes
// out as zap writes it. FuzzEncodersMatchZap holds the output to zap's.
//
// It also owns what goes into the lines beyond their encoding: the access
// log's records and their writer (access.go, conn.go), bounds on the text
// a peer chose (BoundValue, BoundError, WithoutPeerBytes), and how often a
// warning that a failure repeats per request is written (Throttle).
package logline

import (
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// JSONConfig is the configuration of zap's JSON encoder whose output
// NewJSON's matches: zap's production configuration with ISO 8601 times.
func JSONConfig() zapcore.EncoderConfig {
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	return cfg
}

// ConsoleConfig is the configuration of zap's console encoder whose output
// NewConsole's matches: JSONConfig with capital levels.
func ConsoleConfig() zapcore.EncoderConfig {
	cfg := JSONConfig()
	cfg.EncodeLevel = zapcore.CapitalLevelEncoder
	return cfg
}

// NewJSON returns an encoder that writes what
// zapcore.NewJSONEncoder(JSONConfig()) writes: one JSON object per line,
// {"level":…,"ts":…,"logger":…,"caller":…,"msg":…, fields…, "stacktrace":…}.
func NewJSON() zapcore.Encoder { return &jsonEncoder{} }

// NewConsole returns an encoder that writes what
// zapcore.NewConsoleEncoder(ConsoleConfig()) writes: time, level, logger
// name, caller and message separated by tabs, then the fields as a JSON
// object with ", " and ": " between its parts, then the stack trace on the
// lines below.
func NewConsole() zapcore.Encoder { return &consoleEncoder{fieldWriter{spaced: true}} }

// linePool holds the buffers lines are written into; the core frees each
// one (Buffer.Free) after writing it out.
var linePool = buffer.NewPool()

// maxPooledLine bounds what linePool keeps: a longer line (a huge message,
// error or stack trace) goes out in a buffer of its own, so that one such
// line does not keep its size in the pool for good. Pooled buffers stay
// below about twice this (append's growth).
const maxPooledLine = 64 << 10

// startLine returns a pooled buffer and its storage (Buffer.Bytes is a
// mutable reference to it), so that a line is appended in place.
func startLine() (*buffer.Buffer, []byte) {
	line := linePool.Get()
	return line, line.Bytes()[:0]
}

// endLine returns a buffer holding bs, the line appended to line's
// storage: line itself after a copy onto itself (or into grown storage when
// the line outgrew it), or, for a line longer than maxPooledLine, a buffer
// of a pool of its own that the garbage collector takes with it.
func endLine(line *buffer.Buffer, bs []byte) *buffer.Buffer {
	if len(bs) > maxPooledLine {
		own := buffer.NewPool().Get()
		_, _ = own.Write(bs)
		line.Free() // after the copy: bs may be line's storage
		return own
	}
	line.Reset()
	_, _ = line.Write(bs)
	return line
}

// jsonEncoder writes JSON lines. Its fieldWriter holds the context: the
// fields a logger was given With, already encoded.
type jsonEncoder struct {
	fieldWriter
}

func (e *jsonEncoder) Clone() zapcore.Encoder {
	return &jsonEncoder{e.cloneContext()}
}

func (e *jsonEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	line, bs := startLine()
	w := fieldWriter{bs: append(bs, `{"level":`...), namespaces: e.namespaces}
	w.bs = appendQuoted(w.bs, ent.Level.String())
	if !ent.Time.IsZero() {
		w.bs = append(w.bs, `,"ts":"`...)
		w.bs = seconds.appendTime(w.bs, ent.Time, true)
		w.bs = append(w.bs, '"')
	}
	if ent.LoggerName != "" {
		w.bs = append(w.bs, `,"logger":`...)
		w.bs = appendQuoted(w.bs, ent.LoggerName)
	}
	if ent.Caller.Defined {
		w.bs = append(w.bs, `,"caller":`...)
		w.bs = appendQuoted(w.bs, ent.Caller.TrimmedPath())
	}
	w.bs = append(w.bs, `,"msg":`...)
	w.bs = appendQuoted(w.bs, ent.Message)
	if len(e.bs) > 0 {
		w.separate()
		w.bs = append(w.bs, e.bs...)
	}
	w.addFields(fields)
	w.closeNamespaces()
	if ent.Stack != "" {
		w.AddString("stacktrace", ent.Stack)
	}
	w.bs = append(w.bs, '}', '\n')
	return endLine(line, w.bs), nil
}

// consoleEncoder writes text lines. Its fieldWriter holds the context, as
// jsonEncoder's does (spaced, as the console writes fields).
type consoleEncoder struct {
	fieldWriter
}

func (e *consoleEncoder) Clone() zapcore.Encoder {
	return &consoleEncoder{e.cloneContext()}
}

func (e *consoleEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	line, bs := startLine()
	if !ent.Time.IsZero() {
		bs = seconds.appendTime(bs, ent.Time, true)
		bs = append(bs, '\t')
	}
	bs = append(bs, ent.Level.CapitalString()...)
	if ent.LoggerName != "" {
		bs = append(bs, '\t')
		bs = append(bs, ent.LoggerName...)
	}
	if ent.Caller.Defined {
		bs = append(bs, '\t')
		bs = append(bs, ent.Caller.TrimmedPath()...)
	}
	// The level is never empty, so a tab always goes before the message.
	bs = append(bs, '\t')
	bs = append(bs, ent.Message...)
	bs = e.appendFields(bs, fields)
	if ent.Stack != "" {
		bs = append(bs, '\n')
		bs = append(bs, ent.Stack...)
	}
	bs = append(bs, '\n')
	return endLine(line, bs), nil
}

// appendFields appends a tab and the context and fields as one JSON
// object, or nothing when they write nothing (no context, and fields that
// are skipped or inline objects with no fields).
func (e *consoleEncoder) appendFields(bs []byte, fields []zapcore.Field) []byte {
	start := len(bs)
	w := fieldWriter{bs: append(bs, '\t', '{'), spaced: true, namespaces: e.namespaces}
	w.bs = append(w.bs, e.bs...)
	w.addFields(fields)
	w.closeNamespaces()
	if len(w.bs) == start+2 {
		return w.bs[:start]
	}
	return append(w.bs, '}')
}

// cloneContext returns a copy of the context, for a logger made With more
// fields.
func (w *fieldWriter) cloneContext() fieldWriter {
	return fieldWriter{bs: slices.Clone(w.bs), spaced: w.spaced, namespaces: w.namespaces}
}

var (
	_ zapcore.Encoder = (*jsonEncoder)(nil)
	_ zapcore.Encoder = (*consoleEncoder)(nil)
)
