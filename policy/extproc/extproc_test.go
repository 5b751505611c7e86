package extproc

import (
	"runtime"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

func newCtx(method, uri, body string) *policy.Ctx {
	fc := &fasthttp.RequestCtx{}
	fc.Request.Header.SetMethod(method)
	fc.Request.SetRequestURI(uri)
	fc.Request.Header.SetHost("example.com")
	if body != "" {
		fc.Request.SetBodyString(body)
	}
	return &policy.Ctx{Fast: fc, Scheme: []byte("http"), Path: fc.Request.URI().Path()}
}

func compile(t *testing.T, addr string, failOpen bool, timeout time.Duration) *ExtProc {
	t.Helper()
	cfg := &config.ExtProc{Host: addr}
	if failOpen {
		cfg.FailureMode = "failOpen"
	}
	p, err := New(cfg, Options{Addr: addr, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.conn.Close() })
	return p
}

// A service that never answers fails the request after the timeout: 500
// when failing closed, unprocessed when failing open (its body whole).
func TestSilentServiceTimesOut(t *testing.T) {
	silent := &extproctest.Server{Answer: func(*extproctest.Stream, *procv3.ProcessingRequest) []*procv3.ProcessingResponse { return nil }}
	addr := extproctest.Start(t, silent)
	for _, failOpen := range []bool{false, true} {
		p := compile(t, addr, failOpen, 200*time.Millisecond)
		c := newCtx("POST", "/x", "payload")
		start := time.Now()
		res := p.OnRequest(c)
		took := time.Since(start)
		if took < 200*time.Millisecond || took > 5*time.Second {
			t.Errorf("failOpen=%v: gave up after %v, want the 200ms timeout", failOpen, took)
		}
		switch {
		case failOpen && (res != policy.Continue || string(c.Fast.Request.Body()) != "payload"):
			t.Errorf("failOpen: %v with body %q, want Continue with the body whole", res, c.Fast.Request.Body())
		case !failOpen && (res != policy.Done || c.Fast.Response.StatusCode() != 500):
			t.Errorf("failClosed: %v, status %d, want Done 500", res, c.Fast.Response.StatusCode())
		}
		c.Reset()
	}
}

// Every stream a request opened ends with the request: no goroutine is
// left behind, whether the exchange completed, failed, or was answered.
func TestSessionsEndWithTheirRequests(t *testing.T) {
	svc := &extproctest.Server{}
	addr := extproctest.Start(t, svc)
	p := compile(t, addr, false, 5*time.Second)
	// Warm the connection up so its goroutines are in the baseline.
	c := newCtx("GET", "/", "")
	p.OnRequest(c)
	c.Reset()
	base := runtime.NumGoroutine()
	for i := 0; i < 50; i++ {
		c := newCtx("POST", "/x", strings.Repeat("b", 100))
		if p.OnRequest(c) != policy.Continue {
			t.Fatalf("request %d refused: %d", i, c.Fast.Response.StatusCode())
		}
		body := c.Fast.Request.Body() // drains the full-duplex body
		if string(body) != strings.Repeat("b", 100) {
			t.Fatalf("request %d: body %q", i, body)
		}
		c.Fast.Response.SetBodyString("answer")
		if i%2 == 0 {
			p.OnResponse(c)
			if got := string(c.Fast.Response.Body()); got != "answer" {
				t.Fatalf("response %d: body %q", i, got)
			}
		}
		_ = c.Fast.Response.CloseBodyStream()
		c.Reset()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the requests:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if n := len(svc.Streams()); n != 51 {
		t.Fatalf("%d streams, want 51", n)
	}
}

// FuzzHeaderMutation: whatever header mutation a service sends, applying
// it never panics, and when it is accepted the request and response stay
// valid HTTP.
func FuzzHeaderMutation(f *testing.F) {
	f.Add("x-a", "1", ":path", "/p?q", "x-b", int32(2))
	f.Add(":authority", "h:1", ":method", "PUT", "content-length", int32(0))
	f.Add(":path", "/a b", ":authority", "a/b", "", int32(2))
	f.Add("bad name", "v\r\nx: y", ":status", "999", "", int32(7))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, remove string, action int32) {
		hm := &procv3.HeaderMutation{RemoveHeaders: []string{remove}}
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}} {
			hm.SetHeaders = append(hm.SetHeaders, &corev3.HeaderValueOption{
				Header:       &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])},
				AppendAction: corev3.HeaderValueOption_HeaderAppendAction(action % 5),
			})
		}
		c := newCtx("GET", "/orig", "")
		if applyRequestMutation(c, hm, false, zap.NewNop()) == nil {
			for k, v := range c.Fast.Request.Header.All() {
				if !policy.ValidHeader(string(k), string(v)) {
					t.Fatalf("accepted mutation left header %q: %q", k, v)
				}
			}
			if p := c.Fast.Request.Header.RequestURI(); !policy.ValidOriginForm(string(p)) {
				t.Fatalf("request target %q", p)
			}
			if h := c.Fast.Request.Header.Host(); !policy.ValidAuthority(string(h)) {
				t.Fatalf("host %q", h)
			}
		}
		resp := &fasthttp.Response{}
		if applyResponseMutation(resp, hm) == nil {
			if code := resp.StatusCode(); code < 200 || code > 599 {
				t.Fatalf("status %d", code)
			}
		}
		respondImmediate(c, &procv3.ImmediateResponse{Headers: hm, Body: []byte(v1)})
		for k, v := range c.Fast.Response.Header.All() {
			if !policy.ValidHeader(string(k), string(v)) {
				t.Fatalf("immediate response header %q: %q", k, v)
			}
		}
	})
}

// TestTrailerModeSendIsWarned: trailers are not sent to the service yet, so
// a trailer mode set to send is said at load, not ignored in silence.
func TestTrailerModeSendIsWarned(t *testing.T) {
	for _, tc := range []struct {
		opts *config.ExtProcOptions
		warn bool
	}{
		{nil, false},
		{&config.ExtProcOptions{RequestTrailerMode: "skip", ResponseTrailerMode: "skip"}, false},
		{&config.ExtProcOptions{RequestTrailerMode: "send"}, true},
		{&config.ExtProcOptions{ResponseTrailerMode: "send"}, true},
	} {
		core, logs := observer.New(zap.WarnLevel)
		p, err := New(&config.ExtProc{Host: "127.0.0.1:1", ProcessingOptions: tc.opts}, Options{Addr: "127.0.0.1:1", Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		_ = p.conn.Close()
		warned := logs.FilterMessageSnippet("trailers are not sent").Len() == 1
		if warned != tc.warn {
			t.Errorf("options %+v: warned %v, want %v", tc.opts, warned, tc.warn)
		}
	}
}

// TestServicePathNormalized: a :path the service sets is normalized as a
// client's is before routing, unless paths are kept raw, and later
// policies see it (c.Path): "/a/../admin" went upstream as it was, for the
// upstream to resolve past what the route's policies had seen. One that
// does not normalize is the service's error.
func TestServicePathNormalized(t *testing.T) {
	for _, tc := range []struct {
		set, want, path string
		raw, fails      bool
	}{
		{set: "/a/../admin?x=/../y", want: "/admin?x=/../y", path: "/admin"},
		{set: "//x//y/", want: "/x/y/", path: "/x/y/"},
		{set: "/ok", want: "/ok", path: "/ok"},
		{set: "/a/%2Fb", fails: true},
		{set: "/a/../admin", want: "/a/../admin", path: "/a/../admin", raw: true},
	} {
		t.Run(tc.set, func(t *testing.T) {
			hm := &procv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
				Header: &corev3.HeaderValue{Key: ":path", RawValue: []byte(tc.set)},
			}}}
			c := newCtx("GET", "/orig", "")
			err := applyRequestMutation(c, hm, tc.raw, zap.NewNop())
			if tc.fails {
				if err == nil {
					t.Fatalf("accepted; target %q", c.Fast.Request.Header.RequestURI())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(c.Fast.Request.Header.RequestURI()); got != tc.want {
				t.Errorf("target %q, want %q", got, tc.want)
			}
			if got := string(c.Path); got != tc.path {
				t.Errorf("c.Path %q, want %q", got, tc.path)
			}
		})
	}
}
