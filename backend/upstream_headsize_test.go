package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A response head up to MaxResponseHeadBytes passes in HTTP/1.1 as in
// HTTP/2, and a larger one is a 502 in both: the HTTP/1.1 side refused
// anything beyond its 8 KiB read buffer, the HTTP/2 side took x/net's 10
// MiB. The body after a large head arrives whole, whether it was read with
// the head, streamed or chunked, and the connection serves the next
// request.
func TestUpstreamResponseHeadLimit(t *testing.T) {
	// headers?kb=N answers with N fields of 1,000 bytes (name, value and
	// line break or HTTP/2's 32 bytes of overhead: just under 1 KiB each),
	// then body=N bytes (chunked=1: without Content-Length, in HTTP/1.1
	// chunked).
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		kb, _ := strconv.Atoi(q.Get("kb"))
		for i := range kb {
			w.Header().Set(fmt.Sprintf("X-Field-%04d", i), strings.Repeat("v", 1000-12-32))
		}
		n, _ := strconv.Atoi(q.Get("body"))
		if q.Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		if q.Get("continue") != "" {
			w.WriteHeader(http.StatusContinue)
		}
		w.WriteHeader(http.StatusOK)
		for sent := 0; sent < n; sent += 1000 {
			io.WriteString(w, strings.Repeat("b", min(1000, n-sent))) //nolint:errcheck
			w.(http.Flusher).Flush()
		}
	})
	h1 := httptest.NewServer(handler)
	t.Cleanup(h1.Close)
	h2Addr, roots := h2sTLSUpstream(t, true, handler, nil)
	for _, version := range []struct {
		name string
		u    *Upstream
		h2   bool
	}{
		{"HTTP/1.1", NewUpstream(h1.Listener.Addr().String(), PoolSettings{}), false},
		{"HTTP/2", NewUpstream(h2Addr, PoolSettings{TLS: UpstreamTLS{Enabled: true, RootsFile: roots}}), true},
	} {
		t.Cleanup(version.u.Close)
		t.Run(version.name, func(t *testing.T) {
			for _, tc := range []struct {
				desc  string
				query string
				kb    int // fields of about 1 KiB
				body  int
				fail  bool
			}{
				{desc: "small head", kb: 1, body: 2},
				{desc: "12 KiB head", kb: 12, body: 2},
				{desc: "12 KiB head, streamed body", kb: 12, body: 100_000},
				{desc: "12 KiB head, chunked body", kb: 12, body: 100_000, query: "&chunked=1"},
				{desc: "12 KiB head after 100 Continue", kb: 12, body: 2, query: "&continue=1"},
				{desc: "60 KiB head", kb: 60, body: 2},
				{desc: "70 KiB head", kb: 70, body: 2, fail: true},
				{desc: "120 KiB head", kb: 120, body: 2, fail: true},
			} {
				t.Run(tc.desc, func(t *testing.T) {
					path := fmt.Sprintf("/headers?kb=%d&body=%d%s", tc.kb, tc.body, tc.query)
					fields, body, err := exchangeHead(version.u, version.h2, path)
					if tc.fail {
						if err == nil {
							t.Fatalf("a head of %d KiB passed", tc.kb)
						}
						if st := Classify(err).Status(); st != fasthttp.StatusBadGateway {
							t.Fatalf("status %d (%v), want 502", st, err)
						}
						if !version.h2 && !errors.Is(err, ErrResponseHeadTooLarge) {
							t.Fatalf("error %v, want ErrResponseHeadTooLarge", err)
						}
					} else {
						if err != nil {
							t.Fatal(err)
						}
						if fields != tc.kb || body != tc.body {
							t.Fatalf("%d fields and %d body bytes, want %d and %d", fields, body, tc.kb, tc.body)
						}
					}
					// The connection (or the pool) serves the next request.
					if fields, body, err := exchangeHead(version.u, version.h2, "/headers?kb=1&body=5"); err != nil || fields != 1 || body != 5 {
						t.Fatalf("next request: %d fields, %d body bytes, %v", fields, body, err)
					}
				})
			}
		})
	}
}

// exchangeHead sends GET path and counts the X-Field fields of the
// answer, and its body bytes (all b).
func exchangeHead(u *Upstream, h2 bool, path string) (fields, body int, err error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(path)
	req.SetHost("upstream")
	deadline := time.Now().Add(10 * time.Second)
	if h2 {
		err = u.ExchangeH2(context.Background(), req, resp, deadline, nil, false)
	} else {
		err = u.Exchange(req, resp, deadline)
	}
	if err != nil {
		return 0, 0, err
	}
	for k, v := range resp.Header.All() {
		if strings.HasPrefix(string(k), "X-Field-") && len(v) == 1000-12-32 {
			fields++
		}
	}
	b := resp.Body()
	if s := resp.BodyStream(); s != nil {
		b, err = io.ReadAll(s)
		_ = resp.CloseBodyStream()
	}
	if strings.Trim(string(b), "b") != "" {
		err = fmt.Errorf("body %.40q", b)
	}
	return fields, len(b), err
}
