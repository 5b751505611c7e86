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
	// A UTF-16 file with its byte order mark, as Windows PowerShell's `>`
	// writes it.
	utf16 := filepath.Join(dir, "utf16.yaml")
	utf16Data := []byte{0xff, 0xfe}
	for _, r := range "binds: []\n" {
		utf16Data = append(utf16Data, byte(r), 0)
	}
	os.WriteFile(utf16, utf16Data, 0o644)
	invalid := filepath.Join(dir, "invalid.yaml")
	os.WriteFile(invalid, []byte("binds:\n- port: 0\n  listeners:\n  - protocol: TCP\n    routes:\n    - backends:\n      - host: nope\nextra: 1\n"), 0o644)
	tests := []struct {
		desc     string
		args     []string
		stdin    string
		env      []string
		wantCode int
		want     []string // substrings of stdout+stderr
		notWant  []string // substrings that must not be there
		once     []string // substrings that must be there exactly once
	}{
		{desc: "version", args: []string{"--version"}, want: []string{"gateway dev"}},
		{desc: "validate valid", args: []string{"-f", valid, "--validate-only"}, want: []string{"configuration is valid"}},
		{desc: "validate valid long flag", args: []string{"--file", valid, "--validate-only"}, want: []string{"configuration is valid"}},
		{desc: "validate invalid reports every error", args: []string{"-f", invalid, "--validate-only"}, wantCode: 1, want: []string{
			"binds[0].port: must be >= 1", `unknown field "extra"`, "binds[0].listeners[0].routes[0].backends[0].host: must be host:port", "binds[0].listeners[0].routes: a TCP listener forwards connections: use tcpRoutes"}},
		{desc: "validate compiles: an unreadable key set", args: []string{"-c", "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - policies:\n        jwtAuth: {issuer: i, jwks: {file: " + filepath.Join(dir, "missing.json") + "}}\n      backends: [{host: 127.0.0.1:1}]\n", "--validate-only"}, wantCode: 1, want: []string{
			"binds[0].listeners[0].routes[0].policies.jwtAuth.jwks.file: cannot load key set"}},
		{desc: "validate compiles: every policy error, each at its exact path and line", args: []string{"-c", "binds:\n- port: 3000\n  listeners:\n  - policies:\n      cors: {allowHeaders: ['bad h']}\n    routes:\n    - policies:\n        cors: {allowHeaders: ['bad header']}\n        csrf: {additionalOrigins: [nope]}\n      backends:\n      - host: 127.0.0.1:1\n        policies:\n          requestHeaderModifier: {set: {x-b: \"a\\x01b\"}}\n    - policies:\n        responseHeaderModifier: {add: {x-a: \"a\\x01b\"}}\n", "--validate-only"}, wantCode: 1, want: []string{
			`binds[0].listeners[0].policies.cors.allowHeaders[0]: invalid name "bad h" (line 5:`,
			`binds[0].listeners[0].routes[0].policies.cors.allowHeaders[0]: invalid name "bad header" (line 8:`,
			`binds[0].listeners[0].routes[0].policies.csrf.additionalOrigins[0]: invalid origin "nope"`,
			`(line 9:`,
			`binds[0].listeners[0].routes[0].backends[0].policies.requestHeaderModifier.set.x-b: value`,
			`(line 13:`,
			`binds[0].listeners[0].routes[1].policies.responseHeaderModifier.add.x-a: value`,
			`(line 15:`}},
		{desc: "validate: compile errors beside decode errors, in other routes only", args: []string{"-c", "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - policies:\n        retry: {attempts: 0}\n        cors: {allowHeaders: ['in the same route']}\n      backends: [{host: 127.0.0.1:1}]\n    - policies:\n        cors: {allowHeaders: ['bad header']}\n      backends: [{host: 127.0.0.1:1}]\n", "--validate-only"}, wantCode: 1, want: []string{
			`binds[0].listeners[0].routes[0].policies.retry.attempts: must be >= 1 (line 6:`,
			`binds[0].listeners[0].routes[1].policies.cors.allowHeaders[0]: invalid name "bad header" (line 10:`}, notWant: []string{"in the same route"}},
		{desc: "validate compiles: a prefix rewrite on a route without a prefix match", args: []string{"-c", "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - matches: [{path: {regex: \"/re/(.*)\"}}]\n      policies:\n        urlRewrite: {path: {prefix: /x}}\n      backends: [{host: 127.0.0.1:1}]\n", "--validate-only"}, wantCode: 1, want: []string{
			`binds[0].listeners[0].routes[0].policies.urlRewrite.path.prefix: replaces the path prefix the request matched, and none of the route's matches is a pathPrefix match`, `(line 7:`}},
		{desc: "inline config", args: []string{"-c", "binds: []", "--validate-only"}, want: []string{"<inline config>: configuration is valid"}},
		{desc: "validate: not served yet is refused, as starting refuses it", args: []string{"-c", "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - policies:\n        backendAuth: {gcp: {}}\n      backends: [{host: 127.0.0.1:1}]\n", "--validate-only"}, wantCode: 1, want: []string{
			"<inline config>: invalid configuration:", `binds[0].listeners[0].routes[0].policies.backendAuth.gcp: backend auth "gcp" is implemented for ai backends only yet (line 6:28)`}, notWant: []string{"configuration is valid"}},
		{desc: "stdin config", args: []string{"-f", "-", "--validate-only"}, stdin: "binds: []\n", want: []string{"<stdin>: configuration is valid"}},
		{desc: "embedded quickstart", args: []string{"--validate-only"}, want: []string{"<embedded quickstart>: configuration is valid"}},
		{desc: "undefined env var", args: []string{"-c", "binds:\n- port: $NOT_DEFINED_ANYWHERE\n", "--validate-only"}, wantCode: 1, want: []string{"environment variable NOT_DEFINED_ANYWHERE is not defined"}},
		{desc: "env var expanded", args: []string{"-c", "binds:\n- port: ${GW_TEST_PORT}\n  listeners: []\n", "--validate-only"}, env: []string{"GW_TEST_PORT=4000"}, want: []string{"configuration is valid"}},
		{desc: "file and inline", args: []string{"-f", valid, "-c", "x"}, wantCode: 2, want: []string{"mutually exclusive"}},
		{desc: "missing file", args: []string{"-f", filepath.Join(dir, "nope.yaml")}, wantCode: 1, want: []string{"no such file"}},
		// The error is printed once, before the usage.
		{desc: "unknown flag", args: []string{"--bogus"}, wantCode: 2, once: []string{"gateway: flag provided but not defined: -bogus\n\nUsage: gateway", "flag provided but not defined", "Usage:"}},
		{desc: "flag without its argument", args: []string{"-f"}, wantCode: 2, once: []string{"gateway: flag needs an argument: -f\n\nUsage: gateway", "flag needs an argument", "Usage:"}},
		// The usage has the README's synopsis, and each flag once with
		// its aliases.
		{desc: "help", args: []string{"-h"}, want: []string{"Usage: " + usageLine + "\n", "  -f, --file FILE\n", "  -c, --config CONFIG\n", "  --validate-only\n", "  --version\n", "  --transport std|netpoll\n", "(default std)"},
			notWant: []string{"-file string", "-config string", "  -c string", "\n  -file", "\n  -config"}},
		{desc: "help, long", args: []string{"--help"}, once: []string{"Usage: " + usageLine + "\n"}},
		{desc: "UTF-16 file", args: []string{"-f", utf16, "--validate-only"}, wantCode: 1, want: []string{"utf16.yaml: invalid configuration:", "UTF-16", "it must be UTF-8"}, notWant: []string{"expected map"}},
		{desc: "bad transport", args: []string{"--transport", "carrier-pigeon", "--validate-only"}, wantCode: 2, want: []string{"--transport must be"}},
		// An empty -f or -c (an unset variable in a script) is an error, not
		// the embedded quickstart.
		{desc: "empty -f", args: []string{"-f", "", "--validate-only"}, wantCode: 2, want: []string{"gateway: -f: empty file name"}},
		{desc: "empty -f=", args: []string{"-f=", "--validate-only"}, wantCode: 2, want: []string{"gateway: -f: empty file name"}},
		{desc: "empty --file", args: []string{"--file", "", "--validate-only"}, wantCode: 2, want: []string{"gateway: --file: empty file name"}},
		{desc: "empty -c", args: []string{"-c", "", "--validate-only"}, wantCode: 2, want: []string{"gateway: -c: empty config"}},
		{desc: "empty --config", args: []string{"--config=", "--validate-only"}, wantCode: 2, want: []string{"gateway: --config: empty config"}},
		{desc: "empty -f beside -c", args: []string{"-f", "", "-c", "binds: []", "--validate-only"}, wantCode: 2, want: []string{"gateway: -f: empty file name"}},
		{desc: "empty -f without --validate-only", args: []string{"-f", ""}, wantCode: 2, want: []string{"gateway: -f: empty file name"}},
		// Side-server addresses are checked by --validate-only, from the file
		// (every one, even beside other errors of the section) and from the
		// environment, which wins over the file.
		{desc: "bad side server addresses in the file", args: []string{"-c", "config:\n  adminAddr: garbage\n  statsAddr: 'unix:'\n  readinessAddr: localhost:99999\n  workerThreads: many\n", "--validate-only"}, wantCode: 1, want: []string{
			`config.adminAddr: address "garbage": want host:port, unix:/path or off`,
			`config.statsAddr: address "unix:": empty unix socket path`,
			`config.readinessAddr: address "localhost:99999": port "99999" is not a number in 0..65535`,
			`config.workerThreads: must be`}},
		{desc: "bad side server addresses in the environment", args: []string{"-c", "binds: []", "--validate-only"}, env: []string{"ADMIN_ADDR=garbage", "STATS_ADDR=unix:", "READINESS_ADDR=localhost:99999"}, wantCode: 1, want: []string{
			`ADMIN_ADDR: address "garbage"`, `STATS_ADDR: address "unix:"`, `READINESS_ADDR: address "localhost:99999"`}},
		{desc: "good side server addresses in the environment", args: []string{"-c", "binds: []", "--validate-only"}, env: []string{"ADMIN_ADDR=127.0.0.1:0", "STATS_ADDR=off", "READINESS_ADDR=unix:/tmp/r.sock"}, want: []string{
			"configuration is valid"}},
		{desc: "a bad address in the file, though the environment overrides it", args: []string{"-c", "config: {adminAddr: garbage}", "--validate-only"}, env: []string{"ADMIN_ADDR=127.0.0.1:0"}, wantCode: 1, want: []string{
			`config.adminAddr: address "garbage"`}},
		// Addresses that cannot all be listened on are refused by
		// --validate-only and at start, naming the field to change.
		{desc: "side servers on one address", args: []string{"-c", "config: {adminAddr: '127.0.0.1:19340', statsAddr: '127.0.0.1:19340', readinessAddr: '127.0.0.1:19340'}\nbinds: []", "--validate-only"}, wantCode: 1, want: []string{
			`config.statsAddr: address "127.0.0.1:19340" is also used by config.adminAddr (127.0.0.1:19340) (line 1:`,
			`config.readinessAddr: address "127.0.0.1:19340" is also used by config.adminAddr`}, notWant: []string{"configuration is valid"}},
		{desc: "side servers on one address from the environment", args: []string{"-c", "binds: []", "--validate-only"}, env: []string{"ADMIN_ADDR=off", "STATS_ADDR=127.0.0.1:19341", "READINESS_ADDR=127.0.0.1:19341"}, wantCode: 1, want: []string{
			`READINESS_ADDR: address "127.0.0.1:19341" is also used by STATS_ADDR (127.0.0.1:19341)`}},
		{desc: "a bind on the admin port", args: []string{"-c", "config: {adminAddr: '127.0.0.1:19340', statsAddr: 'off', readinessAddr: 'off'}\nbinds:\n- port: 8080\n  listeners: []\n- port: 19340\n  listeners: []\n", "--validate-only"}, wantCode: 1, want: []string{
			`binds[1].port: port 19340 is also used by config.adminAddr (127.0.0.1:19340) (line 5:9)`}},
		{desc: "a bind on the default stats port", args: []string{"-c", "binds:\n- port: 15020\n  listeners: []\n", "--validate-only"}, env: []string{"ADMIN_ADDR=off", "READINESS_ADDR=off"}, wantCode: 1, want: []string{
			`binds[0].port: port 15020 is also used by config.statsAddr (default 0.0.0.0:15020)`}},
		{desc: "a bind on the admin port at startup", args: []string{"-c", "config: {adminAddr: '127.0.0.1:0', statsAddr: 'off', readinessAddr: 'off'}\nbinds:\n- port: 19342\n  listeners: []\n"}, env: []string{"ADMIN_ADDR=127.0.0.1:19342"}, wantCode: 1, want: []string{
			`failed to start`, `binds[0].port: port 19342 is also used by ADMIN_ADDR (127.0.0.1:19342)`}},
		{desc: "bad side server address in the environment at startup", args: []string{"-c", "binds: []"}, env: []string{"ADMIN_ADDR=garbage"}, wantCode: 1, want: []string{
			`failed to start`, `ADMIN_ADDR: address \"garbage\"`}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			// Bounded: a case that wrongly starts a gateway fails instead of
			// hanging the test.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, gatewayBin, tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatalf("still running after 30s; output:\n%s", out)
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(string(out), w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			for _, w := range tc.once {
				if n := strings.Count(string(out), w); n != 1 {
					t.Errorf("output has %q %d times, want once:\n%s", w, n, out)
				}
			}
		})
	}
}

// TestUsageIsTheREADMEs: the usage line is the README's synopsis of the
// binary.
func TestUsageIsTheREADMEs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## The binary\n\n```\n")
	synopsis, _, _ := strings.Cut(rest, "\n")
	if !ok || synopsis != usageLine {
		t.Fatalf("README synopsis %q; usage line %q", synopsis, usageLine)
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
	return startProcArgs(t, []string{"-f", configPath}, env...)
}

// startProcArgs runs the binary with the given arguments.
func startProcArgs(t *testing.T, args []string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(gatewayBin, args...)
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

// TestNetpollTransportWarns: the netpoll transport, which cannot bound what
// it buffers, says so at startup; the default says nothing of the kind.
func TestNetpollTransportWarns(t *testing.T) {
	for _, tr := range []string{"netpoll", "std"} {
		cfg := filepath.Join(t.TempDir(), "gw.yaml")
		port := freePort(t)
		writeConfig(t, cfg, configWith(port, "ok", "127.0.0.1:1"))
		p := startProcArgs(t, []string{"-f", cfg, "--transport", tr})
		p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
		warned := strings.Contains(p.logs(), "transport netpoll reads every connection into memory")
		if warned != (tr == "netpoll") {
			t.Errorf("transport %s: warned %v:\n%s", tr, warned, p.logs())
		}
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
	// An operator tries a rule against a sample request.
	for _, c := range []struct{ sample, want string }{
		{`{"expression": "request.headers[\"x-role\"] == \"admin\"", "request": {"headers": {"X-Role": "admin"}}}`, `{"result":true}`},
		{`{"expression": "request.path =="}`, `{"error":"invalid CEL expression`},
	} {
		resp, err := http.Post(strings.TrimSuffix(admin, "/ui/")+"/cel", "application/json", strings.NewReader(c.sample))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(body), c.want) {
			t.Fatalf("POST /cel %s: %d %s", c.sample, resp.StatusCode, body)
		}
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
	// ... and the failure is seen beyond the log.
	if code, body := httpGet(t, stats); code != 200 || !strings.Contains(body, `agentgateway_config_reloads_total{result="failure"} 1`) || !strings.Contains(body, "agentgateway_config_last_reload_successful 0") {
		t.Fatalf("metrics after a failed reload %d:\n%s", code, body)
	}
	if code, body := httpGet(t, admin); code != 200 || !strings.Contains(body, "The last reload failed") || !strings.Contains(body, "binds[0].port") {
		t.Fatalf("admin UI after a failed reload %d:\n%s", code, body)
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

// TestReloadFollowsTheResolvedFile: the watch follows what the config path
// resolves to, so a Kubernetes ConfigMap update (a symlink beside the file
// re-pointed to a new directory, the old one deleted) is picked up, as are
// writes in place to a symlink's target in another directory. Each case
// changes the config twice, so the watch must also follow the new target.
func TestReloadFollowsTheResolvedFile(t *testing.T) {
	tests := []struct {
		desc string
		// setup writes the first config (from body) and returns the path
		// the gateway is started with; update makes the config body n.
		setup  func(t *testing.T, dir string, body func(string) string) string
		update func(t *testing.T, dir string, body func(string) string, version string)
	}{
		{
			desc: "kubernetes configmap: ..data symlink swapped",
			setup: func(t *testing.T, dir string, body func(string) string) string {
				cm := filepath.Join(dir, "cm")
				mustMkdir(t, filepath.Join(cm, "..v1"))
				mustWrite(t, filepath.Join(cm, "..v1", "c.yaml"), body("v1"))
				mustSymlink(t, "..v1", filepath.Join(cm, "..data"))
				mustSymlink(t, filepath.Join("..data", "c.yaml"), filepath.Join(cm, "c.yaml"))
				return filepath.Join(cm, "c.yaml")
			},
			update: func(t *testing.T, dir string, body func(string) string, version string) {
				// What kubelet does: a new versioned directory, a temporary
				// symlink to it renamed over ..data, the old directory removed.
				cm := filepath.Join(dir, "cm")
				old, err := os.Readlink(filepath.Join(cm, "..data"))
				if err != nil {
					t.Fatal(err)
				}
				mustMkdir(t, filepath.Join(cm, ".."+version))
				mustWrite(t, filepath.Join(cm, ".."+version, "c.yaml"), body(version))
				mustSymlink(t, ".."+version, filepath.Join(cm, "..data_tmp"))
				if err := os.Rename(filepath.Join(cm, "..data_tmp"), filepath.Join(cm, "..data")); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(cm, old)); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			desc: "symlink to a file in another directory, written in place",
			setup: func(t *testing.T, dir string, body func(string) string) string {
				mustMkdir(t, filepath.Join(dir, "real"))
				mustMkdir(t, filepath.Join(dir, "etc"))
				mustWrite(t, filepath.Join(dir, "real", "c.yaml"), body("v1"))
				mustSymlink(t, filepath.Join("..", "real", "c.yaml"), filepath.Join(dir, "etc", "c.yaml"))
				return filepath.Join(dir, "etc", "c.yaml")
			},
			update: func(t *testing.T, dir string, body func(string) string, version string) {
				mustWrite(t, filepath.Join(dir, "real", "c.yaml"), body(version))
			},
		},
		{
			desc: "symlink itself replaced by rename",
			setup: func(t *testing.T, dir string, body func(string) string) string {
				mustWrite(t, filepath.Join(dir, "v1.yaml"), body("v1"))
				mustSymlink(t, "v1.yaml", filepath.Join(dir, "c.yaml"))
				return filepath.Join(dir, "c.yaml")
			},
			update: func(t *testing.T, dir string, body func(string) string, version string) {
				mustWrite(t, filepath.Join(dir, version+".yaml"), body(version))
				mustSymlink(t, version+".yaml", filepath.Join(dir, "c.tmp"))
				if err := os.Rename(filepath.Join(dir, "c.tmp"), filepath.Join(dir, "c.yaml")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			desc: "plain file written in place",
			setup: func(t *testing.T, dir string, body func(string) string) string {
				mustWrite(t, filepath.Join(dir, "c.yaml"), body("v1"))
				return filepath.Join(dir, "c.yaml")
			},
			update: func(t *testing.T, dir string, body func(string) string, version string) {
				mustWrite(t, filepath.Join(dir, "c.yaml"), body(version))
			},
		},
		{
			// Each event in the directory put the reload off by the
			// settle time: a log written beside the config every few
			// milliseconds put it off for ever.
			desc: "plain file written in place, a log beside it written without pause",
			setup: func(t *testing.T, dir string, body func(string) string) string {
				mustWrite(t, filepath.Join(dir, "c.yaml"), body("v1"))
				log, err := os.Create(filepath.Join(dir, "busy.log"))
				if err != nil {
					t.Fatal(err)
				}
				stop, done := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					tick := time.NewTicker(5 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							_, _ = log.WriteString("a line\n")
						}
					}
				}()
				t.Cleanup(func() {
					close(stop)
					<-done
					log.Close()
				})
				return filepath.Join(dir, "c.yaml")
			},
			update: func(t *testing.T, dir string, body func(string) string, version string) {
				mustWrite(t, filepath.Join(dir, "c.yaml"), body(version))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			port := freePort(t)
			body := func(version string) string { return configWith(port, version, "127.0.0.1:1") }
			dir := t.TempDir()
			// No side servers: their OS-chosen ports could take the one
			// freePort just released for the bind.
			p := startProc(t, tc.setup(t, dir, body), "ADMIN_ADDR=off", "STATS_ADDR=off", "READINESS_ADDR=off")
			p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
			url := fmt.Sprintf("http://127.0.0.1:%d/direct", port)
			waitBody(t, url, "v1")
			for _, version := range []string{"v2", "v3"} {
				tc.update(t, dir, body, version)
				waitBody(t, url, version)
			}
		})
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// mustWrite writes in place (truncate, then write).
func mustWrite(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestConfigDumpFeedsBack: what /config_dump serves is a config file the
// gateway accepts, with the settings written in file form (the log level
// as "info,access=warn", not a Go struct).
func TestConfigDumpFeedsBack(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := strings.Replace(configWith(port, "v1", "127.0.0.1:1"), "config:\n", `config:
  logging: {level: "info,access=warn", format: json}
  workerThreads: 2
  connectionTerminationDeadline: 3s
`, 1) + `        weight: 2
        policies:
          http: {requestTimeout: 1s}
    - name: bytes
      matches: [{path: {regex: "/b[0-9]+"}, headers: [{name: x-a, value: {exact: "a\u0001"}}]}]
      policies:
        directResponse: {status: 200, body: [255, 0, 1]}
`
	writeConfig(t, path, cfg)
	p := startProc(t, path)
	admin := p.waitLog(`admin UI available at (http://\S+)/ui/`)[1]
	code, dump := httpGet(t, admin+"/config_dump")
	if code != http.StatusOK {
		t.Fatalf("config_dump %d: %s", code, dump)
	}
	var parsed struct {
		Config struct {
			Logging       map[string]any `json:"logging"`
			WorkerThreads any            `json:"workerThreads"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(dump), &parsed); err != nil {
		t.Fatalf("config_dump is not JSON: %v\n%s", err, dump)
	}
	if got := parsed.Config.Logging["level"]; got != "info,access=warn" {
		t.Errorf("config.logging.level = %#v, want \"info,access=warn\"", got)
	}
	if got := parsed.Config.WorkerThreads; got != 2.0 {
		t.Errorf("config.workerThreads = %#v, want 2", got)
	}
	dumpPath := filepath.Join(dir, "dump.json")
	if err := os.WriteFile(dumpPath, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gatewayBin, "-f", dumpPath, "--validate-only").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration is valid") {
		t.Fatalf("the dump fed back: %v\n%s\ndump:\n%s", err, out, dump)
	}
}
