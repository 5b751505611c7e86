package logline

import (
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// request is what server/handler.go's record logs about a request. method
// and path stand for bytes of the request's reused buffers.
type request struct {
	method, path   []byte
	remote         net.Addr
	remoteText     string // remote.String(), as a per-connection cache would hold it
	status         int
	duration       time.Duration
	route, backend string
	in, out        int
}

// fieldArray stands for a field array kept with the request's pooled
// state and reused from request to request. record writes at most 23
// fields: 9 always, upstream_error, 4 mcp.* and 9 llm.*.
type fieldArray [24]zap.Field

// recordWay is one way of building record's fields and writing the entry.
type recordWay func(access *zap.Logger, r *request, arr *fieldArray)

// requestFields appends record's nine fields to dst, the three that the
// ways build differently (method, path, src) as given.
func requestFields(dst []zap.Field, r *request, method, path, src zap.Field) []zap.Field {
	return append(dst,
		method,
		path,
		zap.Int("status", r.status),
		zap.Duration("duration", r.duration),
		zap.String("route", r.route),
		zap.String("backend", r.backend),
		zap.Int("bytes_in", r.in),
		zap.Int("bytes_out", r.out),
		src,
	)
}

// writePooled writes fields built in the request's reused array, and
// clears the array after the write, so that it holds no strings or errors
// past the request.
func writePooled(ce *zapcore.CheckedEntry, fields []zap.Field) {
	ce.Write(fields...)
	clear(fields)
}

// recordToday builds the fields as record did before it kept them in an
// array (the "today" of this study): a fresh slice, copies
// of method and path, the address as a Stringer.
func recordToday(access *zap.Logger, r *request, _ *fieldArray) {
	if ce := access.Check(zap.InfoLevel, "request"); ce != nil {
		ce.Write(requestFields(nil, r, zap.String("method", string(r.method)), zap.String("path", string(r.path)), zap.Stringer("src", r.remote))...)
	}
}

// recordInternedMethod is recordToday with the method a constant string for
// the standard methods.
func recordInternedMethod(access *zap.Logger, r *request, _ *fieldArray) {
	if ce := access.Check(zap.InfoLevel, "request"); ce != nil {
		ce.Write(requestFields(nil, r, zap.String("method", Method(r.method)), zap.String("path", string(r.path)), zap.Stringer("src", r.remote))...)
	}
}

// recordPooled is recordInternedMethod with the fields in the request's
// reused array instead of a fresh slice.
func recordPooled(access *zap.Logger, r *request, arr *fieldArray) {
	if ce := access.Check(zap.InfoLevel, "request"); ce != nil {
		writePooled(ce, requestFields(arr[:0], r, zap.String("method", Method(r.method)), zap.String("path", string(r.path)), zap.Stringer("src", r.remote)))
	}
}

// recordPooledCachedSrc is recordPooled with the address as a string
// cached per connection.
func recordPooledCachedSrc(access *zap.Logger, r *request, arr *fieldArray) {
	if ce := access.Check(zap.InfoLevel, "request"); ce != nil {
		writePooled(ce, requestFields(arr[:0], r, zap.String("method", Method(r.method)), zap.String("path", string(r.path)), zap.String("src", r.remoteText)))
	}
}

// recordUnsafeNoCopies is recordPooled with the path not copied: the
// lower bound of what the copies cost. It is wrong for a core that keeps
// entries (zaptest/observer, a batching core): the path's bytes are reused
// by the next request.
func recordUnsafeNoCopies(access *zap.Logger, r *request, arr *fieldArray) {
	if ce := access.Check(zap.InfoLevel, "request"); ce != nil {
		writePooled(ce, requestFields(arr[:0], r, zap.ByteString("method", r.method), zap.ByteString("path", r.path), zap.Stringer("src", r.remote)))
	}
}

// discardCore takes every entry and encodes none: what is left is the cost
// of the entry and of building its fields.
type discardCore struct{}

func (discardCore) Enabled(zapcore.Level) bool          { return true }
func (c discardCore) With([]zapcore.Field) zapcore.Core { return c }
func (c discardCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (discardCore) Write(zapcore.Entry, []zapcore.Field) error { return nil }
func (discardCore) Sync() error                                { return nil }

// BenchmarkRecordFields measures the ways of building record's access
// line (see the recordWay functions) with no encoding ("fields"), with
// zap's console encoder and with ours, writing to io.Discard.
func BenchmarkRecordFields(b *testing.B) {
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234}
	// One buffer, as a request's: method and path are slices of it.
	head := []byte("GET/small")
	r := &request{
		method: head[:3], path: head[3:], remote: remote, remoteText: remote.String(),
		status: 200, duration: 87 * time.Microsecond, route: "bind/8080/route0", backend: "127.0.0.1:9000", out: 100,
	}
	ways := []struct {
		name string
		way  recordWay
	}{
		{"today", recordToday},
		{"interned-method", recordInternedMethod},
		{"pooled-fields", recordPooled},
		{"pooled-fields-cached-src", recordPooledCachedSrc},
		{"unsafe-no-copies", recordUnsafeNoCopies},
	}
	cores := []struct {
		name string
		core zapcore.Core
	}{
		{"fields", discardCore{}},
		{"zap", zapcore.NewCore(zapcore.NewConsoleEncoder(ConsoleConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel)},
		{"logline", zapcore.NewCore(NewConsole(), zapcore.AddSync(io.Discard), zap.InfoLevel)},
	}
	for _, c := range cores {
		access := zap.New(c.core).Named("access")
		for _, w := range ways {
			b.Run(c.name+"/"+w.name, func(b *testing.B) {
				var arr fieldArray
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					w.way(access, r, &arr)
				}
				reportCPUPerOp(b, cpu)
			})
		}
	}
}

// TestRecordWaysWriteTheSameLine: the ways BenchmarkRecordFields compares
// write the same line, so that their costs compare like for like.
func TestRecordWaysWriteTheSameLine(t *testing.T) {
	remote := &net.TCPAddr{IP: net.IPv6loopback, Port: 443}
	r := &request{
		method: []byte("PATCH"), path: []byte("/a\"b"), remote: remote, remoteText: remote.String(),
		status: 502, duration: 3 * time.Second, route: "r", backend: "b", in: 7, out: 9,
	}
	ways := []recordWay{recordToday, recordInternedMethod, recordPooled, recordPooledCachedSrc, recordUnsafeNoCopies}
	var want string
	for i, way := range ways {
		var out lineRecorder
		access := zap.New(zapcore.NewCore(NewJSON(), &out, zap.InfoLevel), zap.WithClock(fixedClock{}))
		var arr fieldArray
		way(access, r, &arr)
		got := string(out)
		if i == 0 {
			want = got
		}
		if got != want || got == "" {
			t.Fatalf("way %d wrote %q, want %q", i, got, want)
		}
		if arr != (fieldArray{}) {
			t.Fatalf("way %d left fields in its array", i)
		}
	}
}

// lineRecorder keeps what is written to it.
type lineRecorder []byte

func (l *lineRecorder) Write(p []byte) (int, error) {
	*l = append(*l, p...)
	return len(p), nil
}

func (l *lineRecorder) Sync() error { return nil }

// fixedClock stamps every entry with the same time.
type fixedClock struct{}

func (fixedClock) Now() time.Time                         { return stamp }
func (fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
