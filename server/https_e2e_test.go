package server

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHTTPSTermination(t *testing.T) {
	pki := newTestPKI(t, "https")
	srvA := pki.Server("a.test", "a.test", "127.0.0.1")
	srvB := pki.Server("b.test", "b.test")
	seen := make(chan http.Header, 16)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		io.WriteString(w, "hello "+r.Host)
	}))
	client := pki.Client("client-1", "spiffe://test/ns/default/sa/client")
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - name: a
    hostname: a.test
    protocol: HTTPS
    tls: {cert: ${A_CERT}, key: ${A_KEY}}
    routes:
    - backends: [{host: ${UP}}]
  - name: b
    hostname: "*.b.test"
    protocol: HTTPS
    tls: {cert: ${B_CERT}, key: ${B_KEY}, minTLSVersion: TLS_V1_3}
    routes:
    - policies: {responseHeaderModifier: {set: {x-listener: b}}}
      backends: [{host: ${UP}}]
  - name: mtls
    hostname: mtls.test
    protocol: HTTPS
    tls: {cert: ${A_CERT}, key: ${A_KEY}, root: ${CA}}
    routes:
    - policies:
        authorization:
          rules:
          - 'source.subjectCn == "client-1" && "spiffe://test/ns/default/sa/client" in source.subjectAltNames && source.identity.serviceAccount == "client" && source.spiffeId.startsWith("spiffe://test/") && source.issuer.contains("CN=https")'
      backends: [{host: ${UP}}]
  - name: plain
    protocol: HTTP
    routes:
    - policies: {responseHeaderModifier: {set: {x-listener: plain}}}
      backends: [{host: ${UP}}]
`, map[string]string{"UP": up, "A_CERT": srvA.CertFile, "A_KEY": srvA.KeyFile, "B_CERT": srvB.CertFile, "B_KEY": srvB.KeyFile, "CA": pki.CAFile})
	addr := tg.addr(1)
	dial := func(sni string, cfg *tls.Config) (*tls.Conn, error) {
		cfg = cfg.Clone()
		cfg.ServerName = sni
		if cfg.RootCAs == nil {
			cfg.RootCAs = pki.Pool
		}
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	}
	roundTrip := func(c net.Conn, host string) (string, error) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}

	t.Run("terminated, scheme https upstream", func(t *testing.T) {
		// h2 is offered first (TestH2OverTLS); a client of HTTP/1.1 alone
		// gets it.
		c, err := dial("a.test", &tls.Config{NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("ALPN %q; want http/1.1", p)
		}
		resp, err := roundTrip(c, "a.test")
		if err != nil || !strings.HasPrefix(resp, "HTTP/1.1 200") || !strings.HasSuffix(resp, "hello a.test") {
			t.Fatalf("response %q, %v", resp, err)
		}
		if h := <-seen; h.Get("X-Forwarded-Proto") != "https" {
			t.Errorf("X-Forwarded-Proto %q; want https", h.Get("X-Forwarded-Proto"))
		}
	})
	t.Run("certificate and listener by SNI", func(t *testing.T) {
		c, err := dial("x.b.test", &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "b.test" {
			t.Errorf("certificate %q; want b.test's", cn)
		}
		resp, err := roundTrip(c, "x.b.test")
		if err != nil || !strings.Contains(strings.ToLower(resp), "x-listener: b") {
			t.Fatalf("response %q, %v", resp, err)
		}
		<-seen
	})
	t.Run("TLS 1.2 below the listener's minimum", func(t *testing.T) {
		if c, err := dial("x.b.test", &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}); err == nil {
			c.Close()
			t.Fatal("handshake succeeded")
		}
	})
	t.Run("TLS 1.1 refused", func(t *testing.T) {
		if c, err := dial("a.test", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
			c.Close()
			t.Fatal("handshake succeeded")
		}
	})
	t.Run("unknown server name refused", func(t *testing.T) {
		if c, err := dial("c.test", &tls.Config{InsecureSkipVerify: true}); err == nil {
			c.Close()
			t.Fatal("handshake succeeded")
		}
	})
	t.Run("mTLS requires a certificate", func(t *testing.T) {
		c, err := dial("mtls.test", &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			// TLS 1.3: the server's refusal arrives after the client's
			// handshake completed.
			_, err = roundTrip(c, "mtls.test")
			if err == nil {
				t.Fatal("served without a client certificate")
			}
		}
		stranger := newTestPKI(t, "stranger").Client("stranger")
		c, err = dial("mtls.test", &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{stranger.TLS}})
		if err == nil {
			if resp, err := roundTrip(c, "mtls.test"); err == nil && strings.Contains(resp, "200") {
				t.Fatal("served a certificate from another CA")
			}
		}
		c, err = dial("mtls.test", &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{client.TLS}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := roundTrip(c, "mtls.test")
		if err != nil || !strings.HasPrefix(resp, "HTTP/1.1 200") {
			t.Fatalf("with a client certificate: %q, %v", resp, err)
		}
		<-seen
		// The same CA's other client is in, but the rule on its identity
		// refuses it.
		other := pki.Client("client-2", "spiffe://test/ns/default/sa/other")
		c, err = dial("mtls.test", &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{other.TLS}})
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := roundTrip(c, "mtls.test"); err != nil || !strings.HasPrefix(resp, "HTTP/1.1 403") {
			t.Fatalf("another client: %q, %v; want 403", resp, err)
		}
	})
	t.Run("plain HTTP on the same port", func(t *testing.T) {
		resp, body := get(t, tg.url(1)+"/")
		if resp.StatusCode != 200 || resp.Header.Get("x-listener") != "plain" || body != "hello "+addr {
			t.Fatalf("%d %q %q", resp.StatusCode, resp.Header.Get("x-listener"), body)
		}
		<-seen
	})
}

func TestTLSTerminateThenForward(t *testing.T) {
	pki := newTestPKI(t, "tlsterm")
	srv := pki.Server("db.test", "db.test")
	up := tcpEchoUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: TLS
    tls: {cert: ${CERT}, key: ${KEY}}
    tcpRoutes:
    - hostnames: [db.test]
      backends: [{host: ${UP}}]
`, map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile})
	c, err := tls.Dial("tcp", tg.addr(1), &tls.Config{ServerName: "db.test", RootCAs: pki.Pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "ping over TLS")
	_ = c.CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "ping over TLS" {
		t.Fatalf("echo %q, %v", b, err)
	}
}

func TestHTTPSDynamicCA(t *testing.T) {
	pki := newTestPKI(t, "dynca")
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inside") }))
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: HTTPS
    tls: {mode: dynamicCa, cert: ${CA}, key: ${CAKEY}}
    routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up, "CA": pki.CAFile, "CAKEY": pki.KeyFile()})
	for _, name := range []string{"anything.example.com", "api.github.com", "anything.example.com"} {
		c, err := tls.Dial("tcp", tg.addr(1), &tls.Config{ServerName: name, RootCAs: pki.Pool})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		leaf := c.ConnectionState().PeerCertificates[0]
		c.Close()
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if c, err := tls.Dial("tcp", tg.addr(1), &tls.Config{InsecureSkipVerify: true}); err == nil {
		c.Close()
		t.Error("a client without a server name got a certificate")
	}
}
