package logline

import (
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// writeAccess returns the line w (its format's keys, stamped t) writes for a.
func writeAccess(format string, a *Access, t time.Time) string {
	var out lineRecorder
	w := NewAccessWriter(format, &out, AccessWriterOptions{})
	w.now = func() time.Time { return t }
	w.Log(a)
	return string(out)
}

// zapAccessLine returns the line ZapAccess writes for a through a logger
// named AccessLoggerName with enc, stamped t.
func zapAccessLine(enc zapcore.Encoder, a *Access, t time.Time) string {
	var out lineRecorder
	l := zap.New(zapcore.NewCore(enc, &out, zap.InfoLevel), zap.WithClock(clockAt(t))).Named(AccessLoggerName)
	ZapAccess(l).Log(a)
	return string(out)
}

// clockAt is a zapcore.Clock stopped at a time.
type clockAt time.Time

func (c clockAt) Now() time.Time                       { return time.Time(c) }
func (clockAt) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// requireAccessSameAsZap fails unless AccessWriter writes, in both formats,
// what ZapAccess writes through zap's encoder and through ours.
func requireAccessSameAsZap(t testing.TB, a *Access, at time.Time) {
	t.Helper()
	for _, f := range formats {
		got := writeAccess(f.name, a, at)
		for _, enc := range []zapcore.Encoder{f.zaps(), f.ours()} {
			if want := zapAccessLine(enc, a, at); got != want {
				t.Fatalf("%s:\n got %q\nwant %q", f.name, got, want)
			}
		}
	}
}

// fullAccess is a record with every field set.
func fullAccess() *Access {
	return &Access{
		Method: []byte("POST"), Path: []byte("/v1/chat/completions"), Status: 200,
		Duration: 1234567 * time.Nanosecond, Route: "llm", Backend: "openai",
		BytesIn: 958, BytesOut: 308, Src: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234},
		UpstreamError: errors.New("dial tcp: refused"),
		MCP:           AccessMCP{Method: "tools/call", Target: "everything", Tool: "echo", Denied: true},
		LLM: AccessLLM{
			Provider: "openAI", RequestModel: []byte("fast"), Model: []byte("gpt-4o-mini"),
			HasUsage: true, InputTokens: 120, OutputTokens: 34, CachedInputTokens: 64,
			CostKnown: true, Cost: 0.000123, Guard: "masked", Error: "rate_limit",
		},
	}
}

// TestAccessWriterLines pins the two formats' lines, and holds them to
// what zap writes for the same records.
func TestAccessWriterLines(t *testing.T) {
	get := &Access{
		Method: []byte("GET"), Path: []byte("/small"), Status: 200, Duration: 87 * time.Microsecond,
		Route: "bind/8080/route0", Backend: "127.0.0.1:9000", BytesOut: 100,
		Src: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234},
	}
	tests := []struct {
		name, format string
		a            *Access
		want         string
	}{
		{"console get", "console", get,
			"2026-11-26T00:35:20.123Z\tINFO\taccess\trequest\t" +
				`{"method": "GET", "path": "/small", "status": 200, "duration": 0.000087, "route": "bind/8080/route0", "backend": "127.0.0.1:9000", "bytes_in": 0, "bytes_out": 100, "src": "127.0.0.1:51234"}` + "\n"},
		{"json get", "json", get,
			`{"level":"info","ts":"2026-11-26T00:35:20.123Z","logger":"access","msg":"request","method":"GET","path":"/small","status":200,"duration":0.000087,"route":"bind/8080/route0","backend":"127.0.0.1:9000","bytes_in":0,"bytes_out":100,"src":"127.0.0.1:51234"}` + "\n"},
		{"console every field", "console", fullAccess(),
			"2026-11-26T00:35:20.123Z\tINFO\taccess\trequest\t" +
				`{"method": "POST", "path": "/v1/chat/completions", "status": 200, "duration": 0.001234567, "route": "llm", "backend": "openai", "bytes_in": 958, "bytes_out": 308, "src": "127.0.0.1:51234", "upstream_error": "dial tcp: refused", ` +
				`"mcp.method": "tools/call", "mcp.target": "everything", "mcp.tool": "echo", "mcp.denied": true, ` +
				`"llm.provider": "openAI", "llm.request_model": "fast", "llm.model": "gpt-4o-mini", "llm.input_tokens": 120, "llm.output_tokens": 34, "llm.cached_input_tokens": 64, "llm.cost": 0.000123, "llm.guard": "masked", "llm.error": "rate_limit"}` + "\n"},
		{"json typed added fields", "json", withExtra(get, typedExtra...),
			`{"level":"info","ts":"2026-11-26T00:35:20.123Z","logger":"access","msg":"request","method":"GET","path":"/small","status":200,"duration":0.000087,"route":"bind/8080/route0","backend":"127.0.0.1:9000","bytes_in":0,"bytes_out":100,"src":"127.0.0.1:51234",` +
				`"team":"eng","code":200,"big":18446744073709551615,"ratio":0.25,"cached":true,"nan":"NaN",` +
				`"groups":["a","b\u003c"],"claims":{"n":1,"x":{"y":null}},"none":null}` + "\n"},
		{"console typed added fields", "console", withExtra(get, typedExtra...),
			"2026-11-26T00:35:20.123Z\tINFO\taccess\trequest\t" +
				`{"method": "GET", "path": "/small", "status": 200, "duration": 0.000087, "route": "bind/8080/route0", "backend": "127.0.0.1:9000", "bytes_in": 0, "bytes_out": 100, "src": "127.0.0.1:51234", ` +
				`"team": "eng", "code": 200, "big": 18446744073709551615, "ratio": 0.25, "cached": true, "nan": "NaN", ` +
				`"groups": ["a","b\u003c"], "claims": {"n":1,"x":{"y":null}}, "none": null}` + "\n"},
		{"json typed added fields, a field removed", "json", withOmit(withExtra(get, typedExtra...), FieldSrc),
			`{"level":"info","ts":"2026-11-26T00:35:20.123Z","logger":"access","msg":"request","method":"GET","path":"/small","status":200,"duration":0.000087,"route":"bind/8080/route0","backend":"127.0.0.1:9000","bytes_in":0,"bytes_out":100,` +
				`"team":"eng","code":200,"big":18446744073709551615,"ratio":0.25,"cached":true,"nan":"NaN",` +
				`"groups":["a","b\u003c"],"claims":{"n":1,"x":{"y":null}},"none":null}` + "\n"},
		{"json escapes and other address", "json", &Access{
			Method: []byte("BREW"), Path: []byte("/a\"b\\c\n\xff"), Status: 502, Route: "r", Backend: "b",
			Src: &net.UnixAddr{Name: "/run/gw.sock", Net: "unix"},
		},
			`{"level":"info","ts":"2026-11-26T00:35:20.123Z","logger":"access","msg":"request","method":"BREW","path":"/a\"b\\c\n\ufffd","status":502,"duration":0,"route":"r","backend":"b","bytes_in":0,"bytes_out":0,"src":"/run/gw.sock"}` + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := writeAccess(tc.format, tc.a, stamp); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			requireAccessSameAsZap(t, tc.a, stamp)
		})
	}
}

// typedExtra are added fields of every type: a number or a bool is written
// bare, as agentgateway writes an expression's value.
var typedExtra = []AccessField{
	{Key: "team", Value: "eng"},
	{Key: "code", Kind: AccessInt, Int: 200},
	{Key: "big", Kind: AccessUint, Uint: math.MaxUint64},
	{Key: "ratio", Kind: AccessFloat, Float: 0.25},
	{Key: "cached", Kind: AccessBool, Int: 1},
	{Key: "nan", Kind: AccessFloat, Float: math.NaN()},
	{Key: "groups", Kind: AccessJSON, Value: `["a","b\u003c"]`},
	{Key: "claims", Kind: AccessJSON, Value: `{"n":1,"x":{"y":null}}`},
	{Key: "none", Kind: AccessJSON, Value: `null`},
}

// withExtra is a copy of a with the added fields extra.
func withExtra(a *Access, extra ...AccessField) *Access {
	c := *a
	c.Extra = extra
	return &c
}

// withOmit is a copy of a leaving out omit.
func withOmit(a *Access, omit AccessFields) *Access {
	c := *a
	c.Omit = omit
	return &c
}

// TestZapAccessCopiesTheRequestsBytes: a core that keeps entries (zap's
// observer, a batching core) sees the request's bytes as they were, after
// the buffers they came from are reused.
func TestZapAccessCopiesTheRequestsBytes(t *testing.T) {
	var kept []zapcore.Field
	core := keepingCore{keep: func(fs []zapcore.Field) { kept = append(kept, fs...) }}
	buf := []byte("PATCH/kept-path fast gpt")
	a := &Access{Method: buf[:5], Path: buf[5:15], Src: &net.TCPAddr{},
		LLM: AccessLLM{Provider: "p", RequestModel: buf[16:20], Model: buf[21:24]}}
	ZapAccess(zap.New(core)).Log(a)
	for i := range buf {
		buf[i] = 'x'
	}
	want := map[string]string{"method": "PATCH", "path": "/kept-path", "llm.request_model": "fast", "llm.model": "gpt"}
	for _, f := range kept {
		if w, ok := want[f.Key]; ok {
			if f.String != w {
				t.Fatalf("%s = %q after the buffer changed, want %q", f.Key, f.String, w)
			}
			delete(want, f.Key)
		}
	}
	if len(want) > 0 {
		t.Fatalf("fields missing: %v", want)
	}
}

// keepingCore hands every entry's fields to keep.
type keepingCore struct{ keep func([]zapcore.Field) }

func (keepingCore) Enabled(zapcore.Level) bool          { return true }
func (c keepingCore) With([]zapcore.Field) zapcore.Core { return c }
func (c keepingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (c keepingCore) Write(_ zapcore.Entry, fs []zapcore.Field) error {
	c.keep(append([]zapcore.Field(nil), fs...))
	return nil
}
func (keepingCore) Sync() error { return nil }

// TestAccessWriterAllocations: a line allocates nothing once its buffer
// is pooled.
func TestAccessWriterAllocations(t *testing.T) {
	w := NewAccessWriter("console", zapcore.AddSync(discardWriter{}), AccessWriterOptions{})
	a := fullAccess()
	a.UpstreamError = nil // an error's field may allocate in zap's code
	a.Extra = typedExtra
	w.Log(a)
	if n := testing.AllocsPerRun(100, func() { w.Log(a) }); n != 0 {
		t.Fatalf("%v allocations a line, want 0", n)
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// FuzzAccessWriterMatchesZap builds a record from the fuzzer's bytes and
// requires AccessWriter to write what ZapAccess writes through zap's
// encoders and ours, in both formats.
func FuzzAccessWriterMatchesZap(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x03GET\x06/small\xc8\x00\x00\x00\x00\x00\x00\x00\x05route\x07backend\x01\x01"))
	f.Add([]byte("\x05PATCH\x04/\"\\\xff\x02\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"))
	for i := range 16 {
		f.Add([]byte{4, 'P', 'O', 'S', 'T', 2, '/', 'x', byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 1, 'r', 1, 'b', byte(i), byte(i * 7), 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &fuzzSource{data: data}
		a := &Access{
			Method: s.bytes(), Path: s.bytes(), Status: int(int32(s.uint64())),
			Duration: time.Duration(s.uint64()), Route: s.string(), Backend: s.string(),
			BytesIn: int(int64(s.uint64())), BytesOut: int(s.uint64() >> 1),
		}
		switch s.byte() % 4 {
		case 0:
			a.Src = s.tcpAddr()
		case 1:
			a.Src = &net.UnixAddr{Name: s.string(), Net: "unix"}
		case 2:
			a.Src = nil
		default:
			a.Src = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(s.byte())}
		}
		if s.bool() {
			a.UpstreamError = s.error()
		}
		if s.bool() {
			a.MCP = AccessMCP{Method: s.string(), Target: s.string(), Tool: s.string(), Denied: s.bool()}
		}
		if s.bool() {
			a.LLM = AccessLLM{
				Provider: s.string(), RequestModel: s.bytes(), Model: s.bytes(),
				HasUsage: s.bool(), InputTokens: int64(s.uint64()), OutputTokens: int64(s.uint64()),
				CachedInputTokens: int64(s.uint64()), CostKnown: s.bool(),
				Cost: math.Float64frombits(s.uint64()), Guard: s.string(), Error: s.string(),
			}
		}
		for range s.byte() % 4 {
			a.Extra = append(a.Extra, s.accessField())
		}
		if s.bool() {
			a.Omit = AccessFields(s.uint64()) & (FieldLLMError<<1 - 1)
		}
		at := stamp.Add(time.Duration(int64(s.uint64())))
		if loc := s.location(); loc != nil {
			at = at.In(loc)
		}
		requireAccessSameAsZap(t, a, at)
	})
}

// BenchmarkAccessLine writes the access line of a plain proxied GET to a
// discarding sink: through ZapAccess with our encoder (the way before
// AccessWriter) and through AccessWriter, in both formats.
func BenchmarkAccessLine(b *testing.B) {
	a := &Access{
		Method: []byte("GET"), Path: []byte("/small"), Status: 200, Duration: 87 * time.Microsecond,
		Route: "bind/8080/route0", Backend: "127.0.0.1:9000", BytesOut: 100,
		Src: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234},
	}
	sink := zapcore.AddSync(discardWriter{})
	for _, f := range formats {
		loggers := []struct {
			name string
			l    AccessLogger
		}{
			{"zap-logline", ZapAccess(zap.New(zapcore.NewCore(f.ours(), sink, zap.InfoLevel)).Named(AccessLoggerName))},
			{"writer", NewAccessWriter(f.name, sink, AccessWriterOptions{})},
		}
		for _, l := range loggers {
			b.Run(f.name+"/"+l.name, func(b *testing.B) {
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					l.l.Log(a)
				}
				reportCPUPerOp(b, cpu)
			})
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

// TestAccessOmit: fields accessLog.remove names are left out of the line,
// whichever they are (the first, the address, an LLM one), with the
// separators right, as zap writes the same record.
func TestAccessOmit(t *testing.T) {
	base := Access{
		Method: []byte("GET"), Path: []byte("/p"), Status: 200, Duration: time.Millisecond,
		Route: "r", Backend: "b", BytesIn: 1, BytesOut: 2,
		Src:           &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9},
		UpstreamError: errors.New("boom"),
		LLM:           AccessLLM{Provider: "openai", RequestModel: []byte("m"), Model: []byte("m"), HasUsage: true, InputTokens: 3, OutputTokens: 4},
		Extra:         []AccessField{{Key: "team", Value: "eng"}},
	}
	for _, omit := range []AccessFields{FieldMethod, FieldMethod | FieldPath | FieldStatus | FieldDuration | FieldRoute | FieldBackend | FieldBytesIn | FieldBytesOut,
		FieldSrc, FieldUpstreamError | FieldLLMProvider, FieldLLMError<<1 - 1} {
		a := base
		a.Omit = omit
		requireAccessSameAsZap(t, &a, stamp)
		var line lineRecorder
		w := NewAccessWriter("json", &line, AccessWriterOptions{})
		w.Log(&a)
		if omit&FieldMethod != 0 && strings.Contains(string(line), `"method"`) || omit&FieldSrc != 0 && strings.Contains(string(line), `"src"`) {
			t.Errorf("omit %b: %s", omit, line)
		}
		if !strings.Contains(string(line), `"team":"eng"`) {
			t.Errorf("omit %b lost the added field: %s", omit, line)
		}
	}
}

// TestBoundValue: values the client chose are cut at MaxClientValue bytes,
// on a character boundary, and marked; shorter ones are kept as they are.
func TestBoundValue(t *testing.T) {
	long := strings.Repeat("a", MaxClientValue-1) + "é" + "tail" // é straddles the bound
	for _, tc := range []struct{ in, want string }{
		{"gpt-4o-mini", "gpt-4o-mini"},
		{strings.Repeat("m", MaxClientValue), strings.Repeat("m", MaxClientValue)},
		{strings.Repeat("m", MaxClientValue+1), strings.Repeat("m", MaxClientValue) + "..."},
		{long, strings.Repeat("a", MaxClientValue-1) + "..."},
	} {
		if got := BoundValue(tc.in); got != tc.want {
			t.Errorf("BoundValue(%d bytes) = %d bytes %q..., want %d bytes", len(tc.in), len(got), got[:min(len(got), 8)], len(tc.want))
		}
		b := []byte(tc.in)
		if got := BoundBytes(b); string(got) != tc.want {
			t.Errorf("BoundBytes(%d bytes) = %d bytes", len(tc.in), len(got))
		}
		if len(tc.in) > MaxClientValue && string(b) != tc.in {
			t.Error("BoundBytes wrote into its argument")
		}
	}
}
