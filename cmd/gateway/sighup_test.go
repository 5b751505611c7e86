package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/server"
)

// TestSIGHUPReloads: SIGHUP reads the config file again and applies it,
// as nginx and HAProxy do, and the gateway serves on; with an inline
// config there is nothing to read again, and it serves on too. Unhandled,
// SIGHUP ended the process.
func TestSIGHUPReloads(t *testing.T) {
	port := freePort(t)
	body := func(version string) string { return configWith(port, version, "127.0.0.1:1") }
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(body("v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, path, "ADMIN_ADDR=off", "STATS_ADDR=off", "READINESS_ADDR=off")
	p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
	url := fmt.Sprintf("http://127.0.0.1:%d/direct", port)
	waitBody(t, url, "v1")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(`reload requested`)
	p.waitLog(`config reloaded`)
	waitBody(t, url, "v1")

	port2 := freePort(t)
	q := startProcArgs(t, []string{"-c", configWith(port2, "inline", "127.0.0.1:1")}, "ADMIN_ADDR=off", "STATS_ADDR=off", "READINESS_ADDR=off")
	q.waitLog(fmt.Sprintf(`listening.*"port": %d`, port2))
	if err := q.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	q.waitLog(`nothing to read again`)
	waitBody(t, fmt.Sprintf("http://127.0.0.1:%d/direct", port2), "inline")
}

// blankConfigs are files that hold nothing: white space and comments, an
// empty or null document, a `binds:` with no value (a file caught after its
// config section). Each would run no listener.
var blankConfigs = []string{
	"\n# being rewritten\n  \n",
	"---\n",
	"...\n",
	"--- # c\n...\n",
	"null\n",
	"~\n",
	"config: {adminAddr: 127.0.0.1:0}\nbinds:\n",
	"binds: null\n",
}

// TestBlankConfigNotReloaded: a config file that holds nothing (caught
// mid-write by a tool that truncates it first, or emptied by mistake) is
// not applied on reload: it would stop every listener until the next
// change. The running config stays, the failure is logged; `binds: []`
// still stops them on purpose.
func TestBlankConfigNotReloaded(t *testing.T) {
	port := freePort(t)
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(configWith(port, "v1", "127.0.0.1:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, path, "ADMIN_ADDR=off", "STATS_ADDR=off", "READINESS_ADDR=off")
	p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
	url := fmt.Sprintf("http://127.0.0.1:%d/direct", port)
	waitBody(t, url, "v1")
	// End to end, one of them; TestBlankReloadRefused has each.
	if err := os.WriteFile(path, []byte(blankConfigs[len(blankConfigs)-2]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(`config reload failed; keeping the running config.*holds nothing`)
	waitBody(t, url, "v1")
	if err := os.WriteFile(path, []byte("binds: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(`config reloaded`)
}

// TestBlankConfigRefusedAtStart: a config that holds nothing is refused at
// start and by --validate-only, with the reload's message.
func TestBlankConfigRefusedAtStart(t *testing.T) {
	for _, blank := range blankConfigs {
		for _, validate := range []bool{true, false} {
			args := []string{"-f", "-"}
			if validate {
				args = append(args, "--validate-only")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := exec.CommandContext(ctx, gatewayBin, args...)
			cmd.Stdin = strings.NewReader(blank)
			cmd.Env = append(os.Environ(), "ADMIN_ADDR=off", "STATS_ADDR=off", "READINESS_ADDR=off")
			out, err := cmd.CombinedOutput()
			cancel()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), errBlank.Error()) {
				t.Errorf("%q (validate %v): %v, want exit 1 with %q:\n%s", blank, validate, err, errBlank, out)
			}
		}
	}
}

// TestBlankReloadRefused: each config that holds nothing is refused by
// reload, and the running binds serve on; `binds: []` is applied.
func TestBlankReloadRefused(t *testing.T) {
	port := freePort(t)
	first, err := config.Parse([]byte(configWith(port, "v1", "127.0.0.1:1")), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	p := &process{log: zap.NewNop(), src: newSource(options{file: "c.yaml"}, nil), gw: server.New(server.Options{BindHost: "127.0.0.1"})}
	if err := p.gw.Apply(first); err != nil {
		t.Fatal(err)
	}
	defer p.gw.Shutdown(context.Background())
	url := fmt.Sprintf("http://127.0.0.1:%d/direct", port)
	waitBody(t, url, "v1")
	for _, blank := range blankConfigs {
		if p.reload([]byte(blank), nil) {
			t.Errorf("%q: applied", blank)
		}
		waitBody(t, url, "v1")
	}
	if !p.reload([]byte("binds: []\n"), nil) {
		t.Error("binds: [] refused")
	}
}

// TestReloadWarnsOfStartOnlySettings: a reload that changes a setting read
// only at start is applied, and warns that the setting needs a restart,
// naming it; one the environment overrides, or written as its default, is
// no change.
func TestReloadWarnsOfStartOnlySettings(t *testing.T) {
	const first = "config: {adminAddr: 'off', statsAddr: 'off', logging: {level: info}, connectionTerminationDeadline: 5s}\nbinds: []\n"
	for _, tc := range []struct {
		desc, next string
		env        []string
		want       []string
	}{
		{"unchanged", first, nil, nil},
		{"other settings", "config: {adminAddr: 'off', statsAddr: 'off', logging: {level: info}, connectionTerminationDeadline: 5s, backend: {connectTimeout: 1s}}\nbinds: []\n", nil, nil},
		{"the default written out", "config: {adminAddr: 'off', statsAddr: 'off', readinessAddr: '0.0.0.0:15021', logging: {level: info, format: text}, connectionTerminationDeadline: 5s}\nbinds: []\n", nil, nil},
		{"side servers", "config: {adminAddr: '127.0.0.1:0', readinessAddr: '127.0.0.1:0', logging: {level: info}, connectionTerminationDeadline: 5s}\nbinds: []\n", nil,
			[]string{"config.adminAddr", "config.statsAddr", "config.readinessAddr"}},
		{"overridden by the environment", "config: {adminAddr: '127.0.0.1:0', statsAddr: 'off', logging: {level: info}, connectionTerminationDeadline: 5s}\nbinds: []\n", []string{"ADMIN_ADDR=off"}, nil},
		{"logging, threads and deadlines", "config: {adminAddr: 'off', statsAddr: 'off', logging: {level: debug}, workerThreads: 2, connectionMinTerminationDeadline: 1s}\nbinds: []\n", nil,
			[]string{"config.logging", "config.workerThreads", "config.connectionTerminationDeadline", "config.connectionMinTerminationDeadline"}},
		{"no config section", "binds: []\n", nil,
			[]string{"config.adminAddr", "config.statsAddr", "config.connectionTerminationDeadline"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, name := range []string{"ADMIN_ADDR", "STATS_ADDR", "READINESS_ADDR", "CONNECTION_TERMINATION_DEADLINE", "CONNECTION_MIN_TERMINATION_DEADLINE"} {
				t.Setenv(name, "") // as unset
			}
			for _, e := range tc.env {
				name, value, _ := strings.Cut(e, "=")
				t.Setenv(name, value)
			}
			f, err := config.Parse([]byte(first), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.InfoLevel)
			p := &process{log: zap.New(core), first: f, src: newSource(options{file: "c.yaml"}, nil), gw: server.New(server.Options{BindHost: "127.0.0.1"})}
			defer p.gw.Shutdown(context.Background())
			if err := p.gw.Apply(f); err != nil {
				t.Fatal(err)
			}
			if !p.reload([]byte(tc.next), nil) {
				t.Fatalf("not reloaded:\n%v", logs.All())
			}
			var got []string
			for _, e := range logs.FilterMessageSnippet("read only at start").All() {
				if e.Level != zap.WarnLevel {
					t.Errorf("logged at %v", e.Level)
				}
				got = append(got, e.ContextMap()["field"].(string))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("warned of %q, want %q", got, tc.want)
			}
			// The running config, as /config_dump shows it, holds the
			// values in effect: those the process started with.
			dump, err := p.gw.ConfigDump()
			if err != nil {
				t.Fatal(err)
			}
			dumped, err := config.Parse(dump, func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatalf("the dump does not parse: %v\n%s", err, dump)
			}
			for _, s := range startOnly {
				if was, is := s.get(f.Config), s.get(settingsOf(dumped)); !reflect.DeepEqual(was, is) {
					t.Errorf("the dump shows %s as reloaded (%v), not as in effect (%v):\n%s", s.field, is, was, dump)
				}
			}
		})
	}
}

// TestConfigDumpKeepsStartOnlySettings: after a reload that changes
// settings read only at start, /config_dump shows the reloaded file with
// the values in effect for those, the ones the process started with (the
// admin server still on its first address), not the new ones it warns of.
func TestConfigDumpKeepsStartOnlySettings(t *testing.T) {
	// Short: a unix socket's path is at most 107 bytes.
	sockets, err := os.MkdirTemp("", "gwdump")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockets) })
	first, next := filepath.Join(sockets, "a.sock"), filepath.Join(sockets, "b.sock")
	port := freePort(t)
	cfg := func(admin, level string, threads int, deadline, body string) string {
		return fmt.Sprintf(`config:
  adminAddr: unix:%s
  statsAddr: "off"
  readinessAddr: "off"
  logging: {level: %s}
  workerThreads: %d
  connectionTerminationDeadline: %s
binds:
- port: %d
  listeners:
  - routes:
    - policies: {directResponse: {status: 200, body: %s}}
`, admin, level, threads, deadline, port, body)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	writeConfig(t, path, cfg(first, "info", 1, "3s", "v1"))
	p := startProc(t, path, "ADMIN_ADDR=", "STATS_ADDR=", "READINESS_ADDR=", "WORKER_THREADS=", "CONNECTION_TERMINATION_DEADLINE=")
	p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitBody(t, url, "v1")

	writeConfig(t, path, cfg(next, "debug", 2, "7s", "v2"))
	waitBody(t, url, "v2")
	for _, field := range []string{"config.adminAddr", "config.logging", "config.workerThreads", "config.connectionTerminationDeadline"} {
		p.waitLog(`read only at start.*"field": "` + regexp.QuoteMeta(field) + `"`)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", first)
		},
	}}
	resp, err := client.Get("http://admin/config_dump")
	if err != nil {
		t.Fatalf("the admin server left its first address: %v\n%s", err, p.logs())
	}
	dump, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Config struct {
			AdminAddr     string `json:"adminAddr"`
			Logging       struct{ Level string }
			WorkerThreads any    `json:"workerThreads"`
			Deadline      string `json:"connectionTerminationDeadline"`
		} `json:"config"`
	}
	if err := json.Unmarshal(dump, &got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("config_dump %d: %v\n%s", resp.StatusCode, err, dump)
	}
	c := got.Config
	if c.AdminAddr != "unix:"+first || c.Logging.Level != "info" || c.WorkerThreads != 1.0 || c.Deadline != "3s" {
		t.Errorf("the dump shows adminAddr %q, logging.level %q, workerThreads %v, connectionTerminationDeadline %q; want the values in effect, %q, info, 1, 3s:\n%s",
			c.AdminAddr, c.Logging.Level, c.WorkerThreads, c.Deadline, "unix:"+first, dump)
	}
	if !strings.Contains(string(dump), `"v2"`) {
		t.Errorf("the dump does not hold the reloaded routes:\n%s", dump)
	}
}
