package tlshello

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// fakeConn is a net.Conn that reads in and then EOF, and keeps what is
// written to it. It never blocks, so a TLS handshake over it ends as soon as
// it has read all of in.
type fakeConn struct {
	in  io.Reader
	out bytes.Buffer
}

func (c *fakeConn) Read(b []byte) (int, error)       { return c.in.Read(b) }
func (c *fakeConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *fakeConn) Close() error                     { return nil }
func (c *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// captureHello returns the first TLS record a crypto/tls client with cfg
// writes, which holds its ClientHello.
func captureHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c := &fakeConn{in: bytes.NewReader(nil)}
	if tls.Client(c, cfg).Handshake() == nil {
		t.Fatal("handshake over a conn that reads EOF succeeded")
	}
	out := c.out.Bytes()
	if len(out) < 9 || out[0] != 22 || out[5] != 1 {
		t.Fatalf("client wrote no handshake record: % x", out)
	}
	n := int(out[3])<<8 | int(out[4])
	if m := int(out[6])<<16 | int(out[7])<<8 | int(out[8]); m+4 != n {
		t.Fatalf("ClientHello of %d bytes in a record of %d", m+4, n)
	}
	return bytes.Clone(out[:5+n])
}

var (
	certOnce sync.Once
	testCert tls.Certificate
)

// serverCert returns a self-signed certificate for example.com.
func serverCert(t testing.TB) tls.Certificate {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1),
			Subject:      pkix.Name{CommonName: "example.com"},
			DNSNames:     []string{"example.com"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		testCert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	})
	return testCert
}

// captureResumption returns the ClientHello of a crypto/tls client with cfg
// resuming the session of a first, full handshake with a crypto/tls server:
// it carries a pre_shared_key (TLS 1.3) or a session ticket (TLS 1.2).
func captureResumption(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
	cfg.InsecureSkipVerify = true
	// Over loopback TCP: both sides write at once in TLS 1.3, which
	// net.Pipe, unbuffered, deadlocks on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvCfg := &tls.Config{Certificates: []tls.Certificate{serverCert(t)}, NextProtos: cfg.NextProtos}
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		s := tls.Server(conn, srvCfg)
		_, err = s.Write([]byte("x")) // after the handshake and, in TLS 1.3, the tickets
		s.Close()
		done <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(conn, cfg)
	// Reads the tickets first; (1, io.EOF) when the close_notify is in too.
	if n, err := c.Read(make([]byte, 1)); n != 1 {
		t.Fatal(err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return captureHello(t, cfg)
}

// captured is a crypto/tls client configuration and what Parse must read in
// the hello it sends.
type captured struct {
	name       string
	cfg        *tls.Config
	resume     bool // a resumption's hello
	serverName string
	alpn       []string
	maxVersion uint16
	tls13      bool
}

func capturedCases() []captured {
	return []captured{
		{name: "sni alpn", cfg: &tls.Config{ServerName: "example.com", NextProtos: []string{"h2", "http/1.1"}},
			serverName: "example.com", alpn: []string{"h2", "http/1.1"}, maxVersion: tls.VersionTLS13, tls13: true},
		{name: "no sni", cfg: &tls.Config{InsecureSkipVerify: true},
			maxVersion: tls.VersionTLS13, tls13: true},
		{name: "ip address", cfg: &tls.Config{ServerName: "192.0.2.1"}, // crypto/tls sends no SNI for it
			maxVersion: tls.VersionTLS13, tls13: true},
		{name: "ipv6 address", cfg: &tls.Config{ServerName: "2001:db8::1"},
			maxVersion: tls.VersionTLS13, tls13: true},
		{name: "upper case", cfg: &tls.Config{ServerName: "WWW.Example.COM", NextProtos: []string{"http/1.1"}},
			serverName: "WWW.Example.COM", alpn: []string{"http/1.1"}, maxVersion: tls.VersionTLS13, tls13: true},
		{name: "trailing dot", cfg: &tls.Config{ServerName: "example.com."}, // stripped by crypto/tls
			serverName: "example.com", maxVersion: tls.VersionTLS13, tls13: true},
		{name: "tls12 only", cfg: &tls.Config{ServerName: "a.example", MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}},
			serverName: "a.example", alpn: []string{"h2"}, maxVersion: tls.VersionTLS12},
		{name: "tls10 to 12", cfg: &tls.Config{ServerName: "a.example", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS12},
			serverName: "a.example", maxVersion: tls.VersionTLS12},
		{name: "tls13 only", cfg: &tls.Config{ServerName: "b.example", MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}},
			serverName: "b.example", alpn: []string{"h2"}, maxVersion: tls.VersionTLS13, tls13: true},
		{name: "x25519 only", cfg: &tls.Config{ServerName: "c.example", CurvePreferences: []tls.CurveID{tls.X25519}},
			serverName: "c.example", maxVersion: tls.VersionTLS13, tls13: true},
		{name: "many protocols", cfg: &tls.Config{ServerName: "grpc.example", NextProtos: []string{"h2", "http/1.1", "acme-tls/1", "x-custom-protocol-with-a-long-name"}},
			serverName: "grpc.example", alpn: []string{"h2", "http/1.1", "acme-tls/1", "x-custom-protocol-with-a-long-name"}, maxVersion: tls.VersionTLS13, tls13: true},
		{name: "longest name", cfg: &tls.Config{ServerName: longName}, serverName: longName, maxVersion: tls.VersionTLS13, tls13: true},
		{name: "tls13 resumption", cfg: &tls.Config{ServerName: "example.com", NextProtos: []string{"h2"}}, resume: true,
			serverName: "example.com", alpn: []string{"h2"}, maxVersion: tls.VersionTLS13, tls13: true},
		{name: "tls12 resumption", cfg: &tls.Config{ServerName: "example.com", MaxVersion: tls.VersionTLS12}, resume: true,
			serverName: "example.com", maxVersion: tls.VersionTLS12},
	}
}

// longName is a 253-byte DNS name, the longest there is.
var longName = func() string {
	label := string(bytes.Repeat([]byte{'a'}, 63))
	return label + "." + label + "." + label + "." + string(bytes.Repeat([]byte{'b'}, 61))
}()

// capture returns c's hello.
func (c captured) capture(t testing.TB) []byte {
	if c.resume {
		return captureResumption(t, c.cfg)
	}
	return captureHello(t, c.cfg)
}
