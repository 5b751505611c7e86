// Package tlstest makes the certificates and the HTTPS upstreams of the
// upstream TLS tests: a CA of the test's own, leaves with chosen names, and
// a server on 127.0.0.1 that records what each client's handshake offered.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate in PEM form.
	PEM []byte
}

var serial atomic.Int64

// NewCA returns a new CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Names are the subject alternative names of a leaf.
type Names struct {
	DNS  []string
	IPs  []string
	URIs []string
}

// Leaf is a certificate the CA signed, with its key.
type Leaf struct {
	TLS tls.Certificate
	// CertPEM and KeyPEM are the certificate and its key in PEM form.
	CertPEM, KeyPEM []byte
}

// Server returns a leaf for a server with names.
func (ca *CA) Server(tb testing.TB, names Names) *Leaf {
	return ca.Issue(tb, "server", names, x509.ExtKeyUsageServerAuth)
}

// Client returns a leaf for a client named cn.
func (ca *CA) Client(tb testing.TB, cn string) *Leaf {
	return ca.Issue(tb, cn, Names{}, x509.ExtKeyUsageClientAuth)
}

// KeyPEM is the CA's own key in PEM form, for a test that signs with it
// elsewhere (a listener's dynamic CA).
func (ca *CA) KeyPEM(tb testing.TB) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Issue returns a leaf with common name cn, names and usage (server or
// client authentication).
func (ca *CA) Issue(tb testing.TB, cn string, names Names, usage x509.ExtKeyUsage) *Leaf {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"relaygate test"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     names.DNS,
	}
	for _, ip := range names.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range names.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	l := &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		tb.Fatal(err)
	}
	return l
}

// WriteFile writes data to name in a temporary directory of the test and
// returns its path.
func WriteFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Hello is what one client's handshake offered.
type Hello struct {
	ServerName string
	ALPN       []string
	Groups     []tls.CurveID
}

// Request is what the server saw of one request: the connection's TLS
// state and the client certificate's common name ("" without one).
type Request struct {
	ServerName string
	Protocol   string // negotiated ALPN protocol
	ClientCN   string
	Path       string
}

// Server is an HTTPS server on 127.0.0.1 that records handshakes,
// connections and requests.
type Server struct {
	// Addr is "127.0.0.1:port".
	Addr string

	mu       sync.Mutex
	hellos   []Hello
	requests []Request
	conns    atomic.Int64
	closed   atomic.Int64
	srv      *http.Server
}

// ServerOptions shape a Server.
type ServerOptions struct {
	// Cert is the server's certificate.
	Cert *Leaf
	// ClientCAs, when set, makes the server require a client certificate
	// signed by it (tls.RequireAndVerifyClientCert).
	ClientCAs *CA
	// ALPN are the protocols the server accepts, in its order of
	// preference; default: http/1.1. With h2, it serves HTTP/2 where a
	// client agrees to it.
	ALPN []string
	// Handler answers the requests, once recorded; default: 200 "ok".
	Handler http.Handler
}

// NewServer starts a server, closed when the test ends.
func NewServer(tb testing.TB, o ServerOptions) *Server {
	tb.Helper()
	s := &Server{}
	if o.ALPN == nil {
		o.ALPN = []string{"http/1.1"}
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{o.Cert.TLS},
		NextProtos:   o.ALPN,
		MinVersion:   tls.VersionTLS12,
	}
	if o.ClientCAs != nil {
		pool := x509.NewCertPool()
		pool.AddCert(o.ClientCAs.Cert)
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		s.mu.Lock()
		s.hellos = append(s.hellos, Hello{ServerName: h.ServerName, ALPN: append([]string(nil), h.SupportedProtos...), Groups: append([]tls.CurveID(nil), h.SupportedCurves...)})
		s.mu.Unlock()
		return nil, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	h := o.Handler
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := Request{ServerName: r.TLS.ServerName, Protocol: r.TLS.NegotiatedProtocol, Path: r.URL.Path}
			if len(r.TLS.PeerCertificates) > 0 {
				rec.ClientCN = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			s.mu.Lock()
			s.requests = append(s.requests, rec)
			s.mu.Unlock()
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		// Handshake failures are what several tests provoke.
		ErrorLog: log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.closed.Add(1)
			}
		},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if slices.Contains(o.ALPN, "h2") {
		// net/http serves HTTP/2 on the connections that pick h2.
		srv.TLSNextProto = nil
	}
	s.srv = srv
	go srv.Serve(tls.NewListener(ln, cfg)) //nolint:errcheck
	tb.Cleanup(func() { srv.Close() })
	return s
}

// Hellos returns the handshakes begun so far.
func (s *Server) Hellos() []Hello {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Hello(nil), s.hellos...)
}

// Requests returns the requests served so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Conns is the number of connections accepted so far.
func (s *Server) Conns() int64 { return s.conns.Load() }

// Closed returns how many connections have closed.
func (s *Server) Closed() int64 { return s.closed.Load() }

// CloseIdle closes the server's idle keep-alive connections (TLS
// close_notify, then the socket), as a server whose idle timeout passed.
func (s *Server) CloseIdle() {
	s.srv.SetKeepAlivesEnabled(false)
	s.srv.SetKeepAlivesEnabled(true)
}
