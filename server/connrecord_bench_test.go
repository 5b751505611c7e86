package server

import (
	"io"
	"net"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/relaygate/gateway/codec/logline"
)

// connRecordSetup starts a gateway whose access log is the production
// writer (JSON) into a discarding sink, with frontendPolicies from policies
// and one TCP bind, and returns a function that writes one forwarded
// connection's record as forwardTCP does, for a real loopback connection.
func connRecordSetup(tb testing.TB, policies string) func() {
	tb.Helper()
	w := logline.NewAccessWriter("json", zapcore.AddSync(io.Discard), logline.AccessWriterOptions{})
	gw := New(Options{Logger: zap.NewNop(), AccessLog: w, ListenAddr: func(int) string { return "127.0.0.1:0" }})
	tb.Cleanup(func() { gw.Shutdown(expiredContext()) })
	if err := gw.Apply(parseConfigTB(tb, policies+`
binds:
- port: 1
  listeners:
  - name: raw
    protocol: TCP
    tcpRoutes:
    - name: db
      backends: [{host: 127.0.0.1:5432}]
`)); err != nil {
		tb.Fatal(err)
	}
	gw.mu.Lock()
	b := gw.binds[1]
	gw.mu.Unlock()
	r := b.current.Load().tcp.tcpRoutes[0]
	be := r.backends[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close(); c.Close() })
	return func() {
		rec := newConnRecord(r.protocol, r.bind, r.listener, c, "")
		rec.Route, rec.Backend, rec.Endpoint = r.name, be.name, be.addr
		rec.BytesIn, rec.BytesOut, rec.End = 1<<20, 1<<20, endClosed
		b.logConn(rec, c, c, be, "", 1)
	}
}

// connRecordPolicies are the access log settings the record is measured
// with: none, a removal (no expression), and a filter and two added
// fields (CEL over source, destination and backend).
var connRecordPolicies = []struct{ desc, yaml string }{
	{"default", ""},
	{"remove", "frontendPolicies: {accessLog: {remove: [endpoint, listener]}}\n"},
	{"filter-add", `frontendPolicies:
  accessLog:
    filter: 'backend.name != "quiet"'
    add: {client: source.address, dst.port: 'string(destination.port)'}
`},
}

// TestConnRecordAllocations: a connection's record allocates nothing when
// the access log has no expressions to evaluate.
func TestConnRecordAllocations(t *testing.T) {
	for _, p := range connRecordPolicies[:2] {
		t.Run(p.desc, func(t *testing.T) {
			logOne := connRecordSetup(t, p.yaml)
			logOne()
			if n := testing.AllocsPerRun(200, logOne); n != 0 {
				t.Fatalf("%v allocations a record, want 0", n)
			}
		})
	}
}

// BenchmarkConnRecord is a forwarded connection's record from its fields
// to the line in the writer's buffer, under each access log setting.
func BenchmarkConnRecord(b *testing.B) {
	for _, p := range connRecordPolicies {
		b.Run(p.desc, func(b *testing.B) {
			logOne := connRecordSetup(b, p.yaml)
			b.ReportAllocs()
			for b.Loop() {
				logOne()
			}
		})
	}
}
