package server

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/tlstest"
)

// testPKI is a CA made for one test (backend/tlstest), issuing server and
// client certificates, with PEM files in the test's directory.
type testPKI struct {
	t      testing.TB
	ca     *tlstest.CA
	dir    string
	CAFile string
	Pool   *x509.CertPool
	n      int
}

func newTestPKI(t testing.TB, name string) *testPKI {
	t.Helper()
	p := &testPKI{t: t, ca: tlstest.NewCA(t, name), dir: t.TempDir(), Pool: x509.NewCertPool()}
	p.Pool.AddCert(p.ca.Cert)
	p.CAFile = p.write(name+"-ca.pem", p.ca.PEM)
	return p
}

// KeyFile writes the CA's own key, for a dynamicCa listener.
func (p *testPKI) KeyFile() string { return p.write("ca-key.pem", p.ca.KeyPEM(p.t)) }

func (p *testPKI) write(name string, data []byte) string {
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, data, 0o600); err != nil {
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

// Server issues a server certificate with common name cn for names (DNS
// names, IP addresses, or URIs such as spiffe://...).
func (p *testPKI) Server(cn string, names ...string) issued {
	return p.issue(cn, x509.ExtKeyUsageServerAuth, names)
}

// Client issues a client certificate with common name cn and names.
func (p *testPKI) Client(cn string, names ...string) issued {
	return p.issue(cn, x509.ExtKeyUsageClientAuth, names)
}

func (p *testPKI) issue(cn string, usage x509.ExtKeyUsage, names []string) issued {
	p.t.Helper()
	var n tlstest.Names
	for _, s := range names {
		switch {
		case net.ParseIP(s) != nil:
			n.IPs = append(n.IPs, s)
		case strings.Contains(s, "://"):
			n.URIs = append(n.URIs, s)
		default:
			n.DNS = append(n.DNS, s)
		}
	}
	l := p.ca.Issue(p.t, cn, n, usage)
	p.n++
	base := cn + "-" + string(rune('a'+p.n%26)) + "-" + itoa(p.n)
	return issued{TLS: l.TLS, CertFile: p.write(base+".pem", l.CertPEM), KeyFile: p.write(base+"-key.pem", l.KeyPEM)}
}
