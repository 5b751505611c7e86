package logline

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// writeConn returns the line w (its format's keys, stamped t) writes for c.
func writeConn(format string, c *Conn, t time.Time) string {
	var out lineRecorder
	w := NewAccessWriter(format, &out, AccessWriterOptions{})
	w.now = func() time.Time { return t }
	w.LogConn(c)
	return string(out)
}

// zapConnLine returns the line ZapAccess writes for c through a logger
// named AccessLoggerName with enc, stamped t.
func zapConnLine(enc zapcore.Encoder, c *Conn, t time.Time) string {
	var out lineRecorder
	l := zap.New(zapcore.NewCore(enc, &out, zap.InfoLevel), zap.WithClock(clockAt(t))).Named(AccessLoggerName)
	ZapAccess(l).LogConn(c)
	return string(out)
}

// requireConnSameAsZap fails unless AccessWriter writes, in both formats,
// what ZapAccess writes for c through zap's encoder and through ours.
func requireConnSameAsZap(t testing.TB, c *Conn, at time.Time) {
	t.Helper()
	for _, f := range formats {
		got := writeConn(f.name, c, at)
		for _, enc := range []zapcore.Encoder{f.zaps(), f.ours()} {
			if want := zapConnLine(enc, c, at); got != want {
				t.Fatalf("%s:\n got %q\nwant %q", f.name, got, want)
			}
		}
	}
}

// fullConn is a connection record with every field set.
func fullConn() *Conn {
	return &Conn{
		Protocol: "tls", Bind: "bind/8443", Listener: "pass", Route: "pass/tcp0", Backend: "db",
		Src: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234}, SNI: "db.example.com",
		Destination: "db.example.com:8443", Endpoint: "10.0.0.7:5432",
		BytesIn: 517, BytesOut: 4096, Duration: 1500 * time.Millisecond, End: "upstream_reset",
		UpstreamError: errors.New("read: connection reset by peer"),
		Extra:         []AccessField{{Key: "team", Value: "eng"}},
	}
}

// TestConnLines pins the two formats' connection lines, and holds them to
// what zap writes for the same records.
func TestConnLines(t *testing.T) {
	plain := &Conn{
		Protocol: "tcp", Bind: "bind/9000", Listener: "", Route: "bind/9000/tcp0", Backend: "127.0.0.1:7000",
		Src: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, Endpoint: "127.0.0.1:7000",
		BytesIn: 5, BytesOut: 11, Duration: 250 * time.Microsecond, End: "closed",
	}
	tests := []struct {
		desc, format string
		c            *Conn
		want         string
	}{
		{"console tcp", "console", plain,
			"2026-11-26T00:35:20.123Z\tINFO\taccess\tconnection\t" +
				`{"protocol": "tcp", "bind": "bind/9000", "listener": "", "route": "bind/9000/tcp0", "backend": "127.0.0.1:7000", "src": "127.0.0.1:40000", "endpoint": "127.0.0.1:7000", "bytes_in": 5, "bytes_out": 11, "duration": 0.00025, "end": "closed"}` + "\n"},
		{"json tcp", "json", plain,
			`{"level":"info","ts":"2026-11-26T00:35:20.123Z","logger":"access","msg":"connection","protocol":"tcp","bind":"bind/9000","listener":"","route":"bind/9000/tcp0","backend":"127.0.0.1:7000","src":"127.0.0.1:40000","endpoint":"127.0.0.1:7000","bytes_in":5,"bytes_out":11,"duration":0.00025,"end":"closed"}` + "\n"},
		{"json every field", "json", fullConn(),
			`{"level":"info","ts":"2026-11-26T00:35:20.123Z","logger":"access","msg":"connection","protocol":"tls","bind":"bind/8443","listener":"pass","route":"pass/tcp0","backend":"db","src":"127.0.0.1:51234","tls.sni":"db.example.com","destination":"db.example.com:8443","endpoint":"10.0.0.7:5432","bytes_in":517,"bytes_out":4096,"duration":1.5,"end":"upstream_reset","upstream_error":"read: connection reset by peer","team":"eng"}` + "\n"},
		{"json refused, no address", "json", &Conn{Protocol: "tls", Bind: "bind/1", SNI: "a\"b", End: "denied"},
			`{"level":"info","ts":"2026-11-26T00:35:20.123Z","logger":"access","msg":"connection","protocol":"tls","bind":"bind/1","listener":"","route":"","backend":"","tls.sni":"a\"b","bytes_in":0,"bytes_out":0,"duration":0,"end":"denied"}` + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := writeConn(tc.format, tc.c, stamp); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			requireConnSameAsZap(t, tc.c, stamp)
		})
	}
}

// TestConnOmit: removed fields are left out of the connection line,
// whichever they are, with the separators right; a removal of a request
// line's field changes nothing.
func TestConnOmit(t *testing.T) {
	for _, tc := range []struct {
		desc string
		omit AccessFields
		gone []string
	}{
		{"the first", FieldProtocol, []string{`"protocol"`}},
		{"the address and the name", FieldSrc | FieldSNI, []string{`"src"`, `"tls.sni"`}},
		{"every built-in", ConnFields, []string{`"protocol"`, `"bind"`, `"end"`, `"bytes_in"`, `"upstream_error"`}},
		{"request fields only", RequestFields &^ ConnFields, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := fullConn()
			c.Omit = tc.omit
			requireConnSameAsZap(t, c, stamp)
			line := writeConn("json", c, stamp)
			for _, g := range tc.gone {
				if strings.Contains(line, g) {
					t.Errorf("%s is in %s", g, line)
				}
			}
			if tc.gone == nil && line != writeConn("json", fullConn(), stamp) {
				t.Errorf("the line changed: %s", line)
			}
			if !strings.Contains(line, `"team":"eng"`) {
				t.Errorf("the added field is lost: %s", line)
			}
		})
	}
}

// TestConnWriterAllocations: a connection line allocates nothing, though
// every connection brings an address of its own.
func TestConnWriterAllocations(t *testing.T) {
	w := NewAccessWriter("json", zapcore.AddSync(discardWriter{}), AccessWriterOptions{})
	c := fullConn()
	c.UpstreamError = nil // an error's field may allocate in zap's code
	addrs := make([]net.TCPAddr, 128)
	for i := range addrs {
		addrs[i] = net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 30000 + i}
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		c.Src = &addrs[i]
		i++
		w.LogConn(c)
	}); n != 0 {
		t.Fatalf("%v allocations a line, want 0", n)
	}
}

// FuzzConnWriterMatchesZap builds a connection record from the fuzzer's
// bytes and requires AccessWriter to write what ZapAccess writes.
func FuzzConnWriterMatchesZap(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x03tcp\x06bind/1\x00\x05route\x07backend\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &fuzzSource{data: data}
		c := &Conn{
			Protocol: s.string(), Bind: s.string(), Listener: s.string(), Route: s.string(), Backend: s.string(),
			SNI: s.string(), Destination: s.string(), Endpoint: s.string(),
			BytesIn: int64(s.uint64()), BytesOut: int64(s.uint64()), Duration: time.Duration(s.uint64()), End: s.string(),
		}
		switch s.byte() % 3 {
		case 0:
			c.Src = s.tcpAddr()
		case 1:
			c.Src = &net.UnixAddr{Name: s.string(), Net: "unix"}
		}
		if s.bool() {
			c.UpstreamError = s.error()
		}
		for range s.byte() % 4 {
			c.Extra = append(c.Extra, s.accessField())
		}
		if s.bool() {
			c.Omit = AccessFields(s.uint64())
		}
		requireConnSameAsZap(t, c, stamp.Add(time.Duration(int64(s.uint64()))))
	})
}

// BenchmarkConnLine writes a forwarded TCP connection's line to a
// discarding sink, through ZapAccess with our encoder and through
// AccessWriter, in both formats: a fresh client address each time, as
// each connection has.
func BenchmarkConnLine(b *testing.B) {
	c := &Conn{
		Protocol: "tcp", Bind: "bind/9000", Route: "bind/9000/tcp0", Backend: "127.0.0.1:7000",
		Endpoint: "127.0.0.1:7000", BytesIn: 1 << 20, BytesOut: 1 << 20, Duration: 3 * time.Millisecond, End: "closed",
	}
	addrs := make([]net.TCPAddr, 1024)
	for i := range addrs {
		addrs[i] = net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 30000 + i}
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
				i := 0
				for b.Loop() {
					c.Src = &addrs[i%len(addrs)]
					i++
					l.l.LogConn(c)
				}
				reportCPUPerOp(b, cpu)
			})
		}
	}
}
