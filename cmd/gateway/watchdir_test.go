package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestWatchSurvivesItsDirectoryReplaced: the directory of the config file,
// or of a credential file it reads (or the one such a file's symlink points
// into), deleted or moved away and then made again, is watched again: the
// file written there is applied, and so is every later change, written in
// place or renamed over. While the directory is missing the watch says it
// cannot watch it, and says when it watches again. inotify drops the watch
// of a deleted directory, and the gateway went on taking it for watched: it
// never noticed a change again.
func TestWatchSurvivesItsDirectoryReplaced(t *testing.T) {
	removed := func(t *testing.T, dir string) {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	movedAway := func(t *testing.T, dir string) {
		if err := os.Rename(dir, dir+".old"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		desc string
		// keys: the directory that goes holds the apiKey keys file, not
		// the config; linked: the file is reached through a symlink in
		// another directory, into the one that goes.
		keys, linked bool
		gone         func(t *testing.T, dir string)
		// warned: it is made again after the watch warned, else at once.
		warned bool
	}{
		{desc: "config directory removed, made again later", gone: removed, warned: true},
		{desc: "config directory removed and made again at once", gone: removed},
		{desc: "config directory moved away, made again later", gone: movedAway, warned: true},
		{desc: "config symlink's target directory removed, made again later", linked: true, gone: removed, warned: true},
		{desc: "keys file directory removed, made again later", keys: true, gone: removed, warned: true},
		{desc: "keys file directory moved away and made again at once", keys: true, gone: movedAway},
		{desc: "keys symlink's target directory removed, made again later", keys: true, linked: true, gone: removed, warned: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			run := filepath.Join(dir, "run") // the directory that goes
			port := freePort(t)
			keysPath := filepath.Join(dir, "keys.yaml")
			cfgPath := filepath.Join(dir, "config.yaml")
			name := "config.yaml"
			if tc.keys {
				name = "keys.yaml"
			}
			at := filepath.Join(run, name) // the file in the directory that goes
			if tc.linked {
				mustMkdir(t, filepath.Join(dir, "etc"))
				mustSymlink(t, filepath.Join("..", "run", name), filepath.Join(dir, "etc", name))
			}
			named := at // the path the gateway is given
			if tc.linked {
				named = filepath.Join(dir, "etc", name)
			}
			if tc.keys {
				keysPath = named
			} else {
				cfgPath = named
			}
			config := func(version string) string {
				return fmt.Sprintf(`binds:
- port: %d
  listeners:
  - routes:
    - matches: [{path: {exact: /direct}}]
      policies:
        directResponse: {status: 200, body: %q}
    - matches: [{path: {exact: /apikey}}]
      policies:
        apiKey: {keys: {file: %q}}
        directResponse: {status: 200, body: ok}
`, port, version, keysPath)
			}
			keys := func(version string) string { return fmt.Sprintf("- {key: key-%s}\n", version) }
			body := func(version string) string {
				if tc.keys {
					return keys(version)
				}
				return config(version)
			}
			mustMkdir(t, run)
			if tc.keys {
				mustWrite(t, cfgPath, config("v1"))
			} else {
				mustWrite(t, keysPath, keys("v1"))
			}
			mustWrite(t, at, body("v1"))
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			// serves waits for the gateway to run version of the file.
			serves := func(p *proc, version string) {
				t.Helper()
				if !tc.keys {
					waitBody(t, base+"/direct", version)
					return
				}
				waitAuthStatus(t, p, base+"/apikey", "Bearer key-"+version, http.StatusOK)
			}
			// No side servers: their OS-chosen ports could take the one
			// freePort just released for the bind.
			p := startProc(t, cfgPath, "ADMIN_ADDR=off", "STATS_ADDR=off", "READINESS_ADDR=off")
			p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
			serves(p, "v1")

			tc.gone(t, run)
			if tc.warned {
				p.waitLog(`cannot watch a directory.*"dir": "` + regexp.QuoteMeta(run) + `"`)
			}
			mustMkdir(t, run)
			mustWrite(t, at, body("v2"))
			serves(p, "v2")
			if tc.warned {
				p.waitLog(`config watch resumed`)
			}
			// Watched again: later changes are seen, however written.
			mustWrite(t, at, body("v3"))
			serves(p, "v3")
			writeConfig(t, at, body("v4"))
			serves(p, "v4")
			if tc.keys {
				waitAuthStatus(t, p, base+"/apikey", "Bearer key-v3", http.StatusUnauthorized)
			}
		})
	}
}
