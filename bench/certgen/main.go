// Command certgen makes the certificate of bench/run.sh's TLS cases, fresh
// for each run: one ECDSA P-256 key and a self-signed certificate for the
// given DNS names, valid for two days, written as PEM. Every TLS endpoint of
// the bench (the gateway's and nginx's HTTPS listeners, the passthrough
// case's upstream) serves this same pair, and the clients trust it as their
// only root. Nothing of it is committed.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"
)

func main() {
	certOut := flag.String("cert", "", "write the certificate (PEM) to this file (required)")
	keyOut := flag.String("key", "", "write the private key (PEM, PKCS #8) to this file (required)")
	names := flag.String("names", "bench.test", "comma-separated DNS names of the certificate; the first is its CN")
	validFor := flag.Duration("valid", 48*time.Hour, "validity from now")
	flag.Parse()
	if *certOut == "" || *keyOut == "" {
		fmt.Fprintln(os.Stderr, "certgen: -cert and -key are required")
		os.Exit(2)
	}
	if err := run(*certOut, *keyOut, strings.Split(*names, ","), *validFor, time.Now()); err != nil {
		fmt.Fprintf(os.Stderr, "certgen: %v\n", err)
		os.Exit(1)
	}
}

func run(certOut, keyOut string, names []string, validFor time.Duration, now time.Time) error {
	certPEM, keyPEM, err := generate(names, validFor, now)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyOut, keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(certOut, certPEM, 0o644)
}

// generate returns a self-signed ECDSA P-256 certificate for names (a CA
// too, so that a client can trust it as its root) and its key, as PEM.
func generate(names []string, validFor time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if len(names) == 0 || names[0] == "" {
		return nil, nil, fmt.Errorf("no DNS name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: names[0], Organization: []string{"relaygate bench"}},
		DNSNames:              names,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	return certPEM, keyPEM, nil
}
