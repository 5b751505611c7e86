package backend

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A pool closed while requests are in flight (a reload dropped its backend)
// closes their connections as they come back, whether the body was read
// with the head or streamed: none stays open, idle, until the idle timeout.
func TestUpstreamCloseClosesConnectionsInFlight(t *testing.T) {
	for _, tc := range []struct {
		desc string
		body string
		h2   bool
	}{
		{desc: "HTTP/1.1, body read with the head", body: "ok"},
		{desc: "HTTP/1.1, streamed body", body: strings.Repeat("x", 3*ResponseStreamThreshold)},
		{desc: "HTTP/2", body: "ok", h2: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			const n = 4
			var (
				mu    sync.Mutex
				conns = map[net.Conn]http.ConnState{}
			)
			arrived := make(chan struct{}, n)
			release := make(chan struct{})
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				<-release
				io.WriteString(w, tc.body) //nolint:errcheck
			})
			track := func(c net.Conn, s http.ConnState) {
				mu.Lock()
				conns[c] = s
				mu.Unlock()
			}
			var u *Upstream
			if tc.h2 {
				addr, roots := h2sTLSUpstream(t, true, handler, func(ts *httptest.Server) { ts.Config.ConnState = track })
				u = NewUpstream(addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}})
			} else {
				ts := httptest.NewUnstartedServer(handler)
				ts.Config.ConnState = track
				ts.Start()
				t.Cleanup(ts.Close)
				u = NewUpstream(ts.Listener.Addr().String(), PoolSettings{})
			}
			exchange := func() error {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				req.SetRequestURI("/")
				req.SetHost("upstream")
				var err error
				if tc.h2 {
					err = u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false)
				} else {
					err = u.Exchange(req, resp, time.Now().Add(10*time.Second))
				}
				if err != nil {
					return err
				}
				if s := resp.BodyStream(); s != nil {
					_, err = io.Copy(io.Discard, s)
					_ = resp.CloseBodyStream()
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
					t.Fatal("the requests did not all reach the upstream")
				}
			}
			u.Close()
			close(release)
			for range n {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			open := func() (open, all int) {
				mu.Lock()
				defer mu.Unlock()
				for _, s := range conns {
					if s != http.StateClosed && s != http.StateHijacked {
						open++
					}
				}
				return open, len(conns)
			}
			for deadline := time.Now().Add(10 * time.Second); ; {
				o, all := open()
				if o == 0 && all > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d connections still open after the requests in flight at Close ended", o, all)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
