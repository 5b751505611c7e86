// Package nodemcp runs the third-party Node.js MCP parts in Go tests: the
// reference servers (@modelcontextprotocol/server-everything, -filesystem,
// -memory), the Inspector CLI (@modelcontextprotocol/inspector-cli) and a
// scripted client on the TypeScript SDK (@modelcontextprotocol/sdk).
//
// It owns testdata/node at the module root: package.json and
// package-lock.json pin the npm packages, `make node-deps` installs them
// there with `npm ci` (`make test` does it first), and the scripts beside
// them (everything-http.mjs, client.mjs) are what the helpers run. Every
// process is started as `node <file>.js` with absolute paths, never npx, so
// that start-up is fast and offline.
//
// A test that needs these parts fails, with a message saying to run
// `make node-deps`, when node or the installed packages are missing or older
// than package-lock.json; under `go test -short` it is skipped instead.
package nodemcp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// RelDir is the directory of the npm packages, relative to the module root.
const RelDir = "testdata/node"

// stampFile is written by `make node-deps` into node_modules after a
// successful `npm ci`: a copy of the package-lock.json it installed.
const stampFile = "node_modules/.nodemcp-lock.json"

type install struct {
	dir  string // absolute testdata/node
	node string // absolute path of the node binary
}

var lookup = sync.OnceValues(func() (install, error) {
	wd, err := os.Getwd()
	if err != nil {
		return install{}, err
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return install{}, fmt.Errorf("no go.mod in %s or any parent directory", wd)
		}
		root = parent
	}
	in := install{dir: filepath.Join(root, filepath.FromSlash(RelDir))}
	lock, err := os.ReadFile(filepath.Join(in.dir, "package-lock.json"))
	if err != nil {
		return install{}, err
	}
	stamp, err := os.ReadFile(filepath.Join(in.dir, filepath.FromSlash(stampFile)))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return install{}, fmt.Errorf("the npm packages are not installed in %s", in.dir)
	case err != nil:
		return install{}, err
	case !bytes.Equal(stamp, lock):
		return install{}, fmt.Errorf("the npm packages in %s/node_modules are not those of its package-lock.json", in.dir)
	}
	if in.node, err = exec.LookPath("node"); err != nil {
		return install{}, fmt.Errorf("node is not installed: %w", err)
	}
	if in.node, err = filepath.Abs(in.node); err != nil {
		return install{}, err
	}
	return in, nil
})

// Require fails tb when node or the npm packages are not installed (or are
// stale), telling to run `make node-deps`; with -short it skips tb instead.
func Require(tb testing.TB) {
	tb.Helper()
	get(tb)
}

func get(tb testing.TB) install {
	tb.Helper()
	if testing.Short() {
		tb.Skip("nodemcp: Node.js MCP tests are skipped with -short")
	}
	in, err := lookup()
	if err != nil {
		tb.Fatalf("nodemcp: %v; run `make node-deps` (it runs `npm ci` in %s, and installs nodejs and npm if missing)", err, RelDir)
	}
	return in
}

// Dir returns the absolute path of testdata/node, where package.json, the
// scripts and node_modules are (see Require).
func Dir(tb testing.TB) string {
	tb.Helper()
	return get(tb).dir
}

// Node returns the absolute path of the node binary (see Require).
func Node(tb testing.TB) string {
	tb.Helper()
	return get(tb).node
}

// PackageDir returns the absolute directory of an installed npm package,
// such as "@modelcontextprotocol/sdk" (see Require).
func PackageDir(tb testing.TB, pkg string) string {
	tb.Helper()
	return filepath.Join(Dir(tb), "node_modules", filepath.FromSlash(pkg))
}

// EverythingStdio returns the command line of the "everything" reference
// server over stdio, for a gateway config's `stdio: {cmd, args, env}`
// target or for Cmd: `node .../server-everything/dist/index.js stdio`.
func EverythingStdio(tb testing.TB) (cmd string, args []string, env map[string]string) {
	tb.Helper()
	return Node(tb), []string{everythingJS(tb), "stdio"}, map[string]string{}
}

// Filesystem returns the command line of the filesystem reference server
// (stdio) giving it access to dirs, which must exist (use t.TempDir()):
// `node .../server-filesystem/dist/index.js DIR...`.
func Filesystem(tb testing.TB, dirs ...string) (cmd string, args []string, env map[string]string) {
	tb.Helper()
	if len(dirs) == 0 {
		tb.Fatal("nodemcp.Filesystem: at least one directory is needed")
	}
	js := filepath.Join(PackageDir(tb, "@modelcontextprotocol/server-filesystem"), "dist", "index.js")
	return Node(tb), append([]string{js}, dirs...), map[string]string{}
}

// Memory returns the command line of the knowledge-graph memory reference
// server (stdio): `node .../server-memory/dist/index.js`, with
// MEMORY_FILE_PATH set to a file in a new tb.TempDir() so that it writes
// nothing into the repository.
func Memory(tb testing.TB) (cmd string, args []string, env map[string]string) {
	tb.Helper()
	js := filepath.Join(PackageDir(tb, "@modelcontextprotocol/server-memory"), "dist", "index.js")
	return Node(tb), []string{js}, map[string]string{
		"MEMORY_FILE_PATH": filepath.Join(tb.TempDir(), "memory.jsonl"),
	}
}

func everythingJS(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(PackageDir(tb, "@modelcontextprotocol/server-everything"), "dist", "index.js")
}

// Cmd returns an *exec.Cmd for a command line from EverythingStdio,
// Filesystem or Memory: env is added to the test's environment, and stderr
// goes to the test binary's stderr. Hand it to the Go SDK's
// mcp.CommandTransport to talk to the server directly.
func Cmd(cmd string, args []string, env map[string]string) *exec.Cmd {
	c := exec.Command(cmd, args...)
	c.Env = os.Environ()
	for k, v := range env {
		c.Env = append(c.Env, k+"="+v)
	}
	c.Stderr = os.Stderr
	return c
}
