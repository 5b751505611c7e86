package server

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash"
	"os"
	"slices"
	"time"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
)

// defaultHandshakeTimeout is frontendPolicies.tls.handshakeTimeout's
// default: the ClientHello and the handshake must be done within it.
const defaultHandshakeTimeout = 15 * time.Second

// handshakeTimeout is the bind's TLS handshake bound.
func handshakeTimeout(f *config.File) time.Duration {
	if fp := f.FrontendPolicies; fp != nil && fp.TLS != nil && fp.TLS.HandshakeTimeout != nil && fp.TLS.HandshakeTimeout.Duration > 0 {
		return fp.TLS.HandshakeTimeout.Duration
	}
	return defaultHandshakeTimeout
}

// tlsVersions maps the file's version names to crypto/tls's.
var tlsVersions = map[string]uint16{"TLS_V1_2": tls.VersionTLS12, "TLS_V1_3": tls.VersionTLS13}

// tls12Suites maps the spec's TLS 1.2 suite names to crypto/tls's; the
// three TLS 1.3 suites are not selectable in crypto/tls, which takes all or
// none of them (serverTLS).
var tls12Suites = map[string]uint16{
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384":       tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256":       tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384":         tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256":         tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

var tls13Suites = map[string]uint16{
	"TLS13_AES_256_GCM_SHA384":       tls.TLS_AES_256_GCM_SHA384,
	"TLS13_AES_128_GCM_SHA256":       tls.TLS_AES_128_GCM_SHA256,
	"TLS13_CHACHA20_POLY1305_SHA256": tls.TLS_CHACHA20_POLY1305_SHA256,
}

// serverTLS compiles a terminating listener's tls block, under
// frontendPolicies.tls, into the configuration its handshakes use, and the
// digest of what that configuration decides (tlsDigest). alpn is what the
// listener offers when frontendPolicies.tls.alpn does not say. Files are
// read now: an unreadable or mismatched pair, or a root file without a
// certificate, is an error naming the field.
func serverTLS(path string, lt *config.ListenerTLS, ft *config.FrontendTLS, alpn []string) (*tls.Config, string, error) {
	if ft == nil {
		ft = &config.FrontendTLS{}
	}
	var errs config.Errors
	fieldErr := func(field, format string, args ...any) {
		errs = append(errs, &decode.FieldError{Path: path + "." + field, Msg: fmt.Sprintf(format, args...)})
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}
	var d tlsDigest
	switch lt.Mode {
	case "", "static":
		cert, err := loadKeyPair(lt.Cert, lt.Key)
		if err != nil {
			fieldErr(err.field, "%v", err.err)
		} else {
			cfg.Certificates = []tls.Certificate{cert}
			d.add("static", cert.Certificate...)
		}
	case "dynamicCa":
		ca, err := newDynamicCA(lt.Cert, lt.Key)
		if err != nil {
			fieldErr(err.field, "%v", err.err)
		} else {
			cfg.GetCertificate = ca.certificate
			d.add("dynamicCa", ca.ca.Raw)
		}
	}
	if lt.Root != "" {
		pool, pem, err := readRoots(lt.Root)
		if err != nil {
			fieldErr("root", "%v", err)
		} else {
			cfg.ClientCAs = pool
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
			d.add("root", pem)
		}
	}
	// The listener's own settings win over frontendPolicies.tls.
	minName, maxName := firstNonEmpty(lt.MinVersion(), ft.MinVersion), firstNonEmpty(lt.MaxVersion(), ft.MaxVersion)
	if v, ok := tlsVersions[minName]; ok {
		cfg.MinVersion = v
	}
	if v, ok := tlsVersions[maxName]; ok {
		cfg.MaxVersion = v
	}
	suites, suitesPath := lt.CipherSuites, path+".cipherSuites"
	if len(suites) == 0 && len(ft.CipherSuites) > 0 {
		suites, suitesPath = ft.CipherSuites, "frontendPolicies.tls.cipherSuites"
	}
	suitesErr := func(format string, args ...any) {
		errs = append(errs, &decode.FieldError{Path: suitesPath, Msg: fmt.Sprintf(format, args...)})
	}
	var tls13 []uint16 // the TLS 1.3 suites listed
	if len(suites) > 0 {
		for _, s := range suites {
			if id, ok := tls12Suites[s]; ok {
				cfg.CipherSuites = append(cfg.CipherSuites, id)
			} else if id, ok := tls13Suites[s]; ok {
				tls13 = append(tls13, id)
			}
		}
		// crypto/tls negotiates TLS 1.3 suites by itself, among all three
		// (its own order: AES-128-GCM first on a client that prefers AES,
		// else ChaCha20): a list without any keeps TLS 1.3 off, and a list
		// of some is refused. Refusing the handshakes that settled on
		// another failed every usual client, which offers all three.
		if len(tls13) == 0 {
			if maxName == "TLS_V1_3" {
				suitesErr("lists no TLS 1.3 suite, but the maximum version is TLS_V1_3")
			}
			cfg.MaxVersion = tls.VersionTLS12
		} else if len(tls13) < len(tls13Suites) {
			suitesErr("lists %d of the 3 TLS 1.3 suites: the gateway's TLS (Go's crypto/tls) cannot limit TLS 1.3 to some of them; list all three, or none to serve TLS 1.2 alone", len(tls13))
		}
		if len(cfg.CipherSuites) == 0 {
			if minName == "TLS_V1_2" {
				suitesErr("lists no TLS 1.2 suite, but the minimum version is TLS_V1_2")
			}
			cfg.MinVersion = tls.VersionTLS13
		}
		if cfg.MinVersion > cfg.MaxVersion {
			suitesErr("leaves no TLS version between the minimum and the maximum")
		}
	}
	if len(suites) == 0 {
		// crypto/tls's default TLS 1.2 list also has the ECDHE CBC-SHA
		// suites, outside the spec's set (and rustls's, which agentgateway
		// serves with): without a list, the spec's six AEAD suites.
		for _, id := range tls12Suites {
			cfg.CipherSuites = append(cfg.CipherSuites, id)
		}
		slices.Sort(cfg.CipherSuites)
	}
	groups := lt.KeyExchangeGroups
	if len(groups) == 0 {
		groups = ft.KeyExchangeGroups
	}
	for _, g := range groups {
		cfg.CurvePreferences = append(cfg.CurvePreferences, backend.KeyExchangeGroupNames[g])
	}
	cfg.NextProtos = alpn
	if len(ft.ALPN) > 0 {
		cfg.NextProtos = nil
		for _, p := range ft.ALPN {
			cfg.NextProtos = append(cfg.NextProtos, string(p))
		}
	}
	if len(errs) > 0 {
		return nil, "", errs
	}
	d.addNumbers("versions", cfg.MinVersion, cfg.MaxVersion)
	d.addNumbers("tls12", cfg.CipherSuites...)
	d.addNumbers("tls13", tls13...)
	for _, c := range cfg.CurvePreferences {
		d.addNumbers("group", uint16(c))
	}
	for _, p := range cfg.NextProtos {
		d.add("alpn", []byte(p))
	}
	return cfg, d.sum(), nil
}

// tlsDigest sums up a terminating listener's TLS settings: the certificate
// chain it presents (or, in mode dynamicCa, the CA that signs them), the
// client CAs, the versions, suites, groups and ALPN protocols. Two compiles
// of the same settings and file contents have the same sum, and settings
// that could change a handshake's outcome change it: a reload retires the
// connections whose listener's sum changed (retire.go).
type tlsDigest struct{ h hash.Hash }

// add sums up a labelled item of parts.
func (d *tlsDigest) add(label string, parts ...[]byte) {
	if d.h == nil {
		d.h = sha256.New()
	}
	fmt.Fprintf(d.h, "%s %d\n", label, len(parts))
	for _, p := range parts {
		fmt.Fprintf(d.h, "%d:", len(p))
		d.h.Write(p)
	}
}

// addNumbers sums up a labelled list of TLS code points.
func (d *tlsDigest) addNumbers(label string, ns ...uint16) {
	parts := make([][]byte, len(ns))
	for i, n := range ns {
		parts[i] = []byte{byte(n >> 8), byte(n)}
	}
	d.add(label, parts...)
}

func (d *tlsDigest) sum() string {
	if d.h == nil {
		d.h = sha256.New()
	}
	return string(d.h.Sum(nil))
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// keyPairError says which of cert and key a failure is about.
type keyPairError struct {
	field string
	err   error
}

// loadKeyPair reads a certificate chain and its private key, checked as
// backendTLS's are (backend.ParseKeyPair).
func loadKeyPair(certFile, keyFile string) (tls.Certificate, *keyPairError) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, &keyPairError{"cert", fmt.Errorf("cannot read the certificate: %w", config.FileError(err))}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, &keyPairError{"key", fmt.Errorf("cannot read the private key: %w", config.FileError(err))}
	}
	cert, err := backend.ParseKeyPair(certFile, keyFile, certPEM, keyPEM)
	if err != nil {
		var fe *backend.TLSFileError
		if errors.As(err, &fe) {
			return tls.Certificate{}, &keyPairError{fe.Role, fmt.Errorf("%q: %s", fe.Path, fe.Msg)}
		}
		return tls.Certificate{}, &keyPairError{"key", err}
	}
	return *cert, nil
}

// readRoots reads a PEM file of CA certificates (backend.ParseRoots), and
// returns its content too.
func readRoots(file string) (*x509.CertPool, []byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the CA certificates: %w", config.FileError(err))
	}
	pool, err := backend.ParseRoots(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%q: %v", file, err)
	}
	return pool, data, nil
}
