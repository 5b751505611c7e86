package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
	if err := os.WriteFile(path, []byte("\n# being rewritten\n  \n"), 0o644); err != nil {
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
