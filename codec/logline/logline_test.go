package logline

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// format pairs one of our encoders with the zap encoder it must match.
type format struct {
	name string
	ours func() zapcore.Encoder
	zaps func() zapcore.Encoder
}

var formats = []format{
	{"json", NewJSON, func() zapcore.Encoder { return zapcore.NewJSONEncoder(JSONConfig()) }},
	{"console", NewConsole, func() zapcore.Encoder { return zapcore.NewConsoleEncoder(ConsoleConfig()) }},
}

// encodeLine writes ent with fields through enc, after giving it the
// context fields as a logger's With does (clone, then AddTo the clone).
func encodeLine(t testing.TB, enc zapcore.Encoder, context []zapcore.Field, ent zapcore.Entry, fields []zapcore.Field) string {
	t.Helper()
	if len(context) > 0 {
		enc = enc.Clone()
		for _, f := range context {
			f.AddTo(enc)
		}
	}
	buf, err := enc.EncodeEntry(ent, fields)
	if err != nil {
		t.Fatalf("EncodeEntry: %v", err)
	}
	defer buf.Free()
	return buf.String()
}

// requireSameAsZap fails unless both formats write what zap writes.
func requireSameAsZap(t testing.TB, context []zapcore.Field, ent zapcore.Entry, fields []zapcore.Field) {
	t.Helper()
	for _, f := range formats {
		want := encodeLine(t, f.zaps(), context, ent, fields)
		got := encodeLine(t, f.ours(), context, ent, fields)
		if got != want {
			t.Fatalf("%s:\n got %q\nwant %q", f.name, got, want)
		}
	}
}

var (
	stamp      = time.Date(2026, 11, 26, 0, 35, 20, 123456789, time.UTC)
	india      = time.FixedZone("IST", 5*3600+1800)
	brazil     = time.FixedZone("BRT", -3*3600)
	oddSeconds = time.FixedZone("LMT", 561) // Paris before 1911: +00:09:21
	tinyWest   = time.FixedZone("tiny", -30)
)

func entry(msg string) zapcore.Entry {
	return zapcore.Entry{Level: zapcore.InfoLevel, Time: stamp, LoggerName: "access", Message: msg}
}

// The access log's line, as server/handler.go's record builds it.
func accessFields() []zapcore.Field {
	return []zapcore.Field{
		zap.String("method", "GET"),
		zap.String("path", "/small"),
		zap.Int("status", 200),
		zap.Duration("duration", 87*time.Microsecond),
		zap.String("route", "bind/8080/route0"),
		zap.String("backend", "127.0.0.1:9000"),
		zap.Int("bytes_in", 0),
		zap.Int("bytes_out", 100),
		zap.Stringer("src", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234}),
		zap.NamedError("upstream_error", errors.New("dial tcp 127.0.0.1:9000: connection refused")),
		zap.String("mcp.method", "tools/call"),
		zap.Bool("mcp.denied", true),
		zap.Int64("llm.input_tokens", 1234),
		zap.Float64("llm.cost", 0.000123),
	}
}

// stringerFunc is a Stringer for tests.
type stringerFunc func() string

func (f stringerFunc) String() string { return f() }

// nilStringer panics on a nil pointer, as a careless String does.
type nilStringer struct{ s string }

func (n *nilStringer) String() string { return n.s }

// nilError panics on a nil pointer, as a careless Error does.
type nilError struct{ s string }

func (e *nilError) Error() string { return e.s }

type panicError struct{}

func (panicError) Error() string { panic("no message") }

// groupError is an error group as go.uber.org/multierr's: zap writes its
// causes.
type groupError []error

func (g groupError) Error() string   { return fmt.Sprintf("%d errors", len(g)) }
func (g groupError) Errors() []error { return g }

// richError has a verbose form, as github.com/pkg/errors' errors do.
type richError struct{ msg, verbose string }

func (e richError) Error() string { return e.msg }
func (e richError) Format(s fmt.State, verb rune) {
	if s.Flag('+') {
		fmt.Fprint(s, e.verbose)
		return
	}
	fmt.Fprint(s, e.msg)
}

// object is an ObjectMarshaler made of a function.
type object func(zapcore.ObjectEncoder) error

func (o object) MarshalLogObject(enc zapcore.ObjectEncoder) error { return o(enc) }

// array is an ArrayMarshaler made of a function.
type array func(zapcore.ArrayEncoder) error

func (a array) MarshalLogArray(enc zapcore.ArrayEncoder) error { return a(enc) }

// TestEncodersMatchZap: entries and fields of every kind come out of our
// encoders exactly as out of zap's.
func TestEncodersMatchZap(t *testing.T) {
	allArray := array(func(enc zapcore.ArrayEncoder) error {
		enc.AppendBool(true)
		enc.AppendByteString([]byte("b\x00"))
		enc.AppendComplex128(complex(1, -2))
		enc.AppendComplex64(complex(float32(1.5), float32(math.NaN())))
		enc.AppendFloat64(math.Inf(-1))
		enc.AppendFloat32(0.1)
		enc.AppendInt(-1)
		enc.AppendInt64(math.MinInt64)
		enc.AppendInt32(math.MaxInt32)
		enc.AppendInt16(-7)
		enc.AppendInt8(8)
		enc.AppendString("s\"")
		enc.AppendUint(1)
		enc.AppendUint64(math.MaxUint64)
		enc.AppendUint32(3)
		enc.AppendUint16(4)
		enc.AppendUint8(5)
		enc.AppendUintptr(6)
		enc.AppendDuration(-time.Second)
		enc.AppendTime(stamp.In(india))
		_ = enc.AppendArray(array(func(zapcore.ArrayEncoder) error { return nil }))
		_ = enc.AppendObject(object(func(o zapcore.ObjectEncoder) error {
			o.OpenNamespace("in")
			o.AddInt("x", 1)
			return nil
		}))
		return enc.AppendReflected(map[string]int{"b": 2, "a": 1})
	})
	allObject := object(func(enc zapcore.ObjectEncoder) error {
		_ = enc.AddArray("arr", allArray)
		enc.AddBinary("bin", []byte{0, 1, 2, 250})
		enc.AddByteString("bs", []byte("\xff"))
		enc.AddBool("b", false)
		enc.AddComplex128("c128", complex(math.Inf(1), math.Copysign(0, -1)))
		enc.AddComplex64("c64", complex(float32(-1), float32(2)))
		enc.AddDuration("d", 1500*time.Millisecond)
		enc.AddFloat64("f64", math.Copysign(0, -1))
		enc.AddFloat32("f32", float32(math.Inf(1)))
		enc.AddInt("i", 1)
		enc.AddInt64("i64", 2)
		enc.AddInt32("i32", 3)
		enc.AddInt16("i16", 4)
		enc.AddInt8("i8", 5)
		enc.AddString("s", "\u2028<>&")
		enc.AddTime("t", stamp.In(brazil))
		enc.AddUint("u", 6)
		enc.AddUint64("u64", 7)
		enc.AddUint32("u32", 8)
		enc.AddUint16("u16", 9)
		enc.AddUint8("u8", 10)
		enc.AddUintptr("uptr", 11)
		_ = enc.AddReflected("r", struct{ A []int }{[]int{1}})
		enc.OpenNamespace("ns")
		return enc.AddObject("o", object(func(zapcore.ObjectEncoder) error { return errors.New("half done") }))
	})
	tests := []struct {
		desc    string
		context []zapcore.Field
		ent     zapcore.Entry
		fields  []zapcore.Field
	}{
		{desc: "the access line", ent: entry("request"), fields: accessFields()},
		{desc: "no fields", ent: entry("request")},
		{desc: "empty message, no logger name", ent: zapcore.Entry{Level: zapcore.WarnLevel, Time: stamp}},
		{desc: "zero time", ent: zapcore.Entry{Level: zapcore.ErrorLevel, Message: "m"}, fields: []zapcore.Field{zap.Int("n", 1)}},
		{desc: "every level", ent: entry("m"), fields: nil},
		{desc: "unknown levels", ent: zapcore.Entry{Level: zapcore.Level(-5), Time: stamp, Message: "m"}},
		{desc: "level above fatal", ent: zapcore.Entry{Level: zapcore.Level(42), Time: stamp, Message: "m"}},
		{desc: "caller and stack", ent: zapcore.Entry{
			Level: zapcore.ErrorLevel, Time: stamp, LoggerName: "a.b", Message: "boom",
			Caller: zapcore.NewEntryCaller(0, "/src/github.com/relaygate/gateway/server/handler.go", 42, true),
			Stack:  "goroutine 1 [running]:\nmain.main()\n\t/x.go:1",
		}, fields: []zapcore.Field{zap.Int("n", 1)}},
		{desc: "stack inside a namespace", ent: zapcore.Entry{Level: zapcore.InfoLevel, Time: stamp, Message: "m", Stack: "s\t\"q\""},
			fields: []zapcore.Field{zap.Namespace("ns"), zap.Int("n", 1)}},
		{desc: "escapes in message, name and caller", ent: zapcore.Entry{
			Level: zapcore.InfoLevel, Time: stamp, LoggerName: "a\"b\n", Message: "tab\there \"quoted\" \\ \x01\x1f\x7f",
			Caller: zapcore.NewEntryCaller(0, "/a/b\"c/d\x00.go", 1, true),
		}},
		{desc: "escapes in keys and values", ent: entry("m"), fields: []zapcore.Field{
			zap.String("k\"\\\n\r\t\x00", "v\"\\\n\r\t\x00\x1b\x7f"),
			zap.String("unicode", "héllo wörld 日本 🎉 \u2028\u2029 \ufffd"),
			zap.String("invalid", "a\xffb\xc0\xafc\xe0\x80\xafd\xed\xa0\x80e\xf4\x90\x80\x80f\xf0\x9f\x8e"),
			zap.String("cut", "\xe6\x97"),
			zap.ByteString("bytes", []byte("x\xfe\"y\u00e9")),
			zap.ByteString("nil bytes", nil),
			zap.String("", ""),
		}},
		{desc: "numbers", ent: entry("m"), fields: []zapcore.Field{
			zap.Int64("min", math.MinInt64), zap.Uint64("max", math.MaxUint64),
			zap.Int32("i32", -5), zap.Int16("i16", 300), zap.Int8("i8", -128),
			zap.Uint32("u32", 7), zap.Uint16("u16", 65535), zap.Uint8("u8", 255), zap.Uintptr("uptr", 0xdeadbeef),
			{Key: "cut16", Type: zapcore.Int16Type, Integer: 70000},
			{Key: "cut8", Type: zapcore.Uint8Type, Integer: -1},
			zap.Bool("t", true), zap.Bool("f", false),
			{Key: "bool2", Type: zapcore.BoolType, Integer: 2},
		}},
		{desc: "floats", ent: entry("m"), fields: []zapcore.Field{
			zap.Float64("nan", math.NaN()), zap.Float64("inf", math.Inf(1)), zap.Float64("-inf", math.Inf(-1)),
			zap.Float64("-0", math.Copysign(0, -1)), zap.Float64("big", 1e300), zap.Float64("small", 5e-324),
			zap.Float64("third", 1.0/3), zap.Float32("f32", 0.1), zap.Float32("f32nan", float32(math.NaN())),
			zap.Float32("f32max", math.MaxFloat32),
			zap.Complex128("c", complex(math.NaN(), math.NaN())), zap.Complex64("c64", complex(1, -0.5)),
		}},
		{desc: "durations", ent: entry("m"), fields: []zapcore.Field{
			zap.Duration("zero", 0), zap.Duration("ns", 1), zap.Duration("neg", -87*time.Microsecond),
			zap.Duration("min", math.MinInt64), zap.Duration("max", math.MaxInt64), zap.Duration("hour", time.Hour),
		}},
		{desc: "times", ent: entry("m"), fields: []zapcore.Field{
			zap.Time("utc", stamp), zap.Time("india", stamp.In(india)), zap.Time("brazil", stamp.In(brazil)),
			zap.Time("odd", stamp.In(oddSeconds)), zap.Time("tiny", stamp.In(tinyWest)),
			zap.Time("year0", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)),
			zap.Time("year-5", time.Date(-5, 1, 1, 0, 0, 0, 999999999, time.UTC)),
			zap.Time("year10000", time.Date(10000, 1, 1, 0, 0, 0, 1e6, india)),
			{Key: "no location", Type: zapcore.TimeType, Integer: stamp.UnixNano()},
			zap.Time("zero", time.Time{}),
		}},
		{desc: "entry time in a zone with a half hour", ent: zapcore.Entry{Level: zapcore.InfoLevel, Time: stamp.In(india), Message: "m"}},
		{desc: "entry time west of UTC", ent: zapcore.Entry{Level: zapcore.InfoLevel, Time: stamp.In(brazil), Message: "m"}},
		{desc: "entry time with a seconds offset", ent: zapcore.Entry{Level: zapcore.InfoLevel, Time: stamp.In(oddSeconds), Message: "m"}},
		{desc: "entry time before 1970", ent: zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Date(1969, 12, 31, 23, 59, 59, 1e6, time.UTC), Message: "m"}},
		{desc: "entry time in the local zone", ent: zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: "m"}},
		{desc: "stringers", ent: entry("m"), fields: []zapcore.Field{
			zap.Stringer("plain", stringerFunc(func() string { return "a\"b" })),
			zap.Stringer("nil pointer", (*nilStringer)(nil)),
			zap.Stringer("panics", stringerFunc(func() string { panic("boom") })),
			zap.Stringer("duration", time.Second),
			zap.Stringer("nil interface", nil),
			{Key: "not a stringer", Type: zapcore.StringerType, Interface: 42},
		}},
		{desc: "client addresses", ent: entry("m"), fields: []zapcore.Field{
			zap.Stringer("v4", &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3).To4(), Port: 80}),
			zap.Stringer("v4 in 16 bytes", &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 80}),
			zap.Stringer("v6", &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443}),
			zap.Stringer("v4-mapped", &net.TCPAddr{IP: net.ParseIP("::ffff:1.2.3.4"), Port: 1}),
			zap.Stringer("zone", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 8080, Zone: "eth0"}),
			zap.Stringer("zone on v4", &net.TCPAddr{IP: net.IPv4(1, 2, 3, 4), Port: 1, Zone: "a\"b"}),
			zap.Stringer("no ip", &net.TCPAddr{Port: 9}),
			zap.Stringer("odd ip", &net.TCPAddr{IP: net.IP{1, 2, 3}, Port: -1}),
			zap.Stringer("nil", (*net.TCPAddr)(nil)),
			zap.Stringer("unix", &net.UnixAddr{Name: "/run/x.sock", Net: "unix"}),
		}},
		{desc: "errors", ent: entry("m"), fields: []zapcore.Field{
			zap.Error(errors.New("plain")),
			zap.NamedError("nil pointer", (*nilError)(nil)),
			zap.NamedError("panics", panicError{}),
			zap.NamedError("group", groupError{errors.New("one"), nil, richError{"two", "two\nstack"}}),
			zap.NamedError("rich", richError{"short", "short\nat main.go:1"}),
			zap.NamedError("rich alike", richError{"same", "same"}),
			zap.NamedError("joined", errors.Join(errors.New("a"), errors.New("b"))),
			zap.NamedError("wrapped", fmt.Errorf("outer: %w", errors.New("inner"))),
		}},
		{desc: "objects, arrays and reflection", ent: entry("m"), fields: []zapcore.Field{
			zap.Object("all", allObject),
			zap.Array("arr", allArray),
			zap.Inline(object(func(enc zapcore.ObjectEncoder) error { enc.AddInt("inlined", 1); return nil })),
			zap.Any("map", map[string]any{"k": []int{1, 2}, "h": "<&>"}),
			zap.Reflect("nil", nil),
			zap.Reflect("unencodable", make(chan int)),
			zap.Binary("bin", []byte("\x00\xffhello")),
			zap.Dict("dict", zap.Int("a", 1), zap.Namespace("n"), zap.String("b", "c")),
			zap.Ints("ints", []int{1, 2, 3}),
			zap.Strings("strs", nil),
			zap.Errors("errs", []error{errors.New("x"), nil}),
			zap.Skip(),
		}},
		{desc: "an inline object that opens a namespace", ent: entry("m"), fields: []zapcore.Field{
			zap.Inline(object(func(enc zapcore.ObjectEncoder) error { enc.OpenNamespace("opened"); return nil })),
			zap.Int("inside", 1),
		}},
		{desc: "only fields that write nothing", ent: entry("m"), fields: []zapcore.Field{
			zap.Skip(), zap.Inline(object(func(zapcore.ObjectEncoder) error { return nil })),
		}},
		{desc: "an empty inline object among fields", ent: entry("m"), fields: []zapcore.Field{
			zap.Int("a", 1), zap.Inline(object(func(zapcore.ObjectEncoder) error { return nil })), zap.Int("b", 2),
		}},
		{desc: "context only", context: []zapcore.Field{zap.String("service", "gw"), zap.Int("pid", 7)}, ent: entry("m")},
		{desc: "context and fields", context: []zapcore.Field{zap.String("service", "gw")}, ent: entry("m"), fields: accessFields()},
		{desc: "a namespace in the context holds the fields", context: []zapcore.Field{zap.Namespace("req"), zap.String("id", "x")},
			ent: entry("m"), fields: []zapcore.Field{zap.Int("n", 1), zap.Namespace("inner")}},
		{desc: "an empty namespace in the context", context: []zapcore.Field{zap.Namespace("req")}, ent: entry("m")},
		{desc: "rich context", context: []zapcore.Field{
			zap.Object("o", allObject), zap.Stringer("src", &net.TCPAddr{IP: net.IPv6loopback, Port: 1}),
			zap.Error(groupError{errors.New("e")}), zap.Time("at", stamp.In(india)), zap.Skip(),
		}, ent: entry("m"), fields: []zapcore.Field{zap.Int("n", 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			requireSameAsZap(t, tc.context, tc.ent, tc.fields)
			for l := zapcore.DebugLevel; l <= zapcore.FatalLevel; l++ {
				ent := tc.ent
				ent.Level = l
				requireSameAsZap(t, tc.context, ent, tc.fields)
			}
		})
	}
}

// TestJSONLinesParse: a JSON line is valid JSON holding what was logged,
// so that the comparison with zap is not a comparison of two wrong lines.
func TestJSONLinesParse(t *testing.T) {
	line := encodeLine(t, NewJSON(), []zapcore.Field{zap.String("service", "gw")}, entry("request"), accessFields())
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	want := map[string]any{
		"level": "info", "ts": "2026-11-26T00:35:20.123Z", "logger": "access", "msg": "request",
		"service": "gw", "path": "/small", "status": 200.0, "duration": 0.000087,
		"src": "127.0.0.1:51234", "upstream_error": "dial tcp 127.0.0.1:9000: connection refused",
		"mcp.denied": true, "llm.cost": 0.000123,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if !strings.HasSuffix(line, "}\n") {
		t.Errorf("line %q does not end with a newline", line)
	}
}

// TestConsoleLine pins the console form the gateway's log readers see.
func TestConsoleLine(t *testing.T) {
	got := encodeLine(t, NewConsole(), nil, entry("request"), accessFields()[:9])
	want := "2026-11-26T00:35:20.123Z\tINFO\taccess\trequest\t" +
		`{"method": "GET", "path": "/small", "status": 200, "duration": 0.000087, "route": "bind/8080/route0", ` +
		`"backend": "127.0.0.1:9000", "bytes_in": 0, "bytes_out": 100, "src": "127.0.0.1:51234"}` + "\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestCloneKeepsContextApart: fields added to a clone do not reach the
// encoder it was cloned from, nor a sibling clone.
func TestCloneKeepsContextApart(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			base := f.ours()
			base.AddString("base", "1")
			a, b := base.Clone(), base.Clone()
			a.AddString("a", "1")
			b.AddString("b", "1")
			lines := map[string]zapcore.Encoder{"base": base, "a": a, "b": b}
			for name, enc := range lines {
				line := encodeLine(t, enc, nil, entry("m"), nil)
				for _, key := range []string{"base", "a", "b"} {
					has := strings.Contains(line, `"`+key+`"`)
					if want := key == "base" || key == name; has != want {
						t.Errorf("%s's line %q: has %q = %v, want %v", name, line, key, has, want)
					}
				}
			}
		})
	}
}

// TestEncodersConcurrent: loggers sharing one encoder (and the second
// cache) from many goroutines write each line as zap would (run with
// -race).
func TestEncodersConcurrent(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			ours := f.ours().Clone()
			ours.AddString("service", "gw")
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 500 {
						ent := entry("request")
						ent.Time = stamp.Add(time.Duration(g*500+i) * time.Millisecond)
						fields := append(accessFields(), zap.Int("i", i))
						got := encodeLine(t, ours, nil, ent, fields)
						want := encodeLine(t, f.zaps(), []zapcore.Field{zap.String("service", "gw")}, ent, fields)
						if got != want {
							t.Errorf("got %q\nwant %q", got, want)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestAccessLineAllocatesNothing: once the buffer pool is warm, encoding
// the access line allocates nothing.
func TestAccessLineAllocatesNothing(t *testing.T) {
	fields := accessFields()[:9]
	for _, f := range formats {
		enc := f.ours()
		n := testing.AllocsPerRun(200, func() {
			buf, err := enc.EncodeEntry(entry("request"), fields)
			if err != nil {
				t.Fatal(err)
			}
			buf.Free()
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per line", f.name, n)
		}
	}
}

// TestLongLinesLeaveThePoolAlone: a line longer than maxPooledLine comes
// out whole, and its buffer does not go back to the pool.
func TestLongLinesLeaveThePoolAlone(t *testing.T) {
	long := strings.Repeat("x", 3*maxPooledLine)
	for _, f := range formats {
		buf, err := f.ours().EncodeEntry(entry(long), []zapcore.Field{zap.String("again", long)})
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(buf.String(), long); n != 2 {
			t.Fatalf("%s: the line holds the long text %d times", f.name, n)
		}
		buf.Free()
		// sync.Pool hands back what this goroutine put in last, if it
		// kept it.
		if next := linePool.Get(); next.Cap() > 2*maxPooledLine {
			t.Fatalf("%s: the pool holds a buffer of %d bytes", f.name, next.Cap())
		}
	}
}
