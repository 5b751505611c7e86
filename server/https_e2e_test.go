package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
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
		return tls.DialWithDialer(&net.Dialer{Timeout: 15 * time.Second}, "tcp", addr, cfg)
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
	t.Run("TLS 1.2 suites outside the spec's refused by default", func(t *testing.T) {
		// The test PKI's keys are ECDSA: the ECDSA suites apply.
		for _, suite := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA} {
			if c, err := dial("a.test", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}}); err == nil {
				c.Close()
				t.Fatalf("%s accepted", tls.CipherSuiteName(suite))
			}
		}
		for _, suite := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256} {
			c, err := dial("a.test", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatalf("%s: %v", tls.CipherSuiteName(suite), err)
			}
			if resp, err := roundTrip(c, "a.test"); err != nil || !strings.HasPrefix(resp, "HTTP/1.1 200") {
				t.Fatalf("%s: %q, %v", tls.CipherSuiteName(suite), resp, err)
			}
			<-seen
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

// TestHTTPSMisdirectedRequest: the listener a connection's server name chose
// serves only the hosts it is for. A request whose Host another TLS listener
// of the port serves is 421 (the client reused a connection opened for
// another name, so the other listener's TLS settings, here a client
// certificate, never applied); one whose Host no listener serves is 404.
// Before, any Host was routed by the chosen listener: a client that
// connected as a.test without a certificate reached the shared backend as
// mtls.test.
func TestHTTPSMisdirectedRequest(t *testing.T) {
	pki := newTestPKI(t, "misdirected")
	srv := pki.Server("shared", "a.test", "mtls.test", "*.w.test", "other.test")
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served "+r.Host)
	}))
	listeners := `
binds:
- port: 1
  listeners:
  - hostname: a.test
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes: [{backends: [{host: ${UP}}]}]
  - hostname: mtls.test
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}, root: ${CA}}
    routes: [{backends: [{host: ${UP}}]}]
  - hostname: "*.w.test"
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes: [{backends: [{host: ${UP}}]}]
`
	vars := map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile, "CA": pki.CAFile}
	tg := startGateway(t, listeners, vars)
	for _, tc := range []struct {
		desc, sni, host string
		want            int
	}{
		{"the chosen listener's host", "a.test", "a.test", 200},
		{"its host in another case, with a port", "a.test", "A.Test:443", 200},
		{"another host of the same wildcard listener", "x.w.test", "y.w.test", 200},
		{"a host another listener serves", "a.test", "mtls.test", 421},
		{"a wildcard listener's host on an exact listener's connection", "a.test", "x.w.test", 421},
		{"a host no listener serves", "a.test", "other.test", 404},
	} {
		for _, h2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, h2 %v", tc.desc, h2), func(t *testing.T) {
				tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.sni, RootCAs: pki.Pool}, ForceAttemptHTTP2: h2}
				if !h2 {
					tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
				}
				defer tr.CloseIdleConnections()
				req, _ := http.NewRequest(http.MethodGet, "https://"+tg.addr(1)+"/", nil)
				req.Host = tc.host
				resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want || h2 != (resp.ProtoMajor == 2) {
					t.Fatalf("%s: %d %q, want %d", resp.Proto, resp.StatusCode, body, tc.want)
				}
			})
		}
	}
	// A listener for every name: a host only it serves is misdirected on
	// a.test's connection (the client can open one that reaches it), and
	// its own connection serves any host no other listener claims.
	tg = startGateway(t, listeners+`
  - protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes: [{backends: [{host: ${UP}}]}]
`, vars)
	for _, tc := range []struct {
		sni, host string
		want      int
	}{{"a.test", "other.test", 421}, {"other.test", "other.test", 200}, {"other.test", "a.test", 421}} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.sni, RootCAs: pki.Pool}}
		req, _ := http.NewRequest(http.MethodGet, "https://"+tg.addr(1)+"/", nil)
		req.Host = tc.host
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != tc.want {
			t.Errorf("server name %s, host %s: %d, want %d", tc.sni, tc.host, resp.StatusCode, tc.want)
		}
	}
}

// TestHTTPSCipherSuites: a listener's cipherSuites lists all three TLS 1.3
// suites or none (TLS 1.3 off), since crypto/tls negotiates TLS 1.3 suites
// by itself; a list of some is a config error naming the field and saying
// why. (A list of some was taken, and every handshake that settled on
// another suite, as any usual client's did, was refused after the fact
// with a bad_certificate alert.) The TLS 1.2 suites listed are the only
// ones served.
func TestHTTPSCipherSuites(t *testing.T) {
	pki := newTestPKI(t, "suites")
	srv := pki.Server("a.test", "a.test")
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	vars := map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile}
	config := func(listenerSuites, frontendSuites string) string {
		y := "binds:\n- port: 1\n  listeners:\n  - hostname: a.test\n    protocol: HTTPS\n    tls: {cert: ${CERT}, key: ${KEY}" + listenerSuites + "}\n    routes: [{backends: [{host: ${UP}}]}]\n"
		if frontendSuites != "" {
			y += "frontendPolicies:\n  tls: {cipherSuites: " + frontendSuites + "}\n"
		}
		return y
	}
	const all13 = "TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256, TLS13_CHACHA20_POLY1305_SHA256"
	refused := []struct{ desc, listener, frontend, want string }{
		{"one TLS 1.3 suite", ", cipherSuites: [TLS13_AES_256_GCM_SHA384]", "",
			"binds[0].listeners[0].tls.cipherSuites: lists 1 of the 3 TLS 1.3 suites: the gateway's TLS (Go's crypto/tls) cannot limit TLS 1.3 to some of them; list all three, or none to serve TLS 1.2 alone"},
		{"two TLS 1.3 suites and a TLS 1.2 one", ", cipherSuites: [TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]", "",
			"binds[0].listeners[0].tls.cipherSuites: lists 2 of the 3 TLS 1.3 suites"},
		{"frontendPolicies", "", "[TLS13_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]",
			"frontendPolicies.tls.cipherSuites: lists 1 of the 3 TLS 1.3 suites"},
	}
	for _, tc := range refused {
		t.Run(tc.desc, func(t *testing.T) {
			gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
			err := gw.Apply(parseConfig(t, config(tc.listener, tc.frontend), vars))
			if err == nil {
				gw.Shutdown(expiredContext())
				t.Fatal("config taken")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q; want %q", err, tc.want)
			}
		})
	}

	served := []struct {
		desc     string
		listener string
		version  uint16 // negotiated with a client of TLS 1.2 and 1.3
		ok, bad  uint16 // a TLS 1.2 suite served, one refused (0: none)
	}{
		{"all TLS 1.3 suites and one TLS 1.2 suite", ", cipherSuites: [" + all13 + ", TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]", tls.VersionTLS13,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{"TLS 1.2 suites alone: TLS 1.3 off", ", cipherSuites: [TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256]", tls.VersionTLS12,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{"TLS 1.3 suites alone", ", cipherSuites: [" + all13 + "]", tls.VersionTLS13, 0, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
	}
	for _, tc := range served {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGateway(t, config(tc.listener, ""), vars)
			get := func(cfg *tls.Config) (*tls.Conn, error) {
				cfg.ServerName, cfg.RootCAs, cfg.NextProtos = "a.test", pki.Pool, []string{"http/1.1"}
				c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tg.addr(1), cfg)
				if err != nil {
					return nil, err
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
				b, err := io.ReadAll(c)
				if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 200") {
					return nil, fmt.Errorf("response %q, %v", b, err)
				}
				return c, nil
			}
			// A usual client: every suite offered, in its own order.
			c, err := get(&tls.Config{})
			if err != nil {
				t.Fatalf("a client offering every suite: %v", err)
			}
			if v := c.ConnectionState().Version; v != tc.version {
				t.Fatalf("version %s; want %s", tls.VersionName(v), tls.VersionName(tc.version))
			}
			if tc.ok != 0 {
				c, err := get(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tc.ok}})
				if err != nil || c.ConnectionState().CipherSuite != tc.ok {
					t.Fatalf("TLS 1.2 with %s, listed: %v", tls.CipherSuiteName(tc.ok), err)
				}
			}
			if _, err := get(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tc.bad}}); err == nil {
				t.Fatalf("TLS 1.2 with %s, not listed: served", tls.CipherSuiteName(tc.bad))
			}
		})
	}
}

// TestHTTPSDynamicCASignsOutsideTheLock: while a dynamicCa listener signs
// a certificate for a new name (held here), a name already issued and
// another new name are served at once, and a second handshake for the
// name being signed waits for that signing rather than signing again.
// (Every handshake of the listener waited on one lock held while signing:
// with an RSA-4096 CA and a flood of new names, cached names' handshakes
// went from 2 ms to 95 ms.)
func TestHTTPSDynamicCASignsOutsideTheLock(t *testing.T) {
	pki := newTestPKI(t, "dynca-lock")
	release := make(chan struct{})
	signed := make(chan string, 8)
	hook := func(name string) {
		signed <- name
		if name == "slow.test" {
			<-release
		}
	}
	beforeDynamicSign.Store(&hook)
	t.Cleanup(func() { beforeDynamicSign.Store(nil) }) // after the gateway's shutdown
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: HTTPS
    tls: {mode: dynamicCa, cert: ${CA}, key: ${CAKEY}}
    routes:
    - policies: {directResponse: {status: 200}}
`, map[string]string{"CA": pki.CAFile, "CAKEY": pki.KeyFile()})
	handshake := func(name string) (*x509.Certificate, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", tg.addr(1), &tls.Config{ServerName: name, RootCAs: pki.Pool})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0], nil
	}
	if _, err := handshake("cached.test"); err != nil {
		t.Fatal(err)
	}
	if got := <-signed; got != "cached.test" {
		t.Fatalf("signed %s", got)
	}
	type result struct {
		leaf *x509.Certificate
		err  error
	}
	slow := make(chan result, 2)
	go func() { l, err := handshake("slow.test"); slow <- result{l, err} }()
	if got := <-signed; got != "slow.test" {
		t.Fatalf("signed %s", got)
	}
	go func() { l, err := handshake("slow.test"); slow <- result{l, err} }()
	for _, name := range []string{"cached.test", "other.test"} {
		if _, err := handshake(name); err != nil {
			t.Fatalf("while another name is signed: %v", err)
		}
	}
	if got := <-signed; got != "other.test" {
		t.Fatalf("signed %s", got)
	}
	releaseOnce.Do(func() { close(release) })
	a, b := <-slow, <-slow
	if a.err != nil || b.err != nil {
		t.Fatalf("the name being signed: %v, %v", a.err, b.err)
	}
	if a.leaf.SerialNumber.Cmp(b.leaf.SerialNumber) != 0 {
		t.Fatal("two certificates signed for one name asked for at once")
	}
	select {
	case name := <-signed:
		t.Fatalf("%s signed again", name)
	default:
	}
}
