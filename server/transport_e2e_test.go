package server

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/codec/logline"
)

// TestAcceptErrorsWarnedAndCounted: when accepting fails (here, the
// process is out of file descriptors: EMFILE), the bind counts each
// failure (agentgateway_downstream_accept_errors_total) and warns, naming
// the bind and the error; the client waiting meanwhile is served once
// descriptors are free again. (The std acceptor backed off in silence.)
func TestAcceptErrorsWarnedAndCounted(t *testing.T) {
	tg := startGateway(t, "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies: {directResponse: {status: 200, body: ok}}\n", nil)
	m := tg.bindMetrics(1)
	addr := tg.addr(1)

	// Lower the soft descriptor limit near what is open, and take the rest.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	low := lim
	low.Cur = min(lim.Cur, uint64(len(open)+64))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var fillers []*os.File
	release := func() {
		for _, f := range fillers {
			f.Close()
		}
		fillers = nil
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	t.Cleanup(release)
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		fillers = append(fillers, f)
		if len(fillers) > 10000 {
			t.Fatal("no EMFILE")
		}
	}
	// One descriptor for the client's socket: the gateway has none left
	// to accept it with.
	fillers[len(fillers)-1].Close()
	fillers = fillers[:len(fillers)-1]
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		release()
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, 5*time.Second, "a failed accept counted", func() bool { return m.AcceptErrors() > 0 })
	release()

	warned := tg.logs.FilterMessage("accepting connections failed; backing off").All()
	if len(warned) == 0 {
		t.Fatal("no warning")
	}
	f := warned[0].ContextMap()
	if f["bind"] != "bind/1" || !strings.Contains(f["error"].(string), "too many open files") {
		t.Fatalf("warning fields %v", f)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if b, err := io.ReadAll(c); err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		t.Fatalf("the waiting client: %q, %v", b, err)
	}
}

// TestAcceptErrorsThrottled: failed accepts are each counted, and warned
// about at most once per acceptErrorEvery, the warning saying how many
// failed since the last one.
func TestAcceptErrorsThrottled(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	tg := startGateway(t, "binds:\n- port: 1\n  listeners: []\n", nil)
	m := tg.bindMetrics(1)
	now := time.Unix(1000, 0)
	a := &acceptErrors{log: zap.New(core), port: 1, metrics: m, now: func() time.Time { return now }}
	emfile := &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	steps := []struct {
		after  time.Duration
		warned bool
		unsaid int64
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{time.Second, false, 0},
		{acceptErrorEvery, true, 2},
		{acceptErrorEvery - time.Millisecond, false, 0},
		{time.Millisecond, true, 1},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		before := logs.Len()
		a.failed(emfile)
		if warned := logs.Len() > before; warned != s.warned {
			t.Fatalf("step %d: warned %v, want %v", i, warned, s.warned)
		}
		if s.warned {
			if got := logs.All()[logs.Len()-1].ContextMap()[logline.DroppedKey]; got != s.unsaid {
				t.Fatalf("step %d: %v failed since the last warning, want %d", i, got, s.unsaid)
			}
		}
	}
	if n := m.AcceptErrors(); n != len(steps) {
		t.Fatalf("%d accept errors counted, want %d", n, len(steps))
	}
}
