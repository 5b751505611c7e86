package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelativeFileNotFound: a file the config names by a relative path
// that is not found is a load error saying where relative paths are read
// from (the working directory, as agentgateway reads them); an absolute
// path not found is not.
func TestRelativeFileNotFound(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	hint := " (relative paths are read from the working directory, " + wd + ")"
	absent := filepath.Join(t.TempDir(), "absent.pem")
	f := parseConfig(t, `
binds:
- port: 3000
  listeners:
  - protocol: HTTPS
    tls: {cert: missing/api.crt, key: missing/api.key, root: missing/ca.pem}
    routes:
    - policies:
        basicAuth: {htpasswd: {file: missing/htpasswd}}
      backends: [{host: 127.0.0.1:1}]
  - protocol: HTTPS
    hostname: abs.test
    tls: {cert: '`+absent+`', key: '`+absent+`'}
    routes:
    - backends: [{host: 127.0.0.1:1}]
- port: 3001
  listeners:
  - routes:
    - name: keys
      policies:
        apiKey: {keys: {file: missing/keys.json}}
      backends: [{host: 127.0.0.1:1}]
    - name: jwt
      policies:
        jwtAuth: {issuer: i, jwks: {file: missing/jwks.json}}
      backends: [{host: 127.0.0.1:1}]
    - name: upstreamTLS
      policies:
        backendTLS: {root: missing/upstream-ca.pem}
      backends: [{host: 127.0.0.1:1}]
`, nil)
	err = Validate(f)
	if err == nil {
		t.Fatal("accepted")
	}
	got := err.Error()
	for _, want := range []string{
		"binds[0].listeners[0].tls.cert: cannot read the certificate: open missing/api.crt: no such file or directory" + hint,
		"binds[0].listeners[0].tls.root: cannot read the CA certificates: open missing/ca.pem: no such file or directory" + hint,
		`binds[0].listeners[0].routes[0].policies.basicAuth.htpasswd.file: cannot read "missing/htpasswd": open missing/htpasswd: no such file or directory` + hint,
		"binds[0].listeners[1].tls.cert: cannot read the certificate: open " + absent + ": no such file or directory (line",
		`binds[1].listeners[0].routes[0].policies.apiKey.keys.file: cannot read "missing/keys.json": open missing/keys.json: no such file or directory` + hint,
		`binds[1].listeners[0].routes[1].policies.jwtAuth.jwks.file: cannot load key set "missing/jwks.json": open missing/jwks.json: no such file or directory` + hint,
		`binds[1].listeners[0].routes[2].policies.backendTLS.root: "missing/upstream-ca.pem": cannot read: no such file or directory` + hint,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors:\n%s\nwant among them:\n%s", got, want)
		}
	}
}
