package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeSelfSigned writes a self-signed certificate for localhost with
// common name cn, and its key, replacing the files by rename as cert
// managers do.
func writeSelfSigned(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	// The key first: between the two renames the pair does not match, and
	// the reload that sees it must keep the running certificate.
	mustWrite(t, keyFile+".tmp", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	if err := os.Rename(keyFile+".tmp", keyFile); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, certFile+".tmp", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	if err := os.Rename(certFile+".tmp", certFile); err != nil {
		t.Fatal(err)
	}
}

// servedCN is the common name of the certificate the listener at addr
// presents, or "" when the handshake fails.
func servedCN(addr string) string {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{ServerName: "localhost", InsecureSkipVerify: true})
	if err != nil {
		return ""
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestCertificatesReloadWhenTheirFilesChange: replacing a listener's
// certificate files (not the config) changes the certificate served,
// without a restart.
func TestCertificatesReloadWhenTheirFilesChange(t *testing.T) {
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	mustMkdir(t, certDir)
	certFile, keyFile := filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")
	writeSelfSigned(t, certFile, keyFile, "first")
	port := freePort(t)
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, fmt.Sprintf(`config:
  adminAddr: 127.0.0.1:0
  statsAddr: 127.0.0.1:0
  readinessAddr: 127.0.0.1:0
binds:
- port: %d
  listeners:
  - protocol: HTTPS
    tls: {cert: %s, key: %s}
    routes:
    - policies: {directResponse: {status: 200, body: ok}}
`, port, certFile, keyFile))
	p := startProc(t, cfg)
	p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitCN := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for servedCN(addr) != want {
			if time.Now().After(deadline) {
				t.Fatalf("the listener never served %q (serves %q):\n%s", want, servedCN(addr), p.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCN("first")
	writeSelfSigned(t, certFile, keyFile, "second")
	waitCN("second")
}
