package logline

import (
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkEncodeAccessLine encodes the access log's line for a plain
// proxied GET (the nine fields record writes) with zap's encoder and ours,
// in both formats, with the entry time of now as zap's logger sets it.
func BenchmarkEncodeAccessLine(b *testing.B) {
	fields := []zapcore.Field{
		zap.String("method", "GET"),
		zap.String("path", "/small"),
		zap.Int("status", 200),
		zap.Duration("duration", 87*time.Microsecond),
		zap.String("route", "bind/8080/route0"),
		zap.String("backend", "127.0.0.1:9000"),
		zap.Int("bytes_in", 0),
		zap.Int("bytes_out", 100),
		zap.Stringer("src", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234}),
	}
	for _, f := range formats {
		for _, enc := range []struct {
			name string
			enc  zapcore.Encoder
		}{{"zap", f.zaps()}, {"logline", f.ours()}} {
			b.Run(f.name+"/"+enc.name, func(b *testing.B) {
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), LoggerName: "access", Message: "request"}
					buf, err := enc.enc.EncodeEntry(ent, fields)
					if err != nil {
						b.Fatal(err)
					}
					buf.Free()
				}
				reportCPUPerOp(b, cpu)
			})
		}
	}
}
