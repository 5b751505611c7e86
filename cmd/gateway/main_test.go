package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var gatewayBin string

// TestMain builds the real binary once; the end-to-end tests run it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gateway-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	out, err := exec.Command("go", "build", "-race", "-o", gatewayBin, ".").CombinedOutput()
	if err != nil {
		// -race needs cgo; fall back to a plain build.
		out, err = exec.Command("go", "build", "-o", gatewayBin, ".").CombinedOutput()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "building gateway: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort asks the OS for a free loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.yaml")
	os.WriteFile(valid, []byte("binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: 127.0.0.1:8080\n"), 0o644)
	invalid := filepath.Join(dir, "invalid.yaml")
	os.WriteFile(invalid, []byte("binds:\n- port: 0\n  listeners:\n  - protocol: TCP\n    routes:\n    - backends:\n      - host: nope\nextra: 1\n"), 0o644)
	tests := []struct {
		desc     string
		args     []string
		stdin    string
		env      []string
		wantCode int
		want     []string // substrings of stdout+stderr
	}{
		{desc: "version", args: []string{"--version"}, want: []string{"gateway dev"}},
		{desc: "validate valid", args: []string{"-f", valid, "--validate-only"}, want: []string{"configuration is valid"}},
		{desc: "validate valid long flag", args: []string{"--file", valid, "--validate-only"}, want: []string{"configuration is valid"}},
		{desc: "validate invalid reports every error", args: []string{"-f", invalid, "--validate-only"}, wantCode: 1, want: []string{
			"binds[0].port: must be >= 1", `unknown field "extra"`, "binds[0].listeners[0].routes[0].backends[0].host: must be host:port", "TCP listeners are not supported yet"}},
		{desc: "validate compiles: an unreadable key set", args: []string{"-c", "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - policies:\n        jwtAuth: {issuer: i, jwks: {file: " + filepath.Join(dir, "missing.json") + "}}\n      backends: [{host: 127.0.0.1:1}]\n", "--validate-only"}, wantCode: 1, want: []string{
			"binds[0].listeners[0].routes[0].policies.jwtAuth.jwks.file: cannot load key set"}},
		{desc: "validate compiles: every policy error, each at its exact path", args: []string{"-c", "binds:\n- port: 3000\n  listeners:\n  - policies:\n      cors: {allowHeaders: ['bad h']}\n    routes:\n    - policies:\n        cors: {allowHeaders: ['bad header']}\n        csrf: {additionalOrigins: [nope]}\n      backends:\n      - host: 127.0.0.1:1\n        policies:\n          requestHeaderModifier: {set: {x-b: \"a\\x01b\"}}\n    - policies:\n        responseHeaderModifier: {add: {x-a: \"a\\x01b\"}}\n", "--validate-only"}, wantCode: 1, want: []string{
			`binds[0].listeners[0].policies.cors.allowHeaders[0]: invalid name "bad h"`,
			`binds[0].listeners[0].routes[0].policies.cors.allowHeaders[0]: invalid name "bad header"`,
			`binds[0].listeners[0].routes[0].policies.csrf.additionalOrigins[0]: invalid origin "nope"`,
			`binds[0].listeners[0].routes[0].backends[0].policies.requestHeaderModifier.set.x-b: value`,
			`binds[0].listeners[0].routes[1].policies.responseHeaderModifier.add.x-a: value`}},
		{desc: "inline config", args: []string{"-c", "binds: []", "--validate-only"}, want: []string{"<inline config>: configuration is valid"}},
		{desc: "stdin config", args: []string{"-f", "-", "--validate-only"}, stdin: "binds: []\n", want: []string{"<stdin>: configuration is valid"}},
		{desc: "embedded quickstart", args: []string{"--validate-only"}, want: []string{"<embedded quickstart>: configuration is valid"}},
		{desc: "undefined env var", args: []string{"-c", "binds:\n- port: $NOT_DEFINED_ANYWHERE\n", "--validate-only"}, wantCode: 1, want: []string{"environment variable NOT_DEFINED_ANYWHERE is not defined"}},
		{desc: "env var expanded", args: []string{"-c", "binds:\n- port: ${GW_TEST_PORT}\n  listeners: []\n", "--validate-only"}, env: []string{"GW_TEST_PORT=4000"}, want: []string{"configuration is valid"}},
		{desc: "file and inline", args: []string{"-f", valid, "-c", "x"}, wantCode: 2, want: []string{"mutually exclusive"}},
		{desc: "missing file", args: []string{"-f", filepath.Join(dir, "nope.yaml")}, wantCode: 1, want: []string{"no such file"}},
		{desc: "unknown flag", args: []string{"--bogus"}, wantCode: 2, want: []string{"flag provided but not defined"}},
		{desc: "bad transport", args: []string{"--transport", "carrier-pigeon", "--validate-only"}, wantCode: 2, want: []string{"--transport must be"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			cmd := exec.Command(gatewayBin, tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// proc is a running gateway binary whose log lines are collected.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
	code  int
}

func startProc(t *testing.T, configPath string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(gatewayBin, "-f", configPath)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitLog waits for a log line matching re and returns its submatches.
func (p *proc) waitLog(re string) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if m := rx.FindStringSubmatch(l); m != nil {
				p.mu.Unlock()
				return m
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			p.t.Fatalf("gateway exited (code %d) before logging %q:\n%s", p.code, re, p.logs())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no log line matching %q:\n%s", re, p.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	// Write beside and rename, as editors and orchestrators do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func configWith(port int, body string, upstream string) string {
	return fmt.Sprintf(`config:
  adminAddr: 127.0.0.1:0
  statsAddr: 127.0.0.1:0
  readinessAddr: 127.0.0.1:0
binds:
- port: %d
  listeners:
  - routes:
    - name: direct
      matches:
      - path: {exact: /direct}
      policies:
        directResponse: {status: 200, body: %q}
    - name: proxied
      backends:
      - host: %s
`, port, body, upstream)
}

// TestBinaryEndToEnd runs the real binary: startup logs, proxying, the side
// servers, hot reload (valid and invalid), and graceful shutdown draining an
// in-flight request.
func TestBinaryEndToEnd(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	entered := make(chan struct{}, 1)
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "upstream:"+r.URL.Path)
	})}
	go upSrv.Serve(upLn)
	t.Cleanup(func() { upSrv.Close() })

	port := freePort(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeConfig(t, path, configWith(port, "v1", upLn.Addr().String()))
	p := startProc(t, path, "TERMINATION_GRACE_PERIOD_SECONDS=10", "CONNECTION_MIN_TERMINATION_DEADLINE=0")

	p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
	admin := p.waitLog(`admin UI available at (http://\S+/ui/)`)[1]
	stats := "http://" + p.waitLog(`listener established.*"address": "(\S+)", "component": "stats"`)[1] + "/metrics"
	ready := "http://" + p.waitLog(`listener established.*"address": "(\S+)", "component": "readiness"`)[1] + "/healthz/ready"
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	if code, body := httpGet(t, base+"/direct"); code != 200 || body != "v1" {
		t.Fatalf("direct: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/x"); code != 200 || body != "upstream:/x" {
		t.Fatalf("proxied: %d %q", code, body)
	}
	if code, _ := httpGet(t, ready); code != 200 {
		t.Fatalf("readiness %d", code)
	}
	if code, body := httpGet(t, admin); code != 200 || !strings.Contains(body, "proxied") {
		t.Fatalf("admin UI %d:\n%s", code, body)
	}
	code, dump := httpGet(t, strings.TrimSuffix(admin, "/ui/")+"/config_dump")
	var parsed map[string]any
	if code != 200 || json.Unmarshal([]byte(dump), &parsed) != nil || parsed["binds"] == nil {
		t.Fatalf("config_dump %d: %s", code, dump)
	}
	if code, body := httpGet(t, stats); code != 200 || !strings.Contains(body, `agentgateway_requests_total{route="proxied"`) {
		t.Fatalf("metrics %d:\n%s", code, body)
	}

	// A valid change is picked up.
	writeConfig(t, path, configWith(port, "v2", upLn.Addr().String()))
	waitBody(t, base+"/direct", "v2")
	// An invalid file is refused and the running config stays.
	writeConfig(t, path, "binds:\n- port: nope\n")
	p.waitLog(`config reload failed.*binds\[0\]\.port`)
	if code, body := httpGet(t, base+"/direct"); code != 200 || body != "v2" {
		t.Fatalf("after invalid reload: %d %q", code, body)
	}

	// Graceful shutdown: an in-flight request finishes, then the process exits 0.
	result := make(chan string, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			result <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		result <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("slow request never reached the upstream")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog(`shutting down`)
	waitStatus(t, ready, http.StatusServiceUnavailable, p)
	releaseOnce.Do(func() { close(release) })
	select {
	case r := <-result:
		if r != "200 upstream:/slow" {
			t.Fatalf("in-flight request got %s", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight request did not finish")
	}
	select {
	case <-p.done:
		if p.code != 0 {
			t.Fatalf("exit code %d:\n%s", p.code, p.logs())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("gateway did not exit after SIGTERM")
	}
}

func waitBody(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := httpGet(t, url)
		if body == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: body %q, want %q", url, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus polls url until it answers status; the readiness server may
// already be closed when the process finishes draining, which also ends the wait.
func waitStatus(t *testing.T, url string, status int, p *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == status {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d:\n%s", url, status, p.logs())
}
