package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
)

// keepAliveConn is one raw client connection to a bind, used for several
// requests in turn.
type keepAliveConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialKeepAlive(t *testing.T, addr string) *keepAliveConn {
	t.Helper()
	c, br := rawConn(t, addr)
	return &keepAliveConn{t: t, c: c, br: br}
}

// ask sends GET target and returns the X-Upstream of the answer.
func (k *keepAliveConn) ask(target string) string {
	k.t.Helper()
	if _, err := io.WriteString(k.c, "GET "+target+" HTTP/1.1\r\nHost: reload.test\r\n\r\n"); err != nil {
		k.t.Fatalf("writing on the kept connection: %v", err)
	}
	resp, _ := readResponse(k.t, k.br, http.MethodGet)
	if resp.Close {
		k.t.Fatalf("the gateway closed the kept connection")
	}
	return resp.Header.Get("X-Upstream")
}

// closedByPeer polls until the gateway has closed the connection.
func (k *keepAliveConn) closedByPeer(bound time.Duration) {
	k.t.Helper()
	eventually(k.t, bound, "the gateway to close the idle connection", func() bool {
		k.c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := k.br.ReadByte()
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	})
}

// refusing reports whether nothing accepts connections at addr any more.
func refusing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// TestLifecycleReload: a reload changes routes for new requests, even on a
// kept connection; a new bind opens; a removed bind stops accepting and
// closes its idle connections; a kept bind keeps its socket.
func TestLifecycleReload(t *testing.T) {
	_, vars := probeVars(t, "v1", "v2")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${v1}'}]
- port: 3001
  listeners:
  - routes:
    - backends: [{host: '${v1}'}]
`, vars)
	addr3000, addr3001 := tg.addr(3000), tg.addr(3001)
	kept := dialKeepAlive(t, addr3000)
	removed := dialKeepAlive(t, addr3001)
	if got := kept.ask("/a"); got != "v1" {
		t.Fatalf("before the reload: %q", got)
	}
	if got := removed.ask("/a"); got != "v1" {
		t.Fatalf("before the reload, port 3001: %q", got)
	}
	localBefore := kept.c.LocalAddr().String()

	tg.apply(`
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /new}}]
      backends: [{host: '${v2}'}]
- port: 3002
  listeners:
  - routes:
    - backends: [{host: '${v2}'}]
`, vars)

	t.Run("kept connection sees the new routes", func(t *testing.T) {
		if got := kept.ask("/new/x"); got != "v2" {
			t.Fatalf("after the reload: %q, want v2", got)
		}
		if got := kept.ask("/a"); got != "" {
			t.Fatalf("a route removed by the reload still answers: %q", got)
		}
		if kept.c.LocalAddr().String() != localBefore {
			t.Fatal("not the same connection")
		}
	})
	t.Run("kept bind keeps its socket", func(t *testing.T) {
		if tg.addr(3000) != addr3000 {
			t.Fatalf("port 3000 moved from %s to %s", addr3000, tg.addr(3000))
		}
		if resp, _ := get(t, tg.url(3000)+"/new"); resp.Header.Get("X-Upstream") != "v2" {
			t.Fatalf("new connection: %d from %q", resp.StatusCode, resp.Header.Get("X-Upstream"))
		}
	})
	t.Run("new bind opens", func(t *testing.T) {
		if resp, _ := get(t, tg.url(3002)+"/any"); resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "v2" {
			t.Fatalf("port 3002: %d from %q", resp.StatusCode, resp.Header.Get("X-Upstream"))
		}
	})
	t.Run("removed bind stops", func(t *testing.T) {
		if _, ok := tg.gw.Addrs()[3001]; ok {
			t.Fatal("Addrs still lists the removed port")
		}
		eventually(t, 5*time.Second, "the removed bind to refuse connections", func() bool { return refusing(addr3001) })
		removed.closedByPeer(5 * time.Second)
	})
	if got := tg.gw.Ports(); len(got) != 2 || got[0] != 3000 || got[1] != 3002 {
		t.Fatalf("Ports() = %v", got)
	}
}

// TestLifecycleApplyFailureKeepsRunningConfig: a config that parses but does
// not compile, or whose new port cannot be opened, is refused as a whole and
// the running config keeps serving.
func TestLifecycleApplyFailureKeepsRunningConfig(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	core, logs := observer.New(zap.InfoLevel)
	gw := New(Options{
		Logger: zap.New(core),
		ListenAddr: func(port int) string {
			if port == 5000 {
				return busy.Addr().String()
			}
			return "127.0.0.1:0"
		},
	})
	tg := &testGateway{t: t, gw: gw, logs: logs}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	_, vars := probeVars(t, "old", "new")
	tg.apply(`
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${old}'}]
`, vars)
	kept := dialKeepAlive(t, tg.addr(3000))
	if got := kept.ask("/"); got != "old" {
		t.Fatalf("before: %q", got)
	}
	tests := []struct {
		desc, yaml, wantErr string
		edit                func(*config.File) // a change Parse would refuse
	}{
		{
			desc: "route hostname the router refuses",
			yaml: `
binds:
- port: 3000
  listeners:
  - routes:
    - hostnames: [good.test]
      backends: [{host: '${new}'}]
- port: 3001
  listeners:
  - routes:
    - backends: [{host: '${new}'}]
`,
			wantErr: "binds[0].listeners[0].routes",
			edit: func(f *config.File) {
				f.Binds[0].Listeners[0].Routes[0].Hostnames[0] = "bad name.test"
			},
		},
		{
			desc: "new port already in use",
			yaml: `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${new}'}]
- port: 3001
  listeners:
  - routes:
    - backends: [{host: '${new}'}]
- port: 5000
  listeners:
  - routes:
    - backends: [{host: '${new}'}]
`,
			wantErr: "port 5000",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := parseConfig(t, tc.yaml, vars)
			if tc.edit != nil {
				tc.edit(f)
			}
			err := gw.Apply(f)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Apply: %v, want an error naming %q", err, tc.wantErr)
			}
			if got := kept.ask("/"); got != "old" {
				t.Fatalf("kept connection after the failed reload: %q", got)
			}
			if resp, _ := get(t, tg.url(3000)+"/"); resp.Header.Get("X-Upstream") != "old" {
				t.Fatalf("new connection after the failed reload: %q", resp.Header.Get("X-Upstream"))
			}
			if ports := gw.Ports(); len(ports) != 1 || ports[0] != 3000 {
				t.Fatalf("ports after the failed reload: %v", ports)
			}
			if !gw.Ready() {
				t.Fatal("not ready after a failed reload")
			}
			dump, _ := gw.ConfigDump()
			if strings.Contains(string(dump), "3001") {
				t.Fatalf("config dump shows the refused config:\n%s", dump)
			}
		})
	}
}

// blockingBackend is an upstream whose requests wait until released; entered
// receives one value per request that arrived.
type blockingBackend struct {
	addr    string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockingBackend(t *testing.T) *blockingBackend {
	t.Helper()
	b := &blockingBackend{entered: make(chan struct{}, 16), release: make(chan struct{})}
	b.addr = upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.entered <- struct{}{}
		<-b.release
		w.Header().Set("X-Upstream", "blocked")
		io.WriteString(w, "released")
	}))
	return b
}

func (b *blockingBackend) unblock() { b.once.Do(func() { close(b.release) }) }

// waitEntered waits for a request to reach the backend.
func (b *blockingBackend) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the backend")
	}
}

type clientResult struct {
	status int
	body   string
	close  bool
	err    error
}

// released waits, with a bound, for the result of a request the blocking
// backend held and has let go: it must have got the backend's 200.
func released(t *testing.T, result <-chan clientResult, what string) clientResult {
	t.Helper()
	select {
	case r := <-result:
		if r.err != nil || r.status != 200 || r.body != "released" {
			t.Fatalf("%s: %+v", what, r)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never finished", what)
		return clientResult{}
	}
}

// requestInBackground sends GET url from another goroutine.
func requestInBackground(url string) <-chan clientResult {
	out := make(chan clientResult, 1)
	go func() {
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}
		resp, err := client.Get(url)
		if err != nil {
			out <- clientResult{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- clientResult{status: resp.StatusCode, body: string(b), close: resp.Close, err: err}
	}()
	return out
}

// TestLifecycleShutdownDrains: Shutdown stops accepting at once, turns
// readiness off, closes idle connections, lets the in-flight request finish
// with its answer (and Connection: close), and returns once it did; on both
// transports (their connections keep their state in different types).
func TestLifecycleShutdownDrains(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			blocked := newBlockingBackend(t)
			fast := newProbe(t, "fast")
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /slow}}]
      backends: [{host: '${SLOW}'}]
    - backends: [{host: '${FAST}'}]
`, map[string]string{"SLOW": blocked.addr, "FAST": fast.addr}, tr)
			t.Cleanup(blocked.unblock)
			addr := tg.addr(3000)
			idle := dialKeepAlive(t, addr)
			if got := idle.ask("/"); got != "fast" {
				t.Fatalf("idle connection's request: %q", got)
			}
			if !tg.gw.Ready() {
				t.Fatal("not ready before Shutdown")
			}

			result := requestInBackground(tg.url(3000) + "/slow")
			blocked.waitEntered(t)

			shutdownDone := make(chan struct{})
			go func() {
				defer close(shutdownDone)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				tg.gw.Shutdown(ctx)
			}()
			eventually(t, 5*time.Second, "readiness to turn off", func() bool { return !tg.gw.Ready() })
			eventually(t, 5*time.Second, "new connections to be refused", func() bool { return refusing(addr) })
			idle.closedByPeer(5 * time.Second)
			select {
			case <-shutdownDone:
				t.Fatal("Shutdown returned while a request was in flight")
			case r := <-result:
				t.Fatalf("the in-flight request ended early: %+v", r)
			default:
			}
			if tg.gw.Ready() {
				t.Fatal("ready during the drain")
			}

			blocked.unblock()
			if r := released(t, result, "in-flight request"); !r.close {
				t.Error("a response sent while draining should close its connection")
			}
			select {
			case <-shutdownDone:
			case <-time.After(10 * time.Second):
				t.Fatal("Shutdown did not return after the last request finished")
			}
			if err := tg.gw.Apply(parseConfig(t, oneRoute(fast.addr), nil)); err == nil {
				t.Fatal("Apply after Shutdown succeeded")
			}
			if tg.gw.Ready() {
				t.Fatal("ready after Shutdown")
			}
		})
	}
}

// TestLifecycleShutdownDeadline: a request still in flight when the drain
// context ends is cut off, and Shutdown returns by the deadline.
func TestLifecycleShutdownDeadline(t *testing.T) {
	blocked := newBlockingBackend(t)
	tg := startGateway(t, oneRoute(blocked.addr), nil)
	t.Cleanup(blocked.unblock)
	result := requestInBackground(tg.url(3000) + "/stuck")
	blocked.waitEntered(t)

	const grace = 300 * time.Millisecond
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	tg.gw.Shutdown(ctx)
	took := time.Since(start)
	if took < grace || took > grace+3*time.Second {
		t.Fatalf("Shutdown returned after %v, want about %v", took, grace)
	}
	select {
	case r := <-result:
		if r.err == nil && r.status == 200 {
			t.Fatalf("the stuck request completed: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stuck request was not cut off")
	}
}

// TestLifecycleStartDraining: StartDraining turns readiness off while the
// gateway keeps serving, and a reload during the drain does not turn it back
// on.
func TestLifecycleStartDraining(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, oneRoute(p.addr), nil)
	tg.gw.StartDraining()
	if tg.gw.Ready() {
		t.Fatal("ready after StartDraining")
	}
	if resp, _ := get(t, tg.url(3000)+"/"); resp.StatusCode != 200 {
		t.Fatalf("not serving while draining: %d", resp.StatusCode)
	}
	tg.apply(oneRoute(p.addr), nil)
	if tg.gw.Ready() {
		t.Fatal("a reload while draining turned readiness back on")
	}
	if resp, _ := get(t, tg.url(3000)+"/"); resp.StatusCode != 200 {
		t.Fatalf("not serving after the reload: %d", resp.StatusCode)
	}
}

// TestLifecycleReaddRemovedPort: a port removed by one reload and added back
// by the next is listening again, even when the second reload comes at once
// (ports are fixed addresses here, as in production).
func TestLifecycleReaddRemovedPort(t *testing.T) {
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		t.Run(string(tr), func(t *testing.T) {
			fixed := closedAddr(t)
			core, logs := observer.New(zap.InfoLevel)
			gw := New(Options{
				Logger:    zap.New(core),
				Transport: tr,
				ListenAddr: func(port int) string {
					if port == 3001 {
						return fixed
					}
					return "127.0.0.1:0"
				},
			})
			tg := &testGateway{t: t, gw: gw, logs: logs}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				gw.Shutdown(ctx)
			})
			p := newProbe(t, "up")
			with := oneRoute(p.addr) + "- port: 3001\n  listeners:\n  - routes:\n    - backends: [{host: '" + p.addr + "'}]\n"
			without := oneRoute(p.addr)
			tg.apply(with, nil)
			for i := range 20 {
				tg.apply(without, nil)
				if err := gw.Apply(parseConfig(t, with, nil)); err != nil {
					t.Fatalf("round %d: adding port 3001 back: %v", i, err)
				}
				if resp, _ := get(t, "http://"+fixed+"/"); resp.Header.Get("X-Upstream") != "up" {
					t.Fatalf("round %d: port 3001 answered %d", i, resp.StatusCode)
				}
			}
		})
	}
}

// TestLifecycleApplyProgrammaticConfig: a File built in code skips Parse's
// checks; what Parse would refuse is an error from Apply, never a panic.
func TestLifecycleApplyProgrammaticConfig(t *testing.T) {
	port := 3000
	bind := func(r config.Route) []config.Bind {
		return []config.Bind{{Port: &port, Listeners: []config.Listener{{Routes: []config.Route{r}}}}}
	}
	tests := []struct {
		desc, wantErr string
		file          *config.File
	}{
		{desc: "bind without a port", wantErr: "binds[0].port",
			file: &config.File{Binds: []config.Bind{{Listeners: []config.Listener{{}}}}}},
		{desc: "unknown named backend", wantErr: "no backend named \"ghost\"",
			file: &config.File{Binds: bind(config.Route{Backends: []config.RouteBackend{{Kind: config.BackendRef, Backend: "ghost", Weight: 1}}})}},
		{desc: "tcp policy without connectTimeout", wantErr: "",
			file: &config.File{Binds: bind(config.Route{Backends: []config.RouteBackend{{Kind: config.BackendHost, Host: "127.0.0.1:1", Weight: 1,
				Policies: &config.BackendPolicies{TCP: &config.BackendTCP{}}}}})}},
		{desc: "mirror to an unknown named backend", wantErr: "requestMirror.backend.backend",
			file: &config.File{Binds: bind(config.Route{Policies: &config.RoutePolicies{RequestMirror: &config.RequestMirror{Backend: config.MirrorBackend{Backend: "ghost"}}}})}},
		{desc: "mirror without percentage", wantErr: "requestMirror.percentage",
			file: &config.File{Binds: bind(config.Route{Policies: &config.RoutePolicies{RequestMirror: &config.RequestMirror{Backend: config.MirrorBackend{Host: "127.0.0.1:1"}}}})}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
			t.Cleanup(func() { gw.Shutdown(expiredContext()) })
			err := gw.Apply(tc.file)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Apply: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Apply: %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
}

// TestLifecycleRemovedBindDrains: a request in flight on a bind that a reload
// removes still gets its answer, while the port refuses new connections.
func TestLifecycleRemovedBindDrains(t *testing.T) {
	blocked := newBlockingBackend(t)
	p := newProbe(t, "up")
	vars := map[string]string{"SLOW": blocked.addr, "UP": p.addr}
	tg := startGateway(t, oneRoute(p.addr)+`- port: 3001
  listeners:
  - routes:
    - backends: [{host: '${SLOW}'}]
`, vars)
	t.Cleanup(blocked.unblock)
	addr := tg.addr(3001)
	result := requestInBackground("http://" + addr + "/slow")
	blocked.waitEntered(t)
	tg.apply(oneRoute(p.addr), vars)
	if !refusing(addr) {
		t.Fatal("the removed bind still accepts connections")
	}
	blocked.unblock()
	released(t, result, "in-flight request on the removed bind")
}

// TestLifecycleRemovedBindLogsItsStop: a reload that removes a port logs
// that it stopped listening when its socket closes, while a request is
// still in flight on it, and logs the end of its drain, naming the port,
// once that request is answered. (The stop was logged at the drain's end,
// up to 30 s later: after a remove-then-re-add, it said the port stopped
// while it was listening again.)
func TestLifecycleRemovedBindLogsItsStop(t *testing.T) {
	blocked := newBlockingBackend(t)
	p := newProbe(t, "up")
	vars := map[string]string{"SLOW": blocked.addr}
	with := oneRoute(p.addr) + `- port: 3001
  listeners:
  - routes:
    - backends: [{host: '${SLOW}'}]
`
	tg := startGateway(t, with, vars)
	t.Cleanup(blocked.unblock)
	result := requestInBackground(tg.url(3001) + "/slow")
	blocked.waitEntered(t)
	logged := func(msg string) []observer.LoggedEntry {
		return tg.logs.FilterMessage(msg).FilterField(zap.Int("port", 3001)).All()
	}
	tg.apply(oneRoute(p.addr), vars)
	if n := len(logged("stopped listening")); n != 1 {
		t.Fatalf("%d lines say port 3001 stopped listening once the reload removed it, want 1", n)
	}
	if n := len(logged("closed bind drained")); n != 0 {
		t.Fatalf("the drain's end logged while a request is in flight")
	}
	blocked.unblock()
	released(t, result, "in-flight request on the removed bind")
	eventually(t, 5*time.Second, "the drain's end to be logged", func() bool { return len(logged("closed bind drained")) == 1 })
	if e := logged("closed bind drained")[0]; e.ContextMap()["cut"] != int64(0) {
		t.Fatalf("drain's end: %v, want nothing cut", e.ContextMap())
	}
	if n := len(logged("stopped listening")); n != 1 {
		t.Fatalf("%d lines say port 3001 stopped listening, want 1", n)
	}
}

// TestLifecycleListenFollowsEnableIpv6: a bind without a host listens on
// every interface, IPv4's alone when config.enableIpv6 is false (0.0.0.0, as
// agentgateway binds then; it listened on [::], dual stack, whatever the
// setting said). A reload that changes the setting moves open ports to the
// other address (their connections drain), and one that fails after moving
// a port puts it back.
func TestLifecycleListenFollowsEnableIpv6(t *testing.T) {
	ln6, err := net.Listen("tcp6", "[::1]:0")
	if ln6 != nil {
		ln6.Close()
	}
	hasV6 := err == nil
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		t.Run(string(tr), func(t *testing.T) {
			gw := New(Options{Transport: tr, ListenAddr: func(port int) string {
				if port == 5000 {
					return busy.Addr().String()
				}
				return ":0" // every interface, as BindHost "" has it
			}})
			tg := &testGateway{t: t, gw: gw}
			t.Cleanup(func() { gw.Shutdown(expiredContext()) })
			p := newProbe(t, "up")
			v4Only := "config: {enableIpv6: false}\n" + oneRoute(p.addr)
			// addr is port 3000's address, which must be IPv4's every
			// interface (v4) or IPv6's, and serve on 127.0.0.1.
			addr := func(v4 bool) string {
				t.Helper()
				a := gw.Addrs()[3000].(*net.TCPAddr)
				if got := a.IP.To4() != nil; got != v4 || !a.IP.IsUnspecified() {
					t.Fatalf("port 3000 listens on %s, want the unspecified IPv4 address: %v", a, v4)
				}
				local := net.JoinHostPort("127.0.0.1", itoa(a.Port))
				c := dialKeepAlive(t, local) // a new connection
				defer c.c.Close()
				if got := c.ask("/"); got != "up" {
					t.Fatalf("port 3000 answered from %q", got)
				}
				return local
			}
			tg.apply(v4Only, nil)
			kept := dialKeepAlive(t, addr(true))
			if got := kept.ask("/"); got != "up" {
				t.Fatalf("kept connection: %q", got)
			}
			if !hasV6 {
				t.Skip("no IPv6 here: the dual-stack side is not checked")
			}
			tg.apply(oneRoute(p.addr), nil)
			addr(false)
			kept.closedByPeer(5 * time.Second)
			tg.apply(v4Only, nil)
			addr(true)
			failing := oneRoute(p.addr) + "- port: 5000\n  listeners:\n  - routes:\n    - backends: [{host: '" + p.addr + "'}]\n"
			for range 10 { // in either order of the two ports
				if err := gw.Apply(parseConfig(t, failing, nil)); err == nil {
					t.Fatal("a config with a port already taken applied")
				}
				addr(true)
			}
		})
	}
}

// TestLifecycleShutdownDeadlineLogsCutRequests: a request still in flight
// when the drain's time runs out is cut, and leaves its one access line
// before Shutdown returns (the process exits then), saying it was cut at
// shutdown: one waiting on its upstream (HTTP/1.1, on both transports, and
// HTTP/2), one whose response is streaming (either), an upgrade tunnel.
func TestLifecycleShutdownDeadlineLogsCutRequests(t *testing.T) {
	type inFlight struct {
		tg   *testGateway
		done <-chan struct{} // closed once the client saw the request end
	}
	// Each starts a gateway and a request that is in flight on return.
	cases := []struct {
		desc  string
		start func(t *testing.T, tr Transport, release <-chan struct{}) inFlight
	}{
		{"waiting on its upstream", func(t *testing.T, tr Transport, release <-chan struct{}) inFlight {
			blocked := newBlockingBackend(t)
			go func() { <-release; blocked.unblock() }()
			tg := startGatewayWith(t, oneRoute(blocked.addr), nil, tr)
			done := make(chan struct{})
			result := requestInBackground(tg.url(3000) + "/stuck")
			go func() { <-result; close(done) }()
			blocked.waitEntered(t)
			return inFlight{tg, done}
		}},
		{"HTTP/2 waiting on its upstream", func(t *testing.T, tr Transport, release <-chan struct{}) inFlight {
			blocked := newBlockingBackend(t)
			go func() { <-release; blocked.unblock() }()
			tg := startGatewayWith(t, oneRoute(blocked.addr), nil, tr)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if resp, err := h2cClient().Get(tg.url(3000) + "/stuck"); err == nil {
					resp.Body.Close()
				}
			}()
			blocked.waitEntered(t)
			return inFlight{tg, done}
		}},
		{"a streaming response", func(t *testing.T, tr Transport, release <-chan struct{}) inFlight {
			up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, "first\n")
				w.(http.Flusher).Flush()
				<-release
			}))
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("the response's start: %v", err)
				}
				if strings.HasSuffix(line, "first\n") {
					break
				}
			}
			done := make(chan struct{})
			go func() { defer close(done); io.Copy(io.Discard, br) }()
			return inFlight{tg, done}
		}},
		{"an HTTP/2 streaming response", func(t *testing.T, tr Transport, release <-chan struct{}) inFlight {
			up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, "first\n")
				w.(http.Flusher).Flush()
				<-release
			}))
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			resp, err := h2cClient().Get(tg.url(3000) + "/stream")
			if err != nil {
				t.Fatal(err)
			}
			if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "first\n" {
				t.Fatalf("the response's start: %q %v", line, err)
			}
			done := make(chan struct{})
			go func() { defer close(done); io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
			return inFlight{tg, done}
		}},
		{"an upgrade tunnel", func(t *testing.T, tr Transport, _ <-chan struct{}) inFlight {
			up, _ := upgradeUpstream(t)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			if resp, err := readReply(br, "GET"); err != nil || resp.status() != 101 {
				t.Fatalf("handshake: %q %v", resp.line, err)
			}
			if line, err := br.ReadString('\n'); err != nil || line != "greeting\n" {
				t.Fatalf("greeting: %q %v", line, err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			done := make(chan struct{})
			go func() { defer close(done); io.Copy(io.Discard, br) }()
			return inFlight{tg, done}
		}},
	}
	for _, tr := range e2eTransports {
		for _, tc := range cases {
			t.Run(string(tr)+"/"+tc.desc, func(t *testing.T) {
				release := make(chan struct{})
				var once sync.Once
				t.Cleanup(func() { once.Do(func() { close(release) }) })
				f := tc.start(t, tr, release)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				f.tg.gw.Shutdown(ctx)
				lines := f.tg.logs.FilterMessage("request").All()
				if len(lines) != 1 {
					t.Fatalf("%d access lines when Shutdown returned, want the cut request's", len(lines))
				}
				if e, _ := lines[0].ContextMap()["upstream_error"].(string); !strings.Contains(e, "shutdown") {
					t.Errorf("the cut request's line %v does not say it was cut at shutdown", lines[0].ContextMap())
				}
				select {
				case <-f.done:
				case <-time.After(5 * time.Second):
					t.Fatal("the client's request was not cut")
				}
				once.Do(func() { close(release) })
				if n := f.tg.logs.FilterMessage("request").Len(); n != 1 {
					t.Errorf("%d access lines, want 1", n)
				}
			})
		}
	}
}
