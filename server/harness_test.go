package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/server/telemetry"
)

// testGateway is a gateway under test listening on OS-chosen loopback ports.
type testGateway struct {
	t    *testing.T
	gw   *Gateway
	logs *observer.ObservedLogs
}

// startGateway applies the YAML config (with ${NAME} expanded from vars) to a
// new gateway whose binds listen on 127.0.0.1 with OS-chosen ports.
func startGateway(t *testing.T, yaml string, vars map[string]string) *testGateway {
	t.Helper()
	return startGatewayWith(t, yaml, vars, TransportStd)
}

func startGatewayWith(t *testing.T, yaml string, vars map[string]string, tr Transport) *testGateway {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	gw := New(Options{
		Logger:     zap.New(core),
		Transport:  tr,
		ListenAddr: func(int) string { return "127.0.0.1:0" },
	})
	tg := &testGateway{t: t, gw: gw, logs: logs}
	tg.apply(yaml, vars)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	return tg
}

// accessLogs returns the gateway's log once the records its requests left
// for after their responses (deferRecord) are written.
func (tg *testGateway) accessLogs() *observer.ObservedLogs {
	tg.t.Helper()
	settleRecords(tg.t, tg.gw)
	return tg.logs
}

// metrics returns the gateway's metrics once the records its requests left
// for after their responses are written.
func (tg *testGateway) metrics() *telemetry.Registry {
	tg.t.Helper()
	settleRecords(tg.t, tg.gw)
	return tg.gw.metrics
}

// settleRecords waits until no request's record waits for after its
// response: a response has reached the client a moment before its access
// line and metrics are written (deferRecord).
func settleRecords(t *testing.T, gw *Gateway) {
	t.Helper()
	eventually(t, 5*time.Second, "the requests' records", func() bool { return gw.recordsPending() == 0 })
}

func parseConfig(t *testing.T, yaml string, vars map[string]string) *config.File {
	t.Helper()
	f, err := config.Parse([]byte(yaml), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return f
}

func (tg *testGateway) apply(yaml string, vars map[string]string) {
	tg.t.Helper()
	if err := tg.gw.Apply(parseConfig(tg.t, yaml, vars)); err != nil {
		tg.t.Fatalf("apply: %v", err)
	}
}

// url returns http://ADDR for the bind configured with port.
func (tg *testGateway) url(port int) string {
	tg.t.Helper()
	a, ok := tg.gw.Addrs()[port]
	if !ok {
		tg.t.Fatalf("no bind for port %d", port)
	}
	return "http://" + a.String()
}

func (tg *testGateway) addr(port int) string {
	return strings.TrimPrefix(tg.url(port), "http://")
}

// upstream starts a real HTTP server on 127.0.0.1 and returns its host:port.
func upstream(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

var testClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// do sends a request and returns the response with its body read.
func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

func get(t *testing.T, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	return do(t, req)
}

// eventually polls cond every few milliseconds until it holds or the bound passes.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func parseConfigTB(tb testing.TB, yaml string) *config.File {
	tb.Helper()
	f, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return f
}

// expiredContext bounds a benchmark's gateway shutdown.
func expiredContext() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	time.AfterFunc(2*time.Second, cancel)
	return ctx
}

// rawUpstream serves every connection on a loopback listener with handle,
// which owns the connection; for upstreams that misbehave below HTTP.
func rawUpstream(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

// headerRecorder is an upstream that answers with answer (200 "ok" when
// nil) and keeps the headers of the last request it got; seen returns
// them.
func headerRecorder(t *testing.T, answer http.HandlerFunc) (addr string, seen func() http.Header) {
	t.Helper()
	var mu sync.Mutex
	last := http.Header{}
	addr = upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		w.Write([]byte("ok")) //nolint:errcheck
	}))
	return addr, func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// dialTest opens a connection to addr, closed when the test ends, with a
// bound on everything done with it.
func dialTest(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}
