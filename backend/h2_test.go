package backend

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// h2TLSUpstream is an HTTPS server on 127.0.0.1, offering HTTP/2 when h2
// (ALPN), and a PEM file of its certificate.
func h2TLSUpstream(t *testing.T, h2 bool) (addr, roots string) {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, r.Method+" "+r.Host+" "+r.URL.RequestURI()+" "+string(b)) //nolint:errcheck
		w.Header().Set("X-Sum", "done")
	}))
	ts.EnableHTTP2 = h2
	ts.StartTLS()
	t.Cleanup(ts.Close)
	roots = filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	if err := os.WriteFile(roots, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(ts.URL, "https://"), roots
}

type closedWith struct {
	n   int
	err error
	ok  bool
}

func (c *closedWith) StreamClosed(n int, err error) { *c = closedWith{n, err, true} }

func TestExchangeH2OverTLS(t *testing.T) {
	addr, roots := h2TLSUpstream(t, true)
	u := NewUpstream(addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}})
	t.Cleanup(u.Close)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI("/p?q=%20x")
	req.Header.SetHost("svc.example")
	req.SetBodyString("hello")
	if err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false); err != nil {
		t.Fatal(err)
	}
	var obs closedWith
	if !ObserveStream(resp, &obs) {
		t.Fatal("no stream to observe")
	}
	body, err := io.ReadAll(resp.BodyStream())
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Header.Peek("X-Proto")) != "HTTP/2.0" || string(body) != "POST svc.example /p?q=%20x hello" {
		t.Fatalf("%s %q", resp.Header.Peek("X-Proto"), body)
	}
	if v := resp.Header.Peek("X-Sum"); string(v) != "done" {
		t.Fatalf("trailer %q", v)
	}
	_ = resp.CloseBodyStream()
	if !obs.ok || obs.err != nil || obs.n != len(body) {
		t.Fatalf("observed %+v", obs)
	}
}

func TestExchangeH2RefusedWithoutALPN(t *testing.T) {
	addr, roots := h2TLSUpstream(t, false)
	u := NewUpstream(addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}})
	t.Cleanup(u.Close)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("/")
	err := u.ExchangeH2(context.Background(), req, resp, time.Time{}, nil, false)
	if Classify(err) != FailureConnect {
		t.Fatalf("%v: %v; want a connect failure (nothing sent)", err, Classify(err))
	}
}
