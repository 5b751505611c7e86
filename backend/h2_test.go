package backend

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// h2TLSUpstream is an HTTPS server on 127.0.0.1, offering HTTP/2 when h2
// (ALPN), and a PEM file of its certificate.
func h2TLSUpstream(t *testing.T, h2 bool) (addr, roots string) {
	t.Helper()
	return h2sTLSUpstream(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, r.Method+" "+r.Host+" "+r.URL.RequestURI()+" "+string(b)) //nolint:errcheck
		w.Header().Set("X-Sum", "done")
	}), nil)
}

// h2sTLSUpstream is an HTTPS server on 127.0.0.1 serving h, offering HTTP/2
// when h2, set up further by configure (when not nil) before it starts,
// and a PEM file of its certificate.
func h2sTLSUpstream(t *testing.T, h2 bool, h http.Handler, configure func(*httptest.Server)) (addr, roots string) {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = h2
	if configure != nil {
		configure(ts)
	}
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

// Requests in flight at once to a new HTTP/2 upstream share one dial and
// one connection (its streams), and Close closes that connection once it
// is idle; the next request dials anew.
func TestExchangeH2RequestsShareOneConnection(t *testing.T) {
	const n = 16
	var (
		mu    sync.Mutex
		conns = map[net.Conn]http.ConnState{}
	)
	arrived := make(chan struct{}, n+1)
	release := make(chan struct{})
	addr, roots := h2sTLSUpstream(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, r.Proto) //nolint:errcheck
	}), func(ts *httptest.Server) {
		ts.Config.ConnState = func(c net.Conn, s http.ConnState) {
			mu.Lock()
			conns[c] = s
			mu.Unlock()
		}
	})
	u := NewUpstream(addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}})
	t.Cleanup(u.Close)
	exchange := func() error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("/")
		if err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false); err != nil {
			return err
		}
		body, err := io.ReadAll(resp.BodyStream())
		_ = resp.CloseBodyStream()
		if err == nil && string(body) != "HTTP/2.0" {
			err = fmt.Errorf("body %q", body)
		}
		return err
	}
	errs := make(chan error, n)
	for range n {
		go func() { errs <- exchange() }()
	}
	for range n {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the requests did not all reach the upstream at once")
		}
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	count := func(want http.ConnState) (open, inState int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range conns {
			if s != http.StateClosed && s != http.StateHijacked {
				open++
			}
			if s == want {
				inState++
			}
		}
		return open, len(conns)
	}
	if open, all := count(http.StateClosed); all != 1 || open != 1 {
		t.Fatalf("%d connections, %d open; want the %d requests on one", all, open, n)
	}
	u.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if open, _ := count(http.StateClosed); open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close left the idle connection open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := exchange(); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if _, all := count(http.StateClosed); all != 2 {
		t.Fatalf("%d connections; want a second one after Close", all)
	}
}

// A request without User-Agent goes upstream without one: x/net's
// transport would add its own (Go-http-client/2.0). One with it keeps it.
func TestExchangeH2AddsNoUserAgent(t *testing.T) {
	seen := make(chan []string, 2)
	addr, roots := h2sTLSUpstream(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Values("User-Agent")
	}), nil)
	u := NewUpstream(addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}})
	t.Cleanup(u.Close)
	for _, ua := range []string{"", "client/1.0"} {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("/")
		if ua != "" {
			req.Header.SetUserAgent(ua)
		}
		if err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false); err != nil {
			t.Fatal(err)
		}
		_ = resp.CloseBodyStream()
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		got := <-seen
		if ua == "" && len(got) != 0 || ua != "" && (len(got) != 1 || got[0] != ua) {
			t.Errorf("sent User-Agent %q, the upstream saw %q", ua, got)
		}
	}
}

// An upstream taken for HTTP/2 in cleartext that speaks HTTP/1.1 only
// fails the exchange with ErrUpstreamNotHTTP2 (a 502 whose log says why),
// not a frame error read from its status line.
func TestExchangeH2UpstreamSpeaksHTTP1Only(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(ts.Close)
	u := NewUpstream(strings.TrimPrefix(ts.URL, "http://"), PoolSettings{})
	t.Cleanup(u.Close)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("/")
	err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false)
	if !errors.Is(err, ErrUpstreamNotHTTP2) {
		t.Fatalf("exchange: %v; want ErrUpstreamNotHTTP2", err)
	}
	if f := Classify(err); f.Status() != 502 {
		t.Fatalf("classified %v (%d), want 502", f, f.Status())
	}
}

// An HTTP/2 upstream may send a stream only h2StreamWindow ahead of what
// the gateway's client reads: a response nobody reads holds about that
// much, not x/net's 4 MiB default per stream. The upstream's handler
// writes 8 MiB with a write deadline; the write that stalls on the
// exhausted window fails, and the bytes before it are what was let
// through.
func TestExchangeH2ResponseBufferedPerStreamIsBounded(t *testing.T) {
	wrote := make(chan int, 1)
	addr, roots := h2sTLSUpstream(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		chunk := make([]byte, 16<<10)
		n := 0
		for n < 8<<20 {
			_ = rc.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
			m, err := w.Write(chunk)
			n += m
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				break
			}
		}
		wrote <- n
	}), nil)
	u := NewUpstream(addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}})
	t.Cleanup(u.Close)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("/big")
	if err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(30*time.Second), nil, false); err != nil {
		t.Fatal(err)
	}
	defer resp.CloseBodyStream() //nolint:errcheck
	var n int
	select {
	case n = <-wrote:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream wrote 8 MiB to a stream nobody read")
	}
	if n > 1<<20 {
		t.Fatalf("the upstream sent %d bytes ahead of the reader, want at most about %d", n, h2StreamWindow)
	}
	if n < h2StreamWindow/2 {
		t.Fatalf("the upstream could send only %d bytes, want about the window (%d)", n, h2StreamWindow)
	}
}
