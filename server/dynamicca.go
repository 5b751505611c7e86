package server

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaygate/gateway/config"
)

// dynamicCA issues leaf certificates on demand (listener tls mode
// dynamicCa): the listener's cert and key are a CA, and each server name a
// client asks for gets a certificate for that name signed by it. This is
// what an egress proxy that terminates arbitrary destinations needs; the
// clients must trust the CA. Leaves share one key, made when the listener
// is compiled, last a day, and are kept per name (up to
// dynamicCACacheSize names).
//
// A signing (milliseconds with an RSA-4096 CA) runs outside the lock, once
// per name however many handshakes ask for it at once (they wait for its
// result), so that names already issued, and other names, never wait for
// it: under one lock a flood of new names held every handshake of the
// listener to one signing at a time.
type dynamicCA struct {
	ca      *x509.Certificate
	caKey   crypto.Signer
	leaf    *ecdsa.PrivateKey
	mu      sync.Mutex
	issued  map[string]*tls.Certificate
	signing map[string]*dynamicSigning // names being signed now
}

// dynamicSigning is one name's signing under way: done closes once cert or
// err is set.
type dynamicSigning struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

// beforeDynamicSign, when set, is called before each signing, outside the
// lock (tests hold a signing with it).
var beforeDynamicSign atomic.Pointer[func(name string)]

const (
	dynamicCACacheSize = 4096
	dynamicLeafLife    = 24 * time.Hour
)

func newDynamicCA(certFile, keyFile string) (*dynamicCA, *keyPairError) {
	pair, kerr := loadKeyPair(certFile, keyFile)
	if kerr != nil {
		return nil, kerr
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, &keyPairError{"cert", err}
	}
	if !ca.IsCA {
		return nil, &keyPairError{"cert", errors.New("is not a CA certificate (mode dynamicCa signs leaf certificates with it)")}
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, &keyPairError{"key", errors.New("cannot sign")}
	}
	leaf, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, &keyPairError{"key", err}
	}
	return &dynamicCA{ca: ca, caKey: signer, leaf: leaf, issued: map[string]*tls.Certificate{}, signing: map[string]*dynamicSigning{}}, nil
}

// certificate is the listener's tls.Config.GetCertificate.
func (d *dynamicCA) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if name == "" {
		return nil, errors.New("dynamic certificate: the client sent no server name")
	}
	if err := config.CheckHostname(name); err != nil || strings.Contains(name, "*") {
		return nil, fmt.Errorf("dynamic certificate: invalid server name %q", name)
	}
	now := time.Now()
	d.mu.Lock()
	if c := d.issued[name]; c != nil && now.Before(c.Leaf.NotAfter.Add(-time.Hour)) {
		d.mu.Unlock()
		return c, nil
	}
	if s := d.signing[name]; s != nil {
		// Another handshake signs it: its result, unless this handshake's
		// time runs out first.
		d.mu.Unlock()
		select {
		case <-s.done:
			return s.cert, s.err
		case <-hello.Context().Done():
			return nil, hello.Context().Err()
		}
	}
	s := &dynamicSigning{done: make(chan struct{})}
	d.signing[name] = s
	d.mu.Unlock()
	if hook := beforeDynamicSign.Load(); hook != nil {
		(*hook)(name)
	}
	s.cert, s.err = d.issue(name, now)
	d.mu.Lock()
	delete(d.signing, name)
	if s.err == nil {
		if len(d.issued) >= dynamicCACacheSize {
			for k := range d.issued { // any one: map order is random
				delete(d.issued, k)
				break
			}
		}
		d.issued[name] = s.cert
	}
	d.mu.Unlock()
	close(s.done)
	return s.cert, s.err
}

func (d *dynamicCA) issue(name string, now time.Time) (*tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(dynamicLeafLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, d.ca, &d.leaf.PublicKey, d.caKey)
	if err != nil {
		return nil, fmt.Errorf("dynamic certificate for %q: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, d.ca.Raw}, PrivateKey: d.leaf, Leaf: leaf}, nil
}
