package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI is a CA made for one test, issuing server and client
// certificates, with PEM files in the test's directory.
type testPKI struct {
	t      testing.TB
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAFile string
	Pool   *x509.CertPool
	serial int64
}

func newTestPKI(t testing.TB, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &testPKI{t: t, dir: t.TempDir(), cert: cert, key: key, Pool: x509.NewCertPool(), serial: 1}
	p.Pool.AddCert(cert)
	p.CAFile = p.write(name+"-ca.pem", "CERTIFICATE", der)
	return p
}

// KeyFile writes the CA's own key, for a dynamicCa listener.
func (p *testPKI) KeyFile() string {
	der, err := x509.MarshalECPrivateKey(p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.write("ca-key.pem", "EC PRIVATE KEY", der)
}

func (p *testPKI) write(name, typ string, der []byte) string {
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return f
}

// issued is a certificate with its key, in memory and as PEM files.
type issued struct {
	TLS      tls.Certificate
	CertFile string
	KeyFile  string
}

// Server issues a server certificate for names (DNS names or IP addresses).
func (p *testPKI) Server(cn string, names ...string) issued {
	return p.issue(cn, x509.ExtKeyUsageServerAuth, names)
}

// Client issues a client certificate with common name cn and URI or DNS
// subject alternative names.
func (p *testPKI) Client(cn string, names ...string) issued {
	return p.issue(cn, x509.ExtKeyUsageClientAuth, names)
}

func (p *testPKI) issue(cn string, usage x509.ExtKeyUsage, names []string) issued {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"relaygate test"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if u, err := parseURISAN(n); err == nil && u != nil {
			tmpl.URIs = append(tmpl.URIs, u)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	name := cn + "-" + big.NewInt(p.serial).String()
	return issued{
		TLS:      tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		CertFile: p.write(name+".pem", "CERTIFICATE", der),
		KeyFile:  p.write(name+"-key.pem", "EC PRIVATE KEY", keyDER),
	}
}

// parseURISAN returns s as a URI SAN when it has a scheme (spiffe://...).
func parseURISAN(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		return nil, nil
	}
	return url.Parse(s)
}
