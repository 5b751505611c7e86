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
