package server

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// bytesPeeker is a peeker over bytes that arrived whole.
type bytesPeeker struct{ b []byte }

func (p *bytesPeeker) Peek(buf []byte, enough func([]byte) bool) (int, error) {
	n := copy(buf, p.b)
	enough(buf[:n])
	return n, nil
}

// recordedHello is the ClientHello crypto/tls sends for server name sni,
// with ALPN h2 and http/1.1.
func recordedHello(tb testing.TB, sni string) []byte {
	tb.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		c := tls.Client(client, &tls.Config{ServerName: sni, NextProtos: []string{"h2", "http/1.1"}})
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_ = c.Handshake() // fails once the pipe closes
		client.Close()
	}()
	buf := make([]byte, 16<<10)
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := server.Read(buf)
	if err != nil {
		tb.Fatal(err)
	}
	return buf[:n]
}

// BenchmarkReadHello: the connection layer's look at a TLS connection's
// first bytes, a real ClientHello (crypto/tls's) whole in the peek, as on
// every new TLS connection before the listener is picked. It allocates the
// server name only.
func BenchmarkReadHello(b *testing.B) {
	hello := &bytesPeeker{recordedHello(b, "API.Example.com")}
	bd := &bind{gw: &Gateway{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(hello.b)))
	for b.Loop() {
		sni, kind := bd.readHello(nil, hello)
		if kind != helloTLS || sni != "api.example.com" {
			b.Fatalf("%q %d", sni, kind)
		}
	}
}

// TestReadHello: the look at a connection's first bytes tells a ClientHello
// (its server name in lower case, "" for none) from plain HTTP and from a
// broken hello, with its pooled state reused from look to look.
func TestReadHello(t *testing.T) {
	named := recordedHello(t, "API.Example.com")
	ip := recordedHello(t, "127.0.0.1") // crypto/tls sends no server_name for an IP
	bd := &bind{gw: New(Options{})}
	for i := 0; i < 3; i++ {
		for _, tc := range []struct {
			desc  string
			bytes []byte
			sni   string
			kind  int
		}{
			{"named", named, "api.example.com", helloTLS},
			{"IP literal", ip, "", helloTLS},
			{"plain HTTP", []byte("GET / HTTP/1.1\r\n"), "", helloPlain},
			{"nothing", nil, "", helloBad},
			{"cut hello", named[:len(named)/2], "", helloBad},
		} {
			var c net.Conn = &net.TCPConn{}
			sni, kind := bd.readHello(c, &bytesPeeker{tc.bytes})
			if sni != tc.sni || kind != tc.kind {
				t.Errorf("%s: %q %d, want %q %d", tc.desc, sni, kind, tc.sni, tc.kind)
			}
		}
	}
}
