package backend

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/tlstest"
)

// tlsUpstream is an HTTPS server on 127.0.0.1 and a PEM file of its
// certificate, for a pool's RootsFile.
func tlsUpstream(t *testing.T) (addr, roots string, hits *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	addr, roots = h2sTLSUpstream(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("X-Proto", r.Proto)
		io.WriteString(w, "secure "+r.Host+" "+r.URL.Path)
	}), nil)
	return addr, roots, n
}

func exchangeGET(t *testing.T, u *Upstream, path string) (*fasthttp.Response, error) {
	t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := &fasthttp.Response{}
	req.SetRequestURI(path)
	req.Header.SetHost("example.com")
	req.UseHostHeader = true
	err := u.Exchange(req, resp, time.Now().Add(5*time.Second))
	return resp, err
}

// TestUpstreamTLS: a TLS pool verifies the upstream against its roots and
// the server name, speaks HTTP/1.1 over it and reuses the connection; a
// certificate it cannot verify is a connect failure (503), never a request
// sent in clear or to an unverified peer.
func TestUpstreamTLS(t *testing.T) {
	addr, roots, hits := tlsUpstream(t)
	p := NewPools()
	// httptest's certificate is for example.com and 127.0.0.1.
	tests := []struct {
		desc     string
		tls      UpstreamTLS
		wantFail bool
	}{
		{desc: "verified against the roots file", tls: UpstreamTLS{Enabled: true, RootsFile: roots}},
		{desc: "verified by server name", tls: UpstreamTLS{Enabled: true, RootsFile: roots, ServerName: "example.com"}},
		{desc: "system roots do not trust it", tls: UpstreamTLS{Enabled: true}, wantFail: true},
		{desc: "wrong server name", tls: UpstreamTLS{Enabled: true, RootsFile: roots, ServerName: "other.test"}, wantFail: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			u := p.Get(addr, PoolSettings{TLS: tc.tls})
			before := hits.Load()
			resp, err := exchangeGET(t, u, "/v1/x")
			if tc.wantFail {
				if err == nil || Classify(err) != FailureConnect || hits.Load() != before {
					t.Fatalf("err %v (class %v), %d requests reached the server; want a connect failure and none", err, Classify(err), hits.Load()-before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(resp.Body()); got != "secure example.com /v1/x" || string(resp.Header.Peek("X-Proto")) != "HTTP/1.1" {
				t.Fatalf("body %q, proto %q", got, resp.Header.Peek("X-Proto"))
			}
			if _, err := exchangeGET(t, u, "/again"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := p.Get(addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}}), p.Get(addr, PoolSettings{}); a == b || !a.TLS || b.TLS {
		t.Fatal("TLS and plain pools to one address must differ")
	}
}

func TestUpstreamTLSConfig(t *testing.T) {
	_, roots, _ := tlsUpstream(t)
	bad := filepath.Join(t.TempDir(), "bad.pem")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	for _, tc := range []struct {
		desc    string
		tls     UpstreamTLS
		wantErr string
	}{
		{desc: "system roots", tls: UpstreamTLS{Enabled: true}},
		{desc: "roots file", tls: UpstreamTLS{Enabled: true, RootsFile: roots}},
		{desc: "missing roots file", tls: UpstreamTLS{Enabled: true, RootsFile: filepath.Join(t.TempDir(), "none.pem")}, wantErr: "no such file"},
		{desc: "roots file without PEM", tls: UpstreamTLS{Enabled: true, RootsFile: bad}, wantErr: "no PEM certificate"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := tc.tls.Config("api.example.test")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				u := NewPools().Get("127.0.0.1:1", PoolSettings{TLS: tc.tls})
				if _, err := u.Dial(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("dial with broken TLS settings: %v", err)
				}
				return
			}
			if err != nil || c.ServerName != "api.example.test" || c.MinVersion < 0x0303 {
				t.Fatalf("config %+v, %v", c, err)
			}
		})
	}
	if u := NewPools().Get("api.example.test:443", PoolSettings{TLS: UpstreamTLS{Enabled: true}}); string(u.HostHeader) != "api.example.test" {
		t.Fatalf("Host %q, want the name without :443", u.HostHeader)
	}
}

// TestUpstreamTLSVerification: each way of verifying a backend, against a
// server whose certificate a CA of the test's own signed for
// api.internal.test, 127.0.0.1 and a SPIFFE id. A failure is a connect
// failure that names the address and the reason, and nothing reaches the
// server.
func TestUpstreamTLSVerification(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	other := tlstest.NewCA(t, "other CA")
	leaf := ca.Server(t, tlstest.Names{DNS: []string{"api.internal.test"}, IPs: []string{"127.0.0.1"}, URIs: []string{"spiffe://cluster.local/ns/a/sa/api"}})
	srv := tlstest.NewServer(t, tlstest.ServerOptions{Cert: leaf})
	roots := tlstest.WriteFile(t, "ca.pem", ca.PEM)
	otherRoots := tlstest.WriteFile(t, "other.pem", other.PEM)
	tests := []struct {
		desc    string
		tls     UpstreamTLS
		wantErr string // "" for success
	}{
		{desc: "system roots", tls: UpstreamTLS{}, wantErr: "certificate signed by unknown authority"},
		{desc: "root, by IP", tls: UpstreamTLS{RootsFile: roots}},
		{desc: "root, by name", tls: UpstreamTLS{RootsFile: roots, ServerName: "api.internal.test"}},
		{desc: "wrong name", tls: UpstreamTLS{RootsFile: roots, ServerName: "other.test"}, wantErr: "not other.test"},
		{desc: "untrusted CA", tls: UpstreamTLS{RootsFile: otherRoots, ServerName: "api.internal.test"}, wantErr: "unknown authority"},
		{desc: "insecureHost, wrong name", tls: UpstreamTLS{RootsFile: roots, ServerName: "other.test", InsecureHost: true}},
		{desc: "insecureHost, untrusted CA", tls: UpstreamTLS{RootsFile: otherRoots, InsecureHost: true}, wantErr: "unknown authority"},
		{desc: "insecure, untrusted CA and wrong name", tls: UpstreamTLS{RootsFile: otherRoots, ServerName: "other.test", Insecure: true}},
		{desc: "subjectAltNames, DNS", tls: UpstreamTLS{RootsFile: roots, ServerName: "other.test", SubjectAltNames: JoinList([]string{"x.test", "API.internal.test"})}},
		{desc: "subjectAltNames, URI", tls: UpstreamTLS{RootsFile: roots, SubjectAltNames: "spiffe://cluster.local/ns/a/sa/api"}},
		{desc: "subjectAltNames, IP", tls: UpstreamTLS{RootsFile: roots, ServerName: "x.test", SubjectAltNames: "127.0.0.1"}},
		{desc: "subjectAltNames, none match", tls: UpstreamTLS{RootsFile: roots, SubjectAltNames: JoinList([]string{"spiffe://cluster.local/ns/b/sa/api", "api.internal"})}, wantErr: "match none of subjectAltNames"},
		{desc: "subjectAltNames, untrusted CA", tls: UpstreamTLS{RootsFile: otherRoots, SubjectAltNames: "api.internal.test"}, wantErr: "unknown authority"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tc.tls.Enabled = true
			u := NewPools().Get(srv.Addr, PoolSettings{TLS: tc.tls})
			before := len(srv.Requests())
			_, err := exchangeGET(t, u, "/v")
			if tc.wantErr != "" {
				var he *HandshakeError
				if err == nil || Classify(err) != FailureConnect || !errors.As(err, &he) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), srv.Addr) {
					t.Fatalf("err %v (class %v); want a connect failure naming %s and %q", err, Classify(err), srv.Addr, tc.wantErr)
				}
				if n := len(srv.Requests()); n != before {
					t.Fatalf("%d requests reached the server", n-before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// SNI is the server name; none for the address's IP.
			reqs := srv.Requests()
			if len(reqs) != before+1 || reqs[len(reqs)-1].ServerName != tc.tls.ServerName || reqs[len(reqs)-1].Protocol != "http/1.1" {
				t.Fatalf("server saw %+v; want one request with SNI %q over http/1.1", reqs[before:], tc.tls.ServerName)
			}
		})
	}
}

// TestUpstreamTLSClientCert: a backend that requires a client certificate
// refuses a pool without one and serves one with cert and key.
func TestUpstreamTLSClientCert(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	clientCA := tlstest.NewCA(t, "client CA")
	srv := tlstest.NewServer(t, tlstest.ServerOptions{Cert: ca.Server(t, tlstest.Names{IPs: []string{"127.0.0.1"}}), ClientCAs: clientCA})
	roots := tlstest.WriteFile(t, "ca.pem", ca.PEM)
	client := clientCA.Client(t, "gateway")
	cert, key := tlstest.WriteFile(t, "client.pem", client.CertPEM), tlstest.WriteFile(t, "client.key", client.KeyPEM)
	stranger := tlstest.NewCA(t, "stranger").Client(t, "stranger")
	strangerCert, strangerKey := tlstest.WriteFile(t, "s.pem", stranger.CertPEM), tlstest.WriteFile(t, "s.key", stranger.KeyPEM)

	for _, tc := range []struct {
		desc    string
		tls     UpstreamTLS
		wantErr bool
	}{
		{desc: "no client certificate", tls: UpstreamTLS{Enabled: true, RootsFile: roots}, wantErr: true},
		{desc: "a certificate the backend does not trust", tls: UpstreamTLS{Enabled: true, RootsFile: roots, CertFile: strangerCert, KeyFile: strangerKey}, wantErr: true},
		{desc: "cert and key", tls: UpstreamTLS{Enabled: true, RootsFile: roots, CertFile: cert, KeyFile: key}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, err := tc.tls.Load()
			if err != nil {
				t.Fatal(err)
			}
			u := NewPools().Get(srv.Addr, PoolSettings{TLS: s})
			_, err = exchangeGET(t, u, "/m")
			if tc.wantErr {
				// TLS 1.3 clients learn of the refusal at their first read,
				// after the handshake: not a connect failure then, but
				// still nothing served.
				if err == nil {
					t.Fatal("served without an accepted client certificate")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].ClientCN != "gateway" {
				t.Fatalf("server saw %+v", reqs)
			}
		})
	}
}

// TestUpstreamTLSALPN: the pool offers http/1.1 by default and the
// configured list otherwise; a backend that picks a protocol other than
// http/1.1 is refused before anything is sent. Key exchange groups are
// offered as configured.
func TestUpstreamTLSALPN(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	leaf := ca.Server(t, tlstest.Names{IPs: []string{"127.0.0.1"}})
	roots := tlstest.WriteFile(t, "ca.pem", ca.PEM)
	plain := tlstest.NewServer(t, tlstest.ServerOptions{Cert: leaf, ALPN: []string{"http/1.1"}})
	picky := tlstest.NewServer(t, tlstest.ServerOptions{Cert: leaf, ALPN: []string{"x-other", "http/1.1"}})

	get := func(srv *tlstest.Server, s UpstreamTLS) error {
		s.Enabled, s.RootsFile = true, roots
		_, err := exchangeGET(t, NewPools().Get(srv.Addr, PoolSettings{TLS: s}), "/")
		return err
	}
	if err := get(plain, UpstreamTLS{}); err != nil {
		t.Fatal(err)
	}
	if err := get(plain, UpstreamTLS{ALPN: JoinList([]string{"x-other", "http/1.1"}), KeyExchangeGroups: JoinList([]string{"P-384", "X25519"})}); err != nil {
		t.Fatal(err)
	}
	hellos := plain.Hellos()
	if len(hellos) != 2 || strings.Join(hellos[0].ALPN, ",") != "http/1.1" || strings.Join(hellos[1].ALPN, ",") != "x-other,http/1.1" {
		t.Fatalf("offered %+v", hellos)
	}
	// (crypto/tls orders them itself.)
	if g := hellos[1].Groups; len(g) != 2 || !slices.Contains(g, tls.CurveP384) || !slices.Contains(g, tls.X25519) {
		t.Fatalf("key exchange groups offered %v, want P-384 and X25519", g)
	}
	if reqs := plain.Requests(); len(reqs) != 2 || reqs[1].Protocol != "http/1.1" {
		t.Fatalf("negotiated %+v", reqs)
	}
	err := get(picky, UpstreamTLS{ALPN: JoinList([]string{"http/1.1", "x-other"})})
	if err == nil || Classify(err) != FailureConnect || !strings.Contains(err.Error(), `ALPN protocol "x-other"`) || len(picky.Requests()) != 0 {
		t.Fatalf("a backend choosing x-other: %v, %d requests", err, len(picky.Requests()))
	}
}

// TestUpstreamTLSLoad: the files are checked and digested at load; a pool
// whose files changed after it fails its dials rather than use them.
func TestUpstreamTLSLoad(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	client := ca.Client(t, "c")
	other := ca.Client(t, "d")
	roots := tlstest.WriteFile(t, "ca.pem", ca.PEM)
	cert, key := tlstest.WriteFile(t, "c.pem", client.CertPEM), tlstest.WriteFile(t, "c.key", client.KeyPEM)
	otherKey := tlstest.WriteFile(t, "d.key", other.KeyPEM)
	garbage := tlstest.WriteFile(t, "garbage.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	text := tlstest.WriteFile(t, "text.pem", []byte("hello"))
	missing := filepath.Join(t.TempDir(), "none.pem")
	for _, tc := range []struct {
		desc     string
		tls      UpstreamTLS
		wantRole string
		wantMsg  string
	}{
		{desc: "root", tls: UpstreamTLS{RootsFile: roots}},
		{desc: "cert and key", tls: UpstreamTLS{CertFile: cert, KeyFile: key}},
		{desc: "missing root", tls: UpstreamTLS{RootsFile: missing}, wantRole: "root", wantMsg: "cannot read: no such file or directory"},
		{desc: "root without PEM", tls: UpstreamTLS{RootsFile: text}, wantRole: "root", wantMsg: "no PEM certificate"},
		{desc: "root that does not parse", tls: UpstreamTLS{RootsFile: garbage}, wantRole: "root", wantMsg: "certificate 1:"},
		{desc: "missing cert", tls: UpstreamTLS{CertFile: missing, KeyFile: key}, wantRole: "cert", wantMsg: "cannot read"},
		{desc: "cert without PEM", tls: UpstreamTLS{CertFile: text, KeyFile: key}, wantRole: "cert", wantMsg: "no PEM certificate"},
		{desc: "cert that does not parse", tls: UpstreamTLS{CertFile: garbage, KeyFile: key}, wantRole: "cert", wantMsg: "x509:"},
		{desc: "key without PEM", tls: UpstreamTLS{CertFile: cert, KeyFile: text}, wantRole: "key", wantMsg: "no PEM private key"},
		{desc: "key of another certificate", tls: UpstreamTLS{CertFile: cert, KeyFile: otherKey}, wantRole: "key", wantMsg: "does not match the certificate of cert (" + cert + ")"},
		{desc: "a certificate as key", tls: UpstreamTLS{CertFile: cert, KeyFile: cert}, wantRole: "key", wantMsg: "no PEM private key"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.tls.Load()
			if tc.wantRole == "" {
				if err != nil || len(got.FilesDigest) != 64 {
					t.Fatalf("%+v, %v", got, err)
				}
				return
			}
			var fe *TLSFileError
			if !errors.As(err, &fe) || fe.Role != tc.wantRole || !strings.Contains(fe.Msg, tc.wantMsg) {
				t.Fatalf("err %v; want %s: %q", err, tc.wantRole, tc.wantMsg)
			}
		})
	}

	// A changed file: another digest (so another pool key), and a pool
	// keyed by the old one refuses the new contents.
	s, err := UpstreamTLS{Enabled: true, RootsFile: roots}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Load(); again != s {
		t.Fatal("the same files digest differently")
	}
	if err := os.WriteFile(roots, append(ca.PEM, tlstest.NewCA(t, "second").PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, _ := s.Load(); changed.FilesDigest == s.FilesDigest {
		t.Fatal("a changed file kept its digest")
	}
	if _, err := s.Config("h"); err == nil || !strings.Contains(err.Error(), "changed after the configuration was loaded") {
		t.Fatalf("config from changed files: %v", err)
	}
	if _, err := NewPools().Get("127.0.0.1:1", PoolSettings{TLS: s}).Dial(); err == nil || !strings.Contains(err.Error(), "changed after") {
		t.Fatalf("dial with changed files: %v", err)
	}
}

// TestUpstreamTLSPoolKey: settings that differ in any TLS field are other
// pools; equal settings are one.
func TestUpstreamTLSPoolKey(t *testing.T) {
	p := NewPools()
	base := UpstreamTLS{Enabled: true, ServerName: "a.test", SubjectAltNames: JoinList([]string{"a", "b"})}
	variants := []UpstreamTLS{
		base,
		{Enabled: true, ServerName: "a.test", SubjectAltNames: JoinList([]string{"a"})},
		{Enabled: true, ServerName: "a.test", SubjectAltNames: JoinList([]string{"a", "b"}), Insecure: true},
		{Enabled: true, ServerName: "a.test", SubjectAltNames: JoinList([]string{"a", "b"}), ALPN: "http/1.1"},
		{Enabled: true, ServerName: "a.test", SubjectAltNames: JoinList([]string{"a", "b"}), FilesDigest: "x"},
	}
	seen := map[*Upstream]bool{}
	for _, v := range variants {
		seen[p.Get("127.0.0.1:1", PoolSettings{TLS: v})] = true
	}
	again := base
	again.SubjectAltNames = JoinList([]string{"a", "b"})
	if len(seen) != len(variants) || !seen[p.Get("127.0.0.1:1", PoolSettings{TLS: again})] || p.Len() != len(variants) {
		t.Fatalf("%d pools for %d settings", len(seen), len(variants))
	}
}

// TestDynamicDefaultPort: a dynamic backend's destinations without a port
// are on 443 when its pools speak TLS.
func TestDynamicDefaultPort(t *testing.T) {
	if p := NewDynamic(PoolSettings{}).DefaultPort(); p != "80" {
		t.Fatalf("plain: %s", p)
	}
	d := NewDynamic(PoolSettings{TLS: UpstreamTLS{Enabled: true}})
	u, err := d.For([]byte("api.example.test"), d.DefaultPort())
	if err != nil || u.Addr != "api.example.test:443" || string(u.HostHeader) != "api.example.test" || !u.TLS {
		t.Fatalf("%+v, %v", u, err)
	}
}

// TestDynamicTLSReadsFilesOnce: a dynamic backend's pools, opened per
// destination as requests come, use the files as they were when the
// backend was made (its settings' digest), not as they are later.
func TestDynamicTLSReadsFilesOnce(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	leaf := ca.Server(t, tlstest.Names{IPs: []string{"127.0.0.1"}})
	a := tlstest.NewServer(t, tlstest.ServerOptions{Cert: leaf})
	b := tlstest.NewServer(t, tlstest.ServerOptions{Cert: leaf})
	roots := tlstest.WriteFile(t, "ca.pem", ca.PEM)
	s, err := UpstreamTLS{Enabled: true, RootsFile: roots}.Load()
	if err != nil {
		t.Fatal(err)
	}
	d := NewDynamic(PoolSettings{TLS: s})
	if err := os.Remove(roots); err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*tlstest.Server{a, b} {
		u, err := d.For([]byte(srv.Addr), d.DefaultPort())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := exchangeGET(t, u, "/d"); err != nil || len(srv.Requests()) != 1 {
			t.Fatalf("%s: %v", srv.Addr, err)
		}
	}
}
