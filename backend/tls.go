package backend

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/relaygate/gateway/config"
)

// UpstreamTLS is how an upstream pool speaks TLS; the zero value is plain
// TCP. It is comparable, as part of a pool's key: two backends with the
// same address and TLS settings share warm connections, two with other
// settings never share one, and a reload that keeps the settings keeps the
// pool. So lists are held joined (JoinList) and files by path, with a
// digest of what they held when the settings were loaded (Load): a file
// changed before a reload makes other settings, hence a new pool.
type UpstreamTLS struct {
	Enabled bool
	// ServerName is sent as SNI and verified against the certificate;
	// default: the host of the pool's address (no SNI for an IP address,
	// whose certificate must then name that IP, as crypto/tls does).
	ServerName string
	// RootsFile is a PEM file of the CAs to trust instead of the system's.
	RootsFile string
	// CertFile and KeyFile are a PEM client certificate and its key, sent
	// to a backend that asks for one (mutual TLS); both or neither.
	CertFile, KeyFile string
	// FilesDigest is the SHA-256 (hex) of the files' contents, set by
	// Load; a pool built from files that no longer match it fails its
	// dials rather than use contents its key does not say.
	FilesDigest string
	// Insecure skips every verification of the backend's certificate.
	Insecure bool
	// InsecureHost verifies the certificate's chain but not its names.
	InsecureHost bool
	// SubjectAltNames (joined) are the names of which the certificate must
	// carry one, instead of the server name: DNS names, IP addresses or
	// URIs (spiffe://...), each compared exactly.
	SubjectAltNames string
	// ALPN (joined) are the protocols offered; default: the request's HTTP
	// version's. h2 is offered only by the pool's HTTP/2 side, which a list
	// with h2 makes the one requests go to (Upstream.ALPNVersion). A backend
	// that picks a protocol the gateway does not speak is refused (TCP
	// routes, which carry bytes, offer the list as it is).
	ALPN string
	// KeyExchangeGroups (joined) are the key exchange groups offered, by
	// name (KeyExchangeGroupNames); default: crypto/tls's.
	KeyExchangeGroups string
}

// listSep joins the items of an UpstreamTLS list; config refuses control
// characters in them.
const listSep = "\n"

// JoinList holds a list in an UpstreamTLS field.
func JoinList(items []string) string { return strings.Join(items, listSep) }

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, listSep)
}

// ALPNHTTP11 is the ALPN name of HTTP/1.1, the protocol the upstream pools
// speak.
const ALPNHTTP11 = "http/1.1"

// KeyExchangeGroupNames maps the key exchange groups of backendTLS, as the
// configuration names them, to crypto/tls's.
var KeyExchangeGroupNames = map[string]tls.CurveID{
	"X25519":          tls.X25519,
	"P-256":           tls.CurveP256,
	"P-384":           tls.CurveP384,
	"X25519_MLKEM768": tls.X25519MLKEM768,
}

// TLSFileError is a file of the TLS settings that cannot be used. Role is
// the backendTLS field that names it: "root", "cert" or "key".
type TLSFileError struct {
	Role string
	Path string
	Msg  string
}

func (e *TLSFileError) Error() string { return e.Role + " " + e.Path + ": " + e.Msg }

// Load reads the files the settings name and returns the settings with
// their digest (FilesDigest). An unreadable file, one without PEM data, a
// certificate that does not parse, or a key that does not match the
// certificate is a *TLSFileError.
func (t UpstreamTLS) Load() (UpstreamTLS, error) {
	m, err := t.material()
	if err != nil {
		return t, err
	}
	t.FilesDigest = m.digest
	return t, nil
}

// tlsMaterial is what the files of the settings hold.
type tlsMaterial struct {
	roots  *x509.CertPool // nil: the system's
	cert   *tls.Certificate
	digest string // "" without files
}

func (t UpstreamTLS) material() (tlsMaterial, error) {
	var m tlsMaterial
	if t.RootsFile == "" && t.CertFile == "" && t.KeyFile == "" {
		return m, nil
	}
	h := sha256.New()
	read := func(role, path string) ([]byte, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, &TLSFileError{Role: role, Path: path, Msg: "cannot read: " + pathlessError(config.FileError(err))}
		}
		h.Write([]byte(role))
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(data))))
		h.Write(data)
		return data, nil
	}
	if t.RootsFile != "" {
		data, err := read("root", t.RootsFile)
		if err != nil {
			return m, err
		}
		if m.roots, err = ParseRoots(data); err != nil {
			return m, &TLSFileError{Role: "root", Path: t.RootsFile, Msg: err.Error()}
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return m, errors.New("cert and key go together")
	}
	if t.CertFile != "" {
		certPEM, err := read("cert", t.CertFile)
		if err != nil {
			return m, err
		}
		keyPEM, err := read("key", t.KeyFile)
		if err != nil {
			return m, err
		}
		if m.cert, err = ParseKeyPair(t.CertFile, t.KeyFile, certPEM, keyPEM); err != nil {
			return m, err
		}
	}
	m.digest = hex.EncodeToString(h.Sum(nil))
	return m, nil
}

// pathlessError is an os error's message without the operation and the
// path the caller names already (what wraps it kept).
func pathlessError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return strings.Replace(err.Error(), pe.Error(), pe.Err.Error(), 1)
	}
	return err.Error()
}

// parseRoots reads a PEM bundle of CA certificates: at least one, each of
// which must parse (blocks of other types are skipped).
func ParseRoots(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %v", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return pool, nil
}

// parseKeyPair reads a client certificate (with its chain) and its key.
func ParseKeyPair(certPath, keyPath string, certPEM, keyPEM []byte) (*tls.Certificate, error) {
	var b *pem.Block
	for rest := certPEM; ; {
		if b, rest = pem.Decode(rest); b == nil || b.Type == "CERTIFICATE" {
			break
		}
	}
	if b == nil {
		return nil, &TLSFileError{Role: "cert", Path: certPath, Msg: "no PEM certificate"}
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		return nil, &TLSFileError{Role: "cert", Path: certPath, Msg: err.Error()}
	}
	if !hasPEM(keyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return nil, &TLSFileError{Role: "key", Path: keyPath, Msg: "no PEM private key"}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "tls: ")
		if strings.Contains(msg, "does not match") {
			msg = "does not match the certificate of cert (" + certPath + ")"
		}
		return nil, &TLSFileError{Role: "key", Path: keyPath, Msg: msg}
	}
	return &pair, nil
}

func hasPEM(data []byte, typ func(string) bool) bool {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return false
		}
		if typ(b.Type) {
			return true
		}
	}
}

// loadedTLS is what the files of some settings held when read for their
// pools, or why they could not be used.
type loadedTLS struct {
	m   tlsMaterial
	err error
}

// load reads the files for pools: files that cannot be used, or that
// changed since Load, are an error, for the pools to fail their dials with.
func (t UpstreamTLS) load() *loadedTLS {
	m, err := t.material()
	if err == nil && t.FilesDigest != "" && m.digest != t.FilesDigest {
		err = errors.New("the files changed after the configuration was loaded: reload it to use them")
	}
	return &loadedTLS{m, err}
}

// Config builds the client configuration for a pool to host (the host of
// its address): TLS 1.2 or 1.3, verified against the system roots unless
// RootsFile names others, by the server name unless InsecureHost or
// SubjectAltNames say otherwise. Files that cannot be used, or that changed
// since Load, are an error, for the pool to fail its dials with.
func (t UpstreamTLS) Config(host string) (*tls.Config, error) {
	return t.config(t.load(), host)
}

// config is Config with the files read already (a dynamic backend reads
// them once for all its destinations).
func (t UpstreamTLS) config(files *loadedTLS, host string) (*tls.Config, error) {
	if files.err != nil {
		return nil, files.err
	}
	m := files.m
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, RootCAs: m.roots}
	if c.ServerName == "" {
		c.ServerName = host
	}
	if m.cert != nil {
		cert := m.cert
		// Sent whatever CAs the backend names: which to trust is its call.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c.NextProtos = splitList(t.ALPN)
	if len(c.NextProtos) == 0 {
		c.NextProtos = []string{ALPNHTTP11}
	}
	for _, g := range splitList(t.KeyExchangeGroups) {
		id, ok := KeyExchangeGroupNames[g]
		if !ok {
			return nil, fmt.Errorf("unknown key exchange group %q", g)
		}
		c.CurvePreferences = append(c.CurvePreferences, id)
	}
	var verify func(tls.ConnectionState) error
	sans := splitList(t.SubjectAltNames)
	switch {
	case t.Insecure:
		c.InsecureSkipVerify = true
	case t.InsecureHost || len(sans) > 0:
		// crypto/tls verifies chain and name together: the name is left
		// to verifyPeer.
		c.InsecureSkipVerify = true
		verify = verifyPeer(m.roots, sans)
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		// The list may offer protocols the gateway does not speak; the
		// backend must pick one it does (h2 is offered only by the pool's
		// HTTP/2 side, splitALPN).
		if p := cs.NegotiatedProtocol; p != "" && p != ALPNHTTP11 && p != "h2" {
			return fmt.Errorf("the backend chose ALPN protocol %q: the gateway speaks %s to backends", p, ALPNHTTP11)
		}
		return nil
	}
	return c, nil
}

// verifyPeer verifies the backend's chain against roots (nil: the
// system's) without its name, then, when sans are given, that the
// certificate carries one of them.
func verifyPeer(roots *x509.CertPool, sans []string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the backend sent no certificate")
		}
		leaf := cs.PeerCertificates[0]
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := leaf.Verify(opts); err != nil {
			return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
		}
		if len(sans) > 0 && !matchSAN(leaf, sans) {
			return fmt.Errorf("the certificate's names (%s) match none of subjectAltNames (%s)", certNames(leaf), strings.Join(sans, ", "))
		}
		return nil
	}
}

// matchSAN reports whether the certificate carries one of sans, each a URI
// (it holds "://"), an IP address or a DNS name (case and a final dot
// aside), compared exactly.
func matchSAN(c *x509.Certificate, sans []string) bool {
	for _, want := range sans {
		switch ip := net.ParseIP(want); {
		case strings.Contains(want, "://"):
			for _, u := range c.URIs {
				if u.String() == want {
					return true
				}
			}
		case ip != nil:
			for _, have := range c.IPAddresses {
				if have.Equal(ip) {
					return true
				}
			}
		default:
			want = strings.TrimSuffix(want, ".")
			for _, have := range c.DNSNames {
				if strings.EqualFold(strings.TrimSuffix(have, "."), want) {
					return true
				}
			}
		}
	}
	return false
}

// certNames lists a certificate's subject alternative names for an error.
func certNames(c *x509.Certificate) string {
	var out []string
	for _, n := range c.DNSNames {
		out = append(out, "DNS:"+n)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	for _, u := range c.URIs {
		out = append(out, "URI:"+u.String())
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// HandshakeError is a TLS handshake with a backend that failed: a connect
// failure (nothing was sent), whose message names the address, the server
// name and the reason.
type HandshakeError struct {
	Addr       string
	ServerName string
	Err        error
}

func (e *HandshakeError) Error() string {
	if e.ServerName == "" || net.ParseIP(e.ServerName) != nil {
		return "TLS handshake with " + e.Addr + " failed: " + e.Err.Error()
	}
	return "TLS handshake with " + e.Addr + " (server name " + e.ServerName + ") failed: " + e.Err.Error()
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// handshake runs the client side of TLS on c within the connect timeout:
// a failure is a connect failure (nothing was sent).
func handshake(c net.Conn, addr string, cfg *tls.Config, d Dialing) (net.Conn, error) {
	timeout := d.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, &HandshakeError{Addr: addr, ServerName: cfg.ServerName, Err: err}
	}
	return tc, nil
}

// errTLSConfig stands for a pool whose TLS settings failed after they were
// checked at load (a roots file removed meanwhile): every dial fails with it.
type errTLSConfig struct{ err error }

func (e errTLSConfig) Error() string { return "upstream TLS: " + e.err.Error() }
func (e errTLSConfig) Unwrap() error { return e.err }
