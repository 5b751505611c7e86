package main

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// credentialStore is a way credential files are kept on disk and replaced.
type credentialStore struct {
	desc string
	// setup writes the files (name -> content) under dir and returns the
	// paths the config names them by.
	setup func(t *testing.T, dir string, files map[string]string) map[string]string
	// update makes the file name hold files[name]; files holds every
	// file's current content.
	update func(t *testing.T, dir string, files map[string]string, name string)
}

// credentialStores are how operators and orchestrators replace files.
var credentialStores = []credentialStore{
	{
		desc: "written in place",
		setup: func(t *testing.T, dir string, files map[string]string) map[string]string {
			paths := map[string]string{}
			for name, body := range files {
				paths[name] = filepath.Join(dir, "creds", name)
				mustMkdir(t, filepath.Dir(paths[name]))
				mustWrite(t, paths[name], body)
			}
			return paths
		},
		update: func(t *testing.T, dir string, files map[string]string, name string) {
			mustWrite(t, filepath.Join(dir, "creds", name), files[name])
		},
	},
	{
		desc: "replaced by rename",
		setup: func(t *testing.T, dir string, files map[string]string) map[string]string {
			paths := map[string]string{}
			for name, body := range files {
				paths[name] = filepath.Join(dir, "creds", name)
				mustMkdir(t, filepath.Dir(paths[name]))
				mustWrite(t, paths[name], body)
			}
			return paths
		},
		update: func(t *testing.T, dir string, files map[string]string, name string) {
			writeConfig(t, filepath.Join(dir, "creds", name), files[name])
		},
	},
	{
		desc: "kubernetes secret: ..data symlink swapped",
		setup: func(t *testing.T, dir string, files map[string]string) map[string]string {
			secret := filepath.Join(dir, "secret")
			mustMkdir(t, filepath.Join(secret, "..v0"))
			paths := map[string]string{}
			for name, body := range files {
				mustWrite(t, filepath.Join(secret, "..v0", name), body)
				mustSymlink(t, filepath.Join("..data", name), filepath.Join(secret, name))
				paths[name] = filepath.Join(secret, name)
			}
			mustSymlink(t, "..v0", filepath.Join(secret, "..data"))
			return paths
		},
		update: func(t *testing.T, dir string, files map[string]string, _ string) {
			// What kubelet does: every file in a new versioned directory, a
			// temporary symlink to it renamed over ..data, the old
			// directory removed.
			secret := filepath.Join(dir, "secret")
			old, err := os.Readlink(filepath.Join(secret, "..data"))
			if err != nil {
				t.Fatal(err)
			}
			version := fmt.Sprintf("..v%d", time.Now().UnixNano())
			mustMkdir(t, filepath.Join(secret, version))
			for name, body := range files {
				mustWrite(t, filepath.Join(secret, version, name), body)
			}
			mustSymlink(t, version, filepath.Join(secret, "..data_tmp"))
			if err := os.Rename(filepath.Join(secret, "..data_tmp"), filepath.Join(secret, "..data")); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(secret, old)); err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		desc: "symlink to a file in another directory, written in place",
		setup: func(t *testing.T, dir string, files map[string]string) map[string]string {
			mustMkdir(t, filepath.Join(dir, "real"))
			mustMkdir(t, filepath.Join(dir, "etc"))
			paths := map[string]string{}
			for name, body := range files {
				mustWrite(t, filepath.Join(dir, "real", name), body)
				mustSymlink(t, filepath.Join("..", "real", name), filepath.Join(dir, "etc", name))
				paths[name] = filepath.Join(dir, "etc", name)
			}
			return paths
		},
		update: func(t *testing.T, dir string, files map[string]string, name string) {
			mustWrite(t, filepath.Join(dir, "real", name), files[name])
		},
	},
}

// htpasswdSHA is an htpasswd line for user with password in the {SHA}
// scheme (quick to check).
func htpasswdSHA(user, password string) string {
	sum := sha1.Sum([]byte(password))
	return user + ":{SHA}" + base64.StdEncoding.EncodeToString(sum[:]) + "\n"
}

// TestCredentialFilesReload: replacing an apiKey key file, a basicAuth
// htpasswd file or a jwtAuth key set file (not the config) takes effect
// without a restart: the old credential is refused and the new one let in,
// however the file is replaced; a file replaced by a broken one keeps the
// running config, with an error in the log.
func TestCredentialFilesReload(t *testing.T) {
	oldIssuer, newIssuer := jwttest.NewIssuer(t, "ES256"), jwttest.NewIssuer(t, "ES256")
	oldToken := oldIssuer.Sign(oldIssuer.Claims("alice"))
	newToken := newIssuer.Sign(newIssuer.Claims("alice"))
	type credential struct {
		desc, file, path string
		oldBody, newBody string
		// broken is a content that cannot load, and the error it logs.
		broken, brokenErr string
		oldAuth, newAuth  string // the Authorization header
	}
	creds := []credential{
		{
			desc: "apiKey keys file", file: "keys.yaml", path: "/apikey",
			oldBody: "- {key: key-old-1}\n", newBody: "- {key: key-new-2}\n",
			broken: "- {key: key-new-2}\n- {key: key-new-2}\n", brokenErr: `apiKey.keys.file`,
			oldAuth: "Bearer key-old-1", newAuth: "Bearer key-new-2",
		},
		{
			desc: "basicAuth htpasswd file", file: "users.htpasswd", path: "/basic",
			oldBody: htpasswdSHA("alice", "old-pw"), newBody: htpasswdSHA("alice", "new-pw"),
			broken: "alice:new-pw\n", brokenErr: `basicAuth.htpasswd.file`,
			oldAuth: "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:old-pw")),
			newAuth: "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:new-pw")),
		},
		{
			desc: "jwtAuth key set file", file: "jwks.json", path: "/jwt",
			oldBody: string(oldIssuer.JWKS()), newBody: string(newIssuer.JWKS()),
			broken: `{"keys": [}`, brokenErr: `jwtAuth.jwks`,
			oldAuth: "Bearer " + oldToken, newAuth: "Bearer " + newToken,
		},
	}
	for _, store := range credentialStores {
		t.Run(store.desc, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{}
			for _, c := range creds {
				files[c.file] = c.oldBody
			}
			paths := store.setup(t, dir, files)
			port := freePort(t)
			cfg := filepath.Join(dir, "config.yaml")
			writeConfig(t, cfg, fmt.Sprintf(`binds:
- port: %d
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /apikey}}]
      policies:
        apiKey: {keys: {file: %q}}
        directResponse: {status: 200, body: ok}
    - matches: [{path: {pathPrefix: /basic}}]
      policies:
        basicAuth: {htpasswd: {file: %q}}
        directResponse: {status: 200, body: ok}
    - matches: [{path: {pathPrefix: /jwt}}]
      policies:
        jwtAuth: {issuer: %q, audiences: [%q], jwks: {file: %q}}
        directResponse: {status: 200, body: ok}
`, port, paths["keys.yaml"], paths["users.htpasswd"], jwttest.DefaultIssuer, jwttest.DefaultAudience, paths["jwks.json"]))
			// No side servers: their OS-chosen ports could take the one
			// freePort just released for the bind.
			p := startProc(t, cfg, "ADMIN_ADDR=off", "STATS_ADDR=off", "READINESS_ADDR=off")
			p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			for _, c := range creds {
				waitAuthStatus(t, p, base+c.path, c.oldAuth, http.StatusOK)
				waitAuthStatus(t, p, base+c.path, c.newAuth, http.StatusUnauthorized)
			}
			// One file at a time: each change alone must reload.
			for _, c := range creds {
				files[c.file] = c.newBody
				store.update(t, dir, files, c.file)
				waitAuthStatus(t, p, base+c.path, c.oldAuth, http.StatusUnauthorized)
				waitAuthStatus(t, p, base+c.path, c.newAuth, http.StatusOK)
			}
			// A broken file is refused as a broken config is: the running
			// one stays.
			for _, c := range creds {
				failures := p.countLog(`config reload failed.*` + regexp.QuoteMeta(c.brokenErr))
				files[c.file] = c.broken
				store.update(t, dir, files, c.file)
				p.waitCount(`config reload failed.*`+regexp.QuoteMeta(c.brokenErr), failures+1)
				if got := authStatus(t, base+c.path, c.newAuth); got != http.StatusOK {
					t.Fatalf("%s: after a broken file, the credential in force got %d, want 200:\n%s", c.desc, got, p.logs())
				}
				files[c.file] = c.newBody
				store.update(t, dir, files, c.file)
			}
		})
	}
}

// authStatus is the status of a GET of url with the Authorization header.
func authStatus(t *testing.T, url, authorization string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authorization)
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitAuthStatus polls url with the Authorization header until it answers
// want.
func waitAuthStatus(t *testing.T, p *proc, url, authorization string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := authStatus(t, url, authorization)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s with %.12s...: status %d, want %d:\n%s", url, authorization, got, want, p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countLog counts the log lines matching re.
func (p *proc) countLog(re string) int {
	rx := regexp.MustCompile(re)
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if rx.MatchString(l) {
			n++
		}
	}
	return n
}

// waitCount waits until n log lines match re.
func (p *proc) waitCount(re string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.countLog(re) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("fewer than %d log lines matching %q:\n%s", n, re, strings.TrimSpace(p.logs()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
