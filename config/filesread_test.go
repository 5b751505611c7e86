package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilesReadListsCredentialFiles: the files a config reads when it is
// applied, which the running gateway watches, include every client
// credential file (and the key files an apiKey key file names), not the
// backend credentials, which are re-read where they are used.
func TestFilesReadListsCredentialFiles(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(keys, []byte("admin: {key: {file: admin.key}}\nuser: plain-key\nops: {key: {file: ops.key}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("[{key: {file: lost.key}}, {key: {file: lost.key}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, yaml, want string
	}{
		{"apiKey key file and the key files it names", routePolicies("        apiKey: {keys: {file: " + keys + "}}\n"), keys + " admin.key ops.key"},
		{"apiKey key file that does not parse", routePolicies("        apiKey: {keys: {file: " + broken + "}}\n"), broken},
		{"apiKey key file missing", routePolicies("        apiKey: {keys: {file: missing.yaml}}\n"), "missing.yaml"},
		{"apiKey entries with key files", routePolicies("        apiKey: {keys: [{key: {file: a.key}}, inline-key, {key: {file: b.key}}]}\n"), "a.key b.key"},
		{"apiKey inline", routePolicies("        apiKey: {keys: [inline-key]}\n"), ""},
		{"htpasswd file", routePolicies("        basicAuth: {htpasswd: {file: users.htpasswd}}\n"), "users.htpasswd"},
		{"htpasswd inline", routePolicies("        basicAuth: {htpasswd: 'u:{SHA}x'}\n"), ""},
		{"jwks file", routePolicies("        jwtAuth: {issuer: i, jwks: {file: jwks.json}}\n"), "jwks.json"},
		{"jwks files of providers", routePolicies("        jwtAuth: {providers: [{issuer: a, jwks: {file: a.json}}, {issuer: b, jwks: {url: 'https://b/jwks'}}, {issuer: c, jwks: {file: c.json}}]}\n"), "a.json c.json"},
		{"mcpAuthentication jwks file", routePolicies("        mcpAuthentication: {issuer: https://i, audiences: [a], jwks: {file: mcp.json}, resourceMetadata: {resource: 'http://x'}}\n"), "mcp.json"},
		{"one file named twice", routePolicies("        basicAuth: {htpasswd: {file: same}}\n        apiKey: {keys: {file: same}}\n"), "same"},
		{"listener and backend TLS", "binds:\n- port: 1\n  listeners:\n  - protocol: HTTPS\n    tls: {cert: c.pem, key: k.pem}\n    routes:\n    - backends: [{host: 'a:1'}]\n      policies:\n        backendTLS: {root: ca.pem}\n", "ca.pem c.pem k.pem"},
		{"model catalog", "config:\n  modelCatalog: [{file: prices.yaml}, {inline: {}}]\n", "prices.yaml"},
		{"backendAuth key file left out", routePolicies("        backendAuth: {key: {file: backend.key}}\n"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.FilesRead(), " "); got != tc.want {
				t.Errorf("files read: %q, want %q", got, tc.want)
			}
		})
	}
}
