package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/relaygate/gateway/server/telemetry"
)

// TestMeasureIdleConnectionMemory measures the memory an idle keep-alive
// connection costs, client side included (the clients run in the test's
// process), over plain HTTP and HTTPS, parked or not: the numbers in
// docs/ARCHITECTURE.md ("Parking and the head watch under TLS"). It opens
// 2,000 connections per case, so it runs only when asked:
//
//	GATEWAY_MEASURE_IDLE=1 go test ./server -run TestMeasureIdleConnectionMemory -v
//
// (GATEWAY_MEASURE_IDLE=N opens N connections.)
func TestMeasureIdleConnectionMemory(t *testing.T) {
	n := idleMeasureCount(t)
	// An upstream that records nothing (rawHTTPUpstream's channel fills).
	up := requestUpstream(t, func(c net.Conn, _ *bufio.Reader, m message) bool {
		answer, _ := okAnswer(m)
		_, err := io.WriteString(c, answer)
		return err == nil
	})
	for _, tc := range []struct {
		name       string
		https      bool
		parkPeriod time.Duration // 0: parking off
		silent     bool          // no request after the handshake
	}{
		{"plain-unparked", false, 0, false},
		{"plain-parked", false, 20 * time.Millisecond, false},
		{"HTTPS-unparked", true, 0, false},
		{"HTTPS-parked", true, 20 * time.Millisecond, false},
		{"HTTPS-silent-unparked", true, 0, true},
		{"HTTPS-silent-parked", true, 20 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := parkIdleAfter.Swap(int64(tc.parkPeriod))
			t.Cleanup(func() { parkIdleAfter.Store(old) })
			// No access log: the test's capture of it would count.
			tg, cfg := httpsGateway(t, TransportStd, "frontendPolicies:\n  accessLog:\n    filter: \"false\"\n", up)
			port := 3001
			if tc.https {
				port = 3000
			}
			measureIdle(t, tg.bindMetrics(port), n, tc.parkPeriod > 0, "idle connections", func() []net.Conn {
				return openIdle(t, tg.addr(port), n, tc.https, !tc.silent, cfg)
			})
		})
	}
}

// idleMeasureCount is how many connections GATEWAY_MEASURE_IDLE asks the
// idle-memory measurements to open (2,000 for 1); without it they skip.
func idleMeasureCount(t *testing.T) int {
	n, _ := strconv.Atoi(os.Getenv("GATEWAY_MEASURE_IDLE"))
	if n <= 0 {
		t.Skip("set GATEWAY_MEASURE_IDLE=1 (or a connection count) to measure")
	}
	if n == 1 {
		n = 2000
	}
	return n
}

// measureIdle opens n idle connections with open, waits until the bind's
// gauge has every one parked (parked) or open (each served connection then
// waits in its read for the next request), and logs what each costs in
// heap and stacks, client side included; then closes them.
func measureIdle(t *testing.T, m *telemetry.BindMetrics, n int, parked bool, what string, open func() []net.Conn) {
	t.Helper()
	before := inUse()
	conns := open()
	if parked {
		eventually(t, time.Minute, "every connection parked", func() bool { return m.Parked() == n })
	} else {
		eventually(t, time.Minute, "every connection open", func() bool { return m.Open() == n })
	}
	after := inUse()
	t.Logf("%d %s: %.1f KB each (heap and stacks in use, client side included)",
		n, what, float64(after-before)/float64(n)/1000)
	for _, c := range conns {
		c.Close()
	}
}

// inUse is the heap and stack memory in use after two collections (pooled
// objects survive one).
func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// openIdle opens n keep-alive connections to addr, plain or TLS with cfg,
// 64 at a time, each after one request answered 200 (or, without request,
// once its handshake is done), and keeps them idle: no goroutine reads
// them, each keeps a 4 KiB reader as bench/idleconns's client does.
func openIdle(t *testing.T, addr string, n int, overTLS, request bool, cfg *tls.Config) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	openEach(t, n, func(i int) error {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if overTLS {
			tc := tls.Client(c, cfg)
			if err := tc.Handshake(); err != nil {
				return err
			}
			c = tc
		}
		br := bufio.NewReaderSize(c, 4096)
		if request {
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
				return err
			}
			resp, err := readReply(br, "GET")
			if err == nil && resp.status() != 200 {
				err = errStatus(resp.status())
			}
			if err != nil {
				return err
			}
		}
		_ = c.SetDeadline(time.Time{})
		conns[i], readers[i] = c, br
		return nil
	})
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		runtime.KeepAlive(readers)
	})
	return conns
}

// openEach runs open(i) for i in [0, n), 64 at a time, and fails t with
// the first error any returned.
func openEach(t *testing.T, n int, open func(i int) error) {
	t.Helper()
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := open(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("opening the connections: %v", err)
	}
}

// errStatus is an answer other than 200.
type errStatus int

func (e errStatus) Error() string { return "status " + strconv.Itoa(int(e)) }

// TestMeasureIdleH2ConnectionMemory is TestMeasureIdleConnectionMemory for
// HTTP/2 in cleartext (prior knowledge): idle connections after one GET
// each, answered with 2 bytes or with 40 KB (several DATA frames), parked
// or not; the numbers in docs/ARCHITECTURE.md ("HTTP/2 connections
// park"). The client keeps only each connection's socket. Opt-in as that
// test is; run one case per process, since a later case reuses memory an
// earlier one freed and reads low:
//
//	GATEWAY_MEASURE_IDLE=1 go test ./server -run 'TestMeasureIdleH2ConnectionMemory/small-parked$' -v
func TestMeasureIdleH2ConnectionMemory(t *testing.T) {
	n := idleMeasureCount(t)
	for _, tc := range []struct {
		name       string
		body       int
		parkPeriod time.Duration // 0: parking off
	}{
		{"small-unparked", 2, 0},
		{"small-parked", 2, 20 * time.Millisecond},
		{"40KB-unparked", 40 << 10, 0},
		{"40KB-parked", 40 << 10, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := parkIdleAfter.Swap(int64(tc.parkPeriod))
			t.Cleanup(func() { parkIdleAfter.Store(old) })
			tg := startGateway(t, "frontendPolicies:\n  accessLog:\n    filter: \"false\"\n"+
				"binds:\n- port: 3000\n  listeners:\n  - routes:\n    - policies: {directResponse: {status: 200, body: \""+
				strings.Repeat("x", tc.body)+"\"}}\n", nil)
			measureIdle(t, tg.bindMetrics(3000), n, tc.parkPeriod > 0, "idle HTTP/2 connections", func() []net.Conn {
				return openIdleH2(t, tg.addr(3000), n)
			})
		})
	}
}

// openIdleH2 opens n HTTP/2 connections in cleartext to addr, 64 at a time,
// each after one GET read to its end, and keeps only their sockets.
func openIdleH2(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	openEach(t, n, func(i int) error {
		h := dialH2Raw(t, addr)
		_ = h.c.SetDeadline(time.Now().Add(30 * time.Second))
		if err := h.request(1, "GET", "/", true); err != nil {
			return err
		}
		answers := map[uint32]*h2Answer{}
		if _, err := h.readUntil(30*time.Second, answers, func(http2.Frame) bool { return answers[1] != nil && answers[1].done }); err != nil {
			return err
		}
		if a := answers[1]; a.status != "200" {
			st, _ := strconv.Atoi(a.status)
			return errStatus(st)
		}
		_ = h.c.SetDeadline(time.Time{})
		conns[i] = h.c
		return nil
	})
	return conns
}
