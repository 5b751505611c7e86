package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

func TestGenerate(t *testing.T) {
	now := time.Now()
	certPEM, keyPEM, err := generate([]string{"bench.test", "pass.bench.test"}, 48*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("the certificate and key do not match: %v", err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			t.Fatal(err)
		}
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("key is %T, want ECDSA P-256", leaf.PublicKey)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, name := range []string{"bench.test", "pass.bench.test"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("verify %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: roots, CurrentTime: now}); err == nil {
		t.Error("verified for a name it does not hold")
	}
	if _, _, err := generate(nil, time.Hour, now); err == nil {
		t.Error("generate without a name succeeded")
	}
}
