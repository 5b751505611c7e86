// Package envoyrls runs Envoy's rate limit service
// (github.com/envoyproxy/ratelimit, the reference implementation of
// envoy.service.ratelimit.v3) over a Redis of the test's own, as processes,
// for tests that need the real thing: limits kept in Redis and shared by
// every gateway that asks the service.
//
// Neither is built here: `make ratelimit-deps` (which `make test` runs)
// installs Debian's redis-server when it is missing, and builds the service
// at the version that version.txt pins into bin/envoy-ratelimit/VERSION/ at
// the module root, apart from go.mod. A test that needs them fails, saying
// to run `make ratelimit-deps`, when either is missing; under
// `go test -short` it is skipped instead.
//
// Every process listens on 127.0.0.1 only, keeps nothing on disk but in the
// test's temporary directory, and is killed when the test ends.
package envoyrls

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

//go:embed version.txt
var versionFile string

// Version is the pinned version of github.com/envoyproxy/ratelimit.
func Version() string { return strings.TrimSpace(versionFile) }

// binRel is where `make ratelimit-deps` installs the service, relative to
// the module root.
func binRel() string {
	return filepath.Join("bin", "envoy-ratelimit", Version(), "service_cmd")
}

// startTimeout bounds how long a process may take to serve.
const startTimeout = 20 * time.Second

type tools struct {
	redis   string // absolute path of redis-server
	service string // absolute path of the service binary
}

var lookup = sync.OnceValues(func() (tools, error) {
	var tl tools
	var err error
	if tl.redis, err = exec.LookPath("redis-server"); err != nil {
		return tools{}, fmt.Errorf("redis-server is not installed: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return tools{}, err
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return tools{}, fmt.Errorf("no go.mod in %s or any parent directory", wd)
		}
		root = parent
	}
	tl.service = filepath.Join(root, binRel())
	if _, err := os.Stat(tl.service); err != nil {
		return tools{}, fmt.Errorf("the rate limit service %s is not built: %w", Version(), err)
	}
	return tl, nil
})

// Require fails tb when redis-server or the service is missing, telling to
// run `make ratelimit-deps`; with -short it skips tb instead.
func Require(tb testing.TB) {
	tb.Helper()
	get(tb)
}

func get(tb testing.TB) tools {
	tb.Helper()
	if testing.Short() {
		tb.Skip("envoyrls: tests against Envoy's rate limit service and Redis are skipped with -short")
	}
	tl, err := lookup()
	if err != nil {
		tb.Fatalf("envoyrls: %v; run `make ratelimit-deps` (it installs Debian's redis-server if missing and builds github.com/envoyproxy/ratelimit@%s into bin/)", err, Version())
	}
	return tl
}

// process is a started command whose output is kept for failure messages.
type process struct {
	cmd  *exec.Cmd
	out  *logBuffer
	done chan struct{}
}

type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func start(path string, args, env []string) (*process, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	out := &logBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		cmd.Wait() //nolint:errcheck // the exit is seen through done
		close(p.done)
	}()
	return p, nil
}

// stop kills the process and waits for it.
func (p *process) stop() {
	p.cmd.Process.Kill() //nolint:errcheck // it may have exited already
	<-p.done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady polls ready until it succeeds, the process exits or the bound
// passes.
func (p *process) waitReady(ready func() error) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("exited (%v) before serving: %w", p.cmd.ProcessState, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving after %v: %w", startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort asks the OS for a free loopback port. Another process may take
// it before the caller binds it: callers try again on a failed start.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tries is how many times a start is tried on new ports.
const tries = 3

// Redis is a redis-server serving on 127.0.0.1 for one test, with neither
// snapshots nor an append-only file.
type Redis struct {
	Addr string // "127.0.0.1:port"
	proc *process
}

// StartRedis starts a redis-server on a free loopback port and stops it
// when the test ends.
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	tl := get(tb)
	dir := tb.TempDir()
	var errs []error
	for range tries {
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		r.proc, err = start(tl.redis, []string{
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--protected-mode", "yes", "--logfile", "",
		}, os.Environ())
		if err != nil {
			tb.Fatal(err)
		}
		err = r.proc.waitReady(func() error {
			got, err := r.Do("PING")
			if err == nil && got != "PONG" {
				err = fmt.Errorf("PING answered %q", got)
			}
			return err
		})
		if err == nil {
			tb.Cleanup(r.proc.stop)
			return r
		}
		r.proc.stop()
		errs = append(errs, fmt.Errorf("redis-server on %s: %w\n%s", r.Addr, err, r.proc.out))
	}
	tb.Fatal(errors.Join(errs...))
	return nil
}

// Do sends one command and returns its reply: a status, bulk string or
// integer as text, an array as its elements joined by newlines; a nil
// reply is "". An error reply is an error.
func (r *Redis) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // a later read fails instead
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch kind, rest := line[0], line[1:]; kind {
	case '+', ':':
		return rest, nil
	case '-':
		return "", errors.New(rest)
	case '$':
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return "", err // $-1 is the nil reply
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return "", err
		}
		items := make([]string, n)
		for i := range items {
			if items[i], err = readReply(br); err != nil {
				return "", err
			}
		}
		return strings.Join(items, "\n"), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}

// Service is Envoy's rate limit service on 127.0.0.1, its limits in a
// Redis and its descriptor config in files of the test's own.
type Service struct {
	Addr string // the gRPC "127.0.0.1:port"

	tb    testing.TB
	path  string
	env   []string
	mu    sync.Mutex
	proc  *process // nil while stopped
	last  *process // the latest started, for Logs
	ports [2]int   // HTTP and debug
}

// Start runs the service against redis with the given descriptor
// configs (file name to YAML, each a domain and its descriptors, as the
// service's README tells), waits until it serves them, and stops it when
// the test ends. Its response headers (RateLimit-Limit, -Remaining,
// -Reset) are on.
func Start(tb testing.TB, redis *Redis, configs map[string]string) *Service {
	tb.Helper()
	tl := get(tb)
	root := tb.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, yaml := range configs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(yaml), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	s := &Service{tb: tb, path: tl.service}
	s.env = append(os.Environ(),
		"USE_STATSD=false", "DISABLE_STATS=true",
		"LOG_LEVEL=warn",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=SINGLE", "REDIS_URL="+redis.Addr,
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		// Healthy (gRPC health "ratelimit" SERVING) once a config is loaded.
		"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true",
		"LIMIT_RESPONSE_HEADERS_ENABLED=true",
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
	)
	var errs []error
	for range tries {
		var ports [3]int
		for i := range ports {
			p, err := freePort()
			if err != nil {
				tb.Fatal(err)
			}
			ports[i] = p
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		s.ports = [2]int{ports[1], ports[2]}
		err := s.start()
		if err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
		errs = append(errs, err)
	}
	tb.Fatal(errors.Join(errs...))
	return nil
}

// start runs the process on s's ports and waits until it serves.
func (s *Service) start() error {
	_, grpcPort, _ := net.SplitHostPort(s.Addr)
	env := append(s.env[:len(s.env):len(s.env)],
		"GRPC_PORT="+grpcPort, "PORT="+strconv.Itoa(s.ports[0]), "DEBUG_PORT="+strconv.Itoa(s.ports[1]))
	p, err := start(s.path, nil, env)
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient("passthrough:///"+s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.stop()
		return err
	}
	defer cc.Close()
	health := healthpb.NewHealthClient(cc)
	err = p.waitReady(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
		if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health %v", resp.GetStatus())
		}
		return err
	})
	if err != nil {
		p.stop()
		return fmt.Errorf("rate limit service on %s: %w\n%s", s.Addr, err, p.out)
	}
	s.mu.Lock()
	s.proc, s.last = p, p
	s.mu.Unlock()
	return nil
}

// Stop kills the service; Restart brings it back on the same ports.
func (s *Service) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// Restart starts the stopped service again on the same address, against
// the same Redis and configs, and waits until it serves.
func (s *Service) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

// Logs returns what the service, as last started, has printed.
func (s *Service) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return ""
	}
	return s.last.out.String()
}
