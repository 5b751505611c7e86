package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// UpstreamTLS is how an upstream pool speaks TLS; the zero value is plain
// TCP. It is comparable, as part of a pool's key: two backends with the
// same address and TLS settings share warm connections, and a reload that
// keeps them keeps the pool. Backend TLS policies (client certificates,
// SAN checks, ALPN) come as further fields.
type UpstreamTLS struct {
	Enabled bool
	// ServerName is sent as SNI and verified against the certificate;
	// default: the host of the pool's address.
	ServerName string
	// RootsFile is a PEM file of the CAs to trust instead of the system's.
	RootsFile string
}

// Config builds the client configuration for a pool to host: TLS 1.2 or
// 1.3, the system roots unless RootsFile names others. An unreadable or
// empty roots file is an error, for the config that named it.
func (t UpstreamTLS) Config(host string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if c.ServerName == "" {
		c.ServerName = host
	}
	if t.RootsFile != "" {
		pem, err := os.ReadFile(t.RootsFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", t.RootsFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// handshake runs the client side of TLS on c within the connect timeout:
// a failure is a connect failure (nothing was sent).
func handshake(c net.Conn, cfg *tls.Config, d Dialing) (net.Conn, error) {
	timeout := d.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// errTLSConfig stands for a pool whose TLS settings failed after they were
// checked at load (a roots file removed meanwhile): every dial fails with it.
type errTLSConfig struct{ err error }

func (e errTLSConfig) Error() string { return "upstream TLS: " + e.err.Error() }
func (e errTLSConfig) Unwrap() error { return e.err }
