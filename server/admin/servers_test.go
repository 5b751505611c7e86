package admin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const testUI = "<!doctype html><title>ui</title>"

// startTest starts servers and shuts them down when the test ends.
func startTest(t *testing.T, opts Options) *Servers {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

// noRedirect is a client that reports redirects instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func fullOptions(ready *atomic.Bool) Options {
	return Options{
		AdminAddr:     "127.0.0.1:0",
		StatsAddr:     "127.0.0.1:0",
		ReadinessAddr: "127.0.0.1:0",
		ConfigDump:    func() ([]byte, error) { return []byte(`{"binds":[]}`), nil },
		UIPage:        func() ([]byte, error) { return []byte(testUI), nil },
		Metrics: func(w io.Writer) {
			_, _ = io.WriteString(w, "# TYPE up gauge\nup 1\n")
		},
		Ready: ready.Load,
	}
}

func TestEndpoints(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	s := startTest(t, fullOptions(&ready))
	base := map[string]string{
		"admin":     "http://" + s.AdminAddr(),
		"stats":     "http://" + s.StatsAddr(),
		"readiness": "http://" + s.ReadinessAddr(),
	}
	tests := []struct {
		desc         string
		server       string
		method       string
		path         string
		wantStatus   int
		wantType     string // Content-Type prefix; "" skips
		wantBody     string // exact body; "" skips
		wantContains string // body substring; "" skips
		wantLocation string
	}{
		{desc: "ui page", server: "admin", path: "/ui/", wantStatus: 200, wantType: "text/html", wantBody: testUI},
		{desc: "ui without slash redirects", server: "admin", path: "/ui", wantStatus: 301, wantLocation: "/ui/"},
		{desc: "ui redirect keeps query", server: "admin", path: "/ui?tab=routes", wantStatus: 301, wantLocation: "/ui/?tab=routes"},
		{desc: "ui subpath is not found", server: "admin", path: "/ui/nope", wantStatus: 404},
		{desc: "config dump", server: "admin", path: "/config_dump", wantStatus: 200, wantType: "application/json", wantBody: `{"binds":[]}`},
		{desc: "config dump rejects POST", server: "admin", method: "POST", path: "/config_dump", wantStatus: 405},
		{desc: "index", server: "admin", path: "/", wantStatus: 200, wantType: "text/html", wantContains: `href="/config_dump"`},
		{desc: "pprof index", server: "admin", path: "/debug/pprof/", wantStatus: 200, wantContains: "goroutine"},
		{desc: "pprof named profile", server: "admin", path: "/debug/pprof/heap?debug=1", wantStatus: 200, wantContains: "heap profile"},
		{desc: "pprof cmdline", server: "admin", path: "/debug/pprof/cmdline", wantStatus: 200, wantContains: filepath.Base(os.Args[0])},
		{desc: "pprof symbol", server: "admin", path: "/debug/pprof/symbol", wantStatus: 200, wantContains: "num_symbols"},
		{desc: "pprof cpu profile", server: "admin", path: "/debug/pprof/profile?seconds=1", wantStatus: 200, wantType: "application/octet-stream"},
		{desc: "admin unknown path", server: "admin", path: "/nope", wantStatus: 404},
		{desc: "metrics", server: "stats", path: "/metrics", wantStatus: 200, wantType: "text/plain; version=0.0.4", wantBody: "# TYPE up gauge\nup 1\n"},
		{desc: "stats has no pprof", server: "stats", path: "/debug/pprof/", wantStatus: 404},
		{desc: "stats has no config dump", server: "stats", path: "/config_dump", wantStatus: 404},
		{desc: "ready", server: "readiness", path: "/healthz/ready", wantStatus: 200, wantType: "text/plain", wantBody: "ready"},
		{desc: "readiness unknown path", server: "readiness", path: "/metrics", wantStatus: 404},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, base[tc.server]+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %q", resp.StatusCode, tc.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
				t.Errorf("Content-Type = %q, want prefix %q", ct, tc.wantType)
			}
			if tc.wantBody != "" && string(body) != tc.wantBody {
				t.Errorf("body = %q, want %q", body, tc.wantBody)
			}
			if !strings.Contains(string(body), tc.wantContains) {
				t.Errorf("body does not contain %q:\n%.500s", tc.wantContains, body)
			}
			if loc := resp.Header.Get("Location"); loc != tc.wantLocation {
				t.Errorf("Location = %q, want %q", loc, tc.wantLocation)
			}
		})
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := noRedirect.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestReadinessFollowsReady(t *testing.T) {
	var ready atomic.Bool
	s := startTest(t, fullOptions(&ready))
	url := "http://" + s.ReadinessAddr() + "/healthz/ready"
	tests := []struct {
		desc       string
		ready      bool
		wantStatus int
		wantBody   string
	}{
		{"not ready yet", false, 503, "not ready"},
		{"became ready", true, 200, "ready"},
		{"draining", false, 503, "not ready"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ready.Store(tc.ready)
			status, body := get(t, url)
			if status != tc.wantStatus || body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", status, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestNilCallbacks(t *testing.T) {
	s := startTest(t, Options{AdminAddr: "127.0.0.1:0", StatsAddr: "127.0.0.1:0", ReadinessAddr: "127.0.0.1:0"})
	tests := []struct {
		desc       string
		url        string
		wantStatus int
		wantBody   string
	}{
		{"no UI page", "http://" + s.AdminAddr() + "/ui/", 404, ""},
		{"no UI redirect either", "http://" + s.AdminAddr() + "/ui", 404, ""},
		{"no config dump", "http://" + s.AdminAddr() + "/config_dump", 404, ""},
		{"empty exposition", "http://" + s.StatsAddr() + "/metrics", 200, ""},
		{"ready without a Ready func", "http://" + s.ReadinessAddr() + "/healthz/ready", 200, "ready"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			status, body := get(t, tc.url)
			if status != tc.wantStatus {
				t.Errorf("status = %d, want %d", status, tc.wantStatus)
			}
			if tc.wantStatus == 200 && body != tc.wantBody {
				t.Errorf("body = %q, want %q", body, tc.wantBody)
			}
		})
	}
	status, body := get(t, "http://"+s.AdminAddr()+"/")
	if status != 200 || strings.Contains(body, "/config_dump") || strings.Contains(body, "/ui/") {
		t.Errorf("index lists endpoints that are not served: %d %s", status, body)
	}
}

func TestCallbackErrors(t *testing.T) {
	fail := func() ([]byte, error) { return nil, errors.New("snapshot unavailable") }
	s := startTest(t, Options{AdminAddr: "127.0.0.1:0", ConfigDump: fail, UIPage: fail})
	for _, path := range []string{"/config_dump", "/ui/"} {
		t.Run(path, func(t *testing.T) {
			status, body := get(t, "http://"+s.AdminAddr()+path)
			if status != 500 || !strings.Contains(body, "snapshot unavailable") {
				t.Errorf("got %d %q, want 500 with the error text", status, body)
			}
		})
	}
}

func TestAdminURL(t *testing.T) {
	s := startTest(t, fullOptions(new(atomic.Bool)))
	want := "http://" + s.AdminAddr() + "/ui/"
	if got := s.AdminURL(); got != want {
		t.Fatalf("AdminURL = %q, want %q", got, want)
	}
	status, body := get(t, s.AdminURL())
	if status != 200 || body != testUI {
		t.Errorf("GET AdminURL = %d %q", status, body)
	}
}

func TestOff(t *testing.T) {
	tests := []struct {
		desc                  string
		admin, stats, readies string
	}{
		{"all off", "off", "off", "off"},
		{"all empty", "", "", ""},
		{"OFF in capitals", "OFF", "Off", ""},
		{"only admin", "127.0.0.1:0", "off", ""},
		{"only stats", "off", "127.0.0.1:0", "off"},
		{"only readiness", "", "", "127.0.0.1:0"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s := startTest(t, Options{AdminAddr: tc.admin, StatsAddr: tc.stats, ReadinessAddr: tc.readies})
			checks := []struct {
				name string
				in   string
				got  string
			}{
				{"admin", tc.admin, s.AdminAddr()},
				{"stats", tc.stats, s.StatsAddr()},
				{"readiness", tc.readies, s.ReadinessAddr()},
			}
			for _, c := range checks {
				on := strings.HasPrefix(c.in, "127.")
				if on != (c.got != "") {
					t.Errorf("%s address %q: bound %q", c.name, c.in, c.got)
				}
			}
			if (s.AdminURL() != "") != strings.HasPrefix(tc.admin, "127.") {
				t.Errorf("AdminURL = %q with admin %q", s.AdminURL(), tc.admin)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		opts    Options
		wantErr string
	}{
		{"stats port in use", Options{AdminAddr: "127.0.0.1:0", StatsAddr: taken.Addr().String()}, "stats server"},
		{"admin port in use", Options{AdminAddr: taken.Addr().String()}, "admin server"},
		{"readiness port in use", Options{ReadinessAddr: taken.Addr().String()}, "readiness server"},
		{"missing port", Options{AdminAddr: "127.0.0.1"}, "want host:port"},
		{"port out of range", Options{StatsAddr: "127.0.0.1:70000"}, "not a number in 0..65535"},
		{"named port", Options{StatsAddr: "127.0.0.1:http"}, "not a number"},
		{"empty unix path", Options{ReadinessAddr: "unix:"}, "empty unix socket path"},
		{"unix path in missing directory", Options{AdminAddr: "unix:" + filepath.Join(dir, "nope", "s.sock")}, "admin server"},
		{"regular file at unix path", Options{AdminAddr: "unix:" + regular}, "address already in use"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s, err := Start(tc.opts)
			if err == nil {
				_ = s.Shutdown(context.Background())
				t.Fatalf("Start succeeded, want error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
	if b, err := os.ReadFile(regular); err != nil || string(b) != "keep me" {
		t.Errorf("regular file at the socket path was touched: %q, %v", b, err)
	}
}

// TestFailedStartReleasesListeners checks that a failed Start closes the
// listeners it had already opened: the admin unix socket, bound before the
// stats port conflict, is gone afterwards.
func TestFailedStartReleasesListeners(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	if _, err := Start(Options{AdminAddr: "unix:" + sock, StatsAddr: taken.Addr().String()}); err == nil {
		t.Fatal("Start succeeded with the stats port taken")
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("admin socket still present after failed Start: %v", err)
	}
	s := startTest(t, Options{AdminAddr: "unix:" + sock})
	if s.AdminAddr() != "unix:"+sock {
		t.Errorf("AdminAddr = %q", s.AdminAddr())
	}
}

// unixClient talks HTTP over the unix socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
		},
	}
}

func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	adminSock := filepath.Join(dir, "admin.sock")
	statsSock := filepath.Join(dir, "stats.sock")
	opts := fullOptions(new(atomic.Bool))
	opts.AdminAddr, opts.StatsAddr, opts.ReadinessAddr = "unix:"+adminSock, "unix:"+statsSock, "off"
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.AdminAddr() != "unix:"+adminSock || s.StatsAddr() != "unix:"+statsSock {
		t.Errorf("addresses = %q, %q", s.AdminAddr(), s.StatsAddr())
	}
	if s.AdminURL() != "" {
		t.Errorf("AdminURL = %q, want empty for a unix socket", s.AdminURL())
	}
	tests := []struct {
		desc string
		sock string
		path string
		want string
	}{
		{"config dump over unix socket", adminSock, "/config_dump", `{"binds":[]}`},
		{"metrics over unix socket", statsSock, "/metrics", "# TYPE up gauge\nup 1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, err := unixClient(tc.sock).Get("http://unix" + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != tc.want {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{adminSock, statsSock} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind after Shutdown: %v", p, err)
		}
	}
}

func TestUnixSocketReuse(t *testing.T) {
	tests := []struct {
		desc    string
		setup   func(t *testing.T, path string) // leaves something at path
		wantErr bool
	}{
		{"stale socket from a dead process is replaced", func(t *testing.T, path string) {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
			_ = ln.Close()
			if _, err := os.Lstat(path); err != nil {
				t.Fatalf("stale socket not left behind: %v", err)
			}
		}, false},
		{"live socket is not stolen", func(t *testing.T, path string) {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ln.Close() })
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.sock")
			tc.setup(t, path)
			s, err := Start(Options{AdminAddr: "unix:" + path, ConfigDump: func() ([]byte, error) { return []byte("{}"), nil }})
			if tc.wantErr {
				if err == nil {
					_ = s.Shutdown(context.Background())
					t.Fatal("Start succeeded on a socket another process serves")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown(context.Background())
			resp, err := unixClient(path).Get("http://unix/config_dump")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status = %d", resp.StatusCode)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	opts := fullOptions(new(atomic.Bool))
	opts.Logger = zap.New(core)
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessage("listener established").Len(); n != 3 {
		t.Errorf("%d 'listener established' logs, want 3", n)
	}
	addrs := []string{s.AdminAddr(), s.StatsAddr(), s.ReadinessAddr()}
	if status, _ := get(t, "http://"+s.StatsAddr()+"/metrics"); status != 200 {
		t.Fatalf("metrics before shutdown: %d", status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			_ = c.Close()
			t.Errorf("%s still accepts connections after Shutdown", a)
		}
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// TestShutdownCutsStuckRequest checks that Shutdown returns once its context
// ends even if a handler never finishes on its own.
func TestShutdownCutsStuckRequest(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	s, err := Start(Options{StatsAddr: "127.0.0.1:0", Metrics: func(w io.Writer) {
		close(entered)
		<-release
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	go func() {
		resp, err := noRedirect.Get("http://" + s.StatsAddr() + "/metrics")
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("request never reached the handler")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after its context expired")
	}
}

// TestAdminDNSRebindingGuard: an admin server on a loopback address serves
// requests whose Host is localhost or an IP literal, and refuses any other
// name (a page rebound to 127.0.0.1 by a hostile DNS server); the stats
// server, whose metrics a scraper reaches by any name, is not guarded.
func TestAdminDNSRebindingGuard(t *testing.T) {
	var ready atomic.Bool
	s := startTest(t, fullOptions(&ready))
	for _, tc := range []struct {
		host string
		want int
	}{
		{"", 200}, // the address itself
		{"localhost", 200},
		{"localhost:15000", 200},
		{"LOCALHOST.:15000", 200},
		{"ui.localhost:15000", 200},
		{"127.0.0.1:15000", 200},
		{"[::1]:15000", 200},
		{"10.1.2.3", 200},
		{"evil.example:15000", 403},
		{"evil.example", 403},
		{"localhost.evil.example", 403},
		{"127.0.0.1.nip.io", 403},
	} {
		req, _ := http.NewRequest("GET", "http://"+s.AdminAddr()+"/config_dump", nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q: %d %q, want %d", tc.host, resp.StatusCode, body, tc.want)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+s.StatsAddr()+"/metrics", nil)
	req.Host = "metrics.example"
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("stats by name: %d, want 200", resp.StatusCode)
	}
}

// TestAdminRefusesCrossOriginWrites: a page on another origin cannot have
// its visitor's browser post to the admin server (POST /cel needs no
// preflight as a form); the admin's own origin and tools that send no
// Origin can.
func TestAdminRefusesCrossOriginWrites(t *testing.T) {
	var ready atomic.Bool
	opts := fullOptions(&ready)
	opts.EvalCEL = func([]byte) (any, error) { return true, nil }
	s := startTest(t, opts)
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", 200},
		{"http://" + s.AdminAddr(), 200},
		{"http://evil.example", 403},
		{"null", 403},
	} {
		req, _ := http.NewRequest("POST", "http://"+s.AdminAddr()+"/cel", strings.NewReader(`{"expression":"true"}`))
		req.Header.Set("Content-Type", "text/plain")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Origin %q: %d, want %d", tc.origin, resp.StatusCode, tc.want)
		}
	}
	// A read from another origin is the browser's to withhold (no CORS).
	req, _ := http.NewRequest("GET", "http://"+s.AdminAddr()+"/config_dump", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a cross-origin GET: %d, CORS %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}
