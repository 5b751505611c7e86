package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"
)

func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go acceptLoop(ln, serve)
	return ln.Addr().String()
}

func TestSinkCounts(t *testing.T) {
	c, err := net.Dial("tcp", listen(t, sink))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 3<<20 + 7
	go func() {
		_, _ = c.Write(make([]byte, n))
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint64(b[:]); got != n {
		t.Fatalf("count %d, want %d", got, n)
	}
}

func TestGreet(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pass.test"},
		DNSNames: []string{"pass.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := serverConfig(tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	addr := listen(t, func(c net.Conn) { greet(c, cfg) })
	leaf, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for range 2 {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "pass.test", RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		if st := c.ConnectionState(); st.Version != tls.VersionTLS13 || st.DidResume {
			t.Fatalf("version %x, resumed %v: want a full TLS 1.3 handshake", st.Version, st.DidResume)
		}
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: pass.test\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" || !resp.Close {
			t.Fatalf("answer %d %q (close %v), want 200 \"ok\" and Connection: close", resp.StatusCode, body, resp.Close)
		}
		c.Close()
	}
}

func TestReadHeadBounded(t *testing.T) {
	r, w := io.Pipe()
	go func() {
		for {
			if _, err := w.Write(make([]byte, 1000)); err != nil {
				return
			}
		}
	}()
	defer r.Close()
	if err := readHead(r); err == nil {
		t.Fatal("readHead accepted a head without an end")
	}
}
