package backend

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// tlsUpstream is an HTTPS server on 127.0.0.1 and a PEM file of its
// certificate, for a pool's RootsFile.
func tlsUpstream(t *testing.T) (addr, roots string, hits *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("X-Proto", r.Proto)
		io.WriteString(w, "secure "+r.Host+" "+r.URL.Path)
	}))
	t.Cleanup(ts.Close)
	roots = filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	if err := os.WriteFile(roots, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(ts.URL, "https://"), roots, n
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
