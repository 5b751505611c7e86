package tcpproxy_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/tcpproxy"
	"github.com/relaygate/gateway/backend/tcpproxy/tcpproxytest"
)

// bound is the longest any step of these tests waits.
const bound = 20 * time.Second

// randomBytes returns n pseudo-random bytes (the same for a seed).
func randomBytes(n int, seed uint64) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

// env is one kind's proxy in front of an upstream server.
type env struct {
	t     *testing.T
	kind  tcpproxytest.Kind
	up    *tcpproxytest.Server
	proxy *tcpproxytest.Proxy
}

func setup(t *testing.T, k tcpproxytest.Kind, handle func(*net.TCPConn), opts tcpproxy.Options, so tcpproxytest.StartOptions) *env {
	t.Helper()
	up, err := tcpproxytest.Serve(handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	p, err := tcpproxytest.Start(k, up.Addr, opts, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("proxy close: %v", err)
		}
	})
	return &env{t: t, kind: k, up: up, proxy: p}
}

func (e *env) dial() net.Conn {
	e.t.Helper()
	c, err := e.proxy.DialClient()
	if err != nil {
		e.t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(bound))
	e.t.Cleanup(func() { c.Close() })
	return c
}

// result waits for the pipe's result.
func (e *env) result() tcpproxy.Result {
	e.t.Helper()
	select {
	case r := <-e.proxy.Results:
		if r.Method != e.kind.Want {
			e.t.Errorf("method %v, want %v", r.Method, e.kind.Want)
		}
		return r
	case <-time.After(bound):
		e.t.Fatal("no pipe result")
	}
	return tcpproxy.Result{}
}

func closeWrite(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
}

func checkEnd(t *testing.T, name string, got tcpproxy.End, side tcpproxy.Side, reason tcpproxy.Reason) {
	t.Helper()
	if got.Side != side || got.Reason != reason {
		t.Errorf("%s end: %v %v (%v), want %v %v", name, got.Side, got.Reason, got.Err, side, reason)
	}
}

// forEachKind runs f for every kind, then checks that no goroutine was left
// behind.
func forEachKind(t *testing.T, f func(t *testing.T, k tcpproxytest.Kind)) {
	base := runtime.NumGoroutine()
	for _, k := range tcpproxytest.Kinds {
		t.Run(k.Name, func(t *testing.T) { f(t, k) })
	}
	checkGoroutines(t, base)
}

// checkGoroutines waits (bounded) until there are no more goroutines than
// base.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		<-time.After(time.Millisecond)
	}
}

func TestMain(m *testing.M) {
	// netpoll starts its pollers on first use; start them before any
	// goroutine count is taken.
	p, err := tcpproxytest.Start(tcpproxytest.Kinds[0], "127.0.0.1:1", tcpproxy.Options{}, tcpproxytest.StartOptions{})
	if err == nil {
		p.Close()
	}
	if c, err := tcpproxytest.Dial(tcpproxytest.Netpoll, "127.0.0.1:1"); err == nil {
		c.Close()
	}
	m.Run()
}

// TestEcho sends 64 MiB through an echo server and back, both ways at once,
// under an idle limit (so its checks run during the transfer).
func TestEcho(t *testing.T) {
	const size = 64 << 20
	data := randomBytes(size, 1)
	want := sha256.Sum256(data)
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		e := setup(t, k, tcpproxytest.Echo, tcpproxy.Options{Idle: 2 * time.Second}, tcpproxytest.StartOptions{})
		c := e.dial()
		werr := make(chan error, 1)
		go func() {
			err := tcpproxytest.Source(c, data, size)
			if err == nil {
				err = c.(interface{ CloseWrite() error }).CloseWrite()
			}
			werr <- err
		}()
		h := sha256.New()
		n, err := io.Copy(h, c)
		if err != nil || n != size {
			t.Fatalf("read back %d bytes, %v; want %d; %+v", n, err, size, e.result())
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatal("echoed bytes differ")
		}
		r := e.result()
		if r.ClientBytes != size || r.UpstreamBytes != size {
			t.Errorf("bytes %d up, %d down; want %d each", r.ClientBytes, r.UpstreamBytes, size)
		}
		checkEnd(t, "first", r.First, tcpproxy.SideClient, tcpproxy.ReasonEOF)
		checkEnd(t, "last", r.Last, tcpproxy.SideUpstream, tcpproxy.ReasonEOF)
	})
}

// TestHalfCloseClientFirst: the client sends its request and closes its
// sending side; the upstream reads to the end, then answers.
func TestHalfCloseClientFirst(t *testing.T) {
	const reqSize, respSize = 100 << 10, 1 << 20
	req, resp := randomBytes(reqSize, 2), randomBytes(respSize, 3)
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		got := make(chan []byte, 1)
		e := setup(t, k, func(c *net.TCPConn) {
			b, _ := io.ReadAll(c)
			got <- b
			_, _ = c.Write(resp)
		}, tcpproxy.Options{}, tcpproxytest.StartOptions{})
		c := e.dial()
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		closeWrite(t, c)
		answer, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(answer, resp) {
			t.Fatalf("answer of %d bytes differs (want %d)", len(answer), respSize)
		}
		if b := <-got; !bytes.Equal(b, req) {
			t.Fatalf("upstream read %d bytes, differs (want %d)", len(b), reqSize)
		}
		r := e.result()
		if r.ClientBytes != reqSize || r.UpstreamBytes != respSize {
			t.Errorf("bytes %d up, %d down; want %d, %d", r.ClientBytes, r.UpstreamBytes, reqSize, respSize)
		}
		checkEnd(t, "first", r.First, tcpproxy.SideClient, tcpproxy.ReasonEOF)
		checkEnd(t, "last", r.Last, tcpproxy.SideUpstream, tcpproxy.ReasonEOF)
	})
}

// TestHalfCloseUpstreamFirst: the upstream speaks first and closes its
// sending side; the client reads that to the end, then sends.
func TestHalfCloseUpstreamFirst(t *testing.T) {
	const greetSize, sendSize = 1 << 20, 2 << 20
	greet, send := randomBytes(greetSize, 4), randomBytes(sendSize, 5)
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		got := make(chan []byte, 1)
		e := setup(t, k, func(c *net.TCPConn) {
			_, _ = c.Write(greet)
			_ = c.CloseWrite()
			b, _ := io.ReadAll(c)
			got <- b
		}, tcpproxy.Options{}, tcpproxytest.StartOptions{})
		c := e.dial()
		g, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g, greet) {
			t.Fatalf("greeting of %d bytes differs (want %d)", len(g), greetSize)
		}
		if _, err := c.Write(send); err != nil {
			t.Fatal(err)
		}
		closeWrite(t, c)
		var b []byte
		select {
		case b = <-got:
		case <-time.After(bound):
			t.Fatal("upstream read nothing")
		}
		if !bytes.Equal(b, send) {
			t.Fatalf("upstream read %d bytes, differs (want %d)", len(b), sendSize)
		}
		r := e.result()
		if r.ClientBytes != sendSize || r.UpstreamBytes != greetSize {
			t.Errorf("bytes %d up, %d down; want %d, %d", r.ClientBytes, r.UpstreamBytes, sendSize, greetSize)
		}
		checkEnd(t, "first", r.First, tcpproxy.SideUpstream, tcpproxy.ReasonEOF)
		checkEnd(t, "last", r.Last, tcpproxy.SideClient, tcpproxy.ReasonEOF)
	})
}

// TestIdle: a pipe where nothing moves is closed once the idle time passed,
// in order, and not before.
func TestIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		upEnd := make(chan error, 1)
		e := setup(t, k, func(c *net.TCPConn) {
			_, err := tcpproxytest.Drain(c)
			upEnd <- err
		}, tcpproxy.Options{Idle: idle}, tcpproxytest.StartOptions{})
		// The pipe begins inside the dial (a TLS kind's handshake ends
		// after the proxy took the connection), so the client's clock
		// starts before it.
		start := time.Now()
		c := e.dial()
		r := e.result()
		if r.Duration < idle || time.Since(start) < idle {
			t.Errorf("closed after %v, before the idle time %v", r.Duration, idle)
		}
		checkEnd(t, "first", r.First, tcpproxy.SideNone, tcpproxy.ReasonIdle)
		checkEnd(t, "last", r.Last, tcpproxy.SideNone, tcpproxy.ReasonIdle)
		if n, err := tcpproxytest.Drain(c); n != 0 || err != nil {
			t.Errorf("client read %d bytes, %v; want an orderly end", n, err)
		}
		if err := <-upEnd; err != nil {
			t.Errorf("upstream: %v; want an orderly end", err)
		}
	})
}

// TestIdleAfterTraffic: the idle time counts from the last byte.
func TestIdleAfterTraffic(t *testing.T) {
	const idle = 200 * time.Millisecond
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		e := setup(t, k, tcpproxytest.Echo, tcpproxy.Options{Idle: idle}, tcpproxytest.StartOptions{})
		c := e.dial()
		buf := make([]byte, 4)
		last := time.Now()
		var lastTook time.Duration
		// Exchanges for longer than the idle time keep the pipe open.
		for start := time.Now(); time.Since(start) < 2*idle; {
			_, err := c.Write([]byte("ping"))
			if err == nil {
				_, err = io.ReadFull(c, buf)
			}
			if err != nil {
				// A machine that kept this goroutine (or the proxy's) from
				// running for the idle time made the pipe idle.
				if gap := time.Since(last); gap >= idle {
					t.Skipf("nothing ran for %v: the pipe was idle", gap)
				}
				t.Fatalf("exchange %v after the previous one, %v into the exchanges: %v", time.Since(last), time.Since(start), err)
			}
			lastTook = time.Since(last)
			last = time.Now()
		}
		if n, err := tcpproxytest.Drain(c); n != 0 || err != nil {
			t.Fatalf("client read %d bytes, %v; want an orderly end", n, err)
		}
		// Nothing moved after the last answer but its ACK.
		if quiet := time.Since(last); quiet < idle-10*time.Millisecond {
			if lastTook >= idle-10*time.Millisecond {
				// The answer was there long before this goroutine ran
				// again to read it.
				t.Skipf("the last exchange took %v: the pipe was idle", lastTook)
			}
			t.Errorf("closed %v after the last byte, idle time %v", quiet, idle)
		}
		r := e.result()
		checkEnd(t, "last", r.Last, tcpproxy.SideNone, tcpproxy.ReasonIdle)
		if r.ClientBytes != r.UpstreamBytes || r.ClientBytes < 4 {
			t.Errorf("bytes %d up, %d down", r.ClientBytes, r.UpstreamBytes)
		}
	})
}

// TestMaxDuration: a pipe is closed once it lasted MaxDuration.
func TestMaxDuration(t *testing.T) {
	const limit = 100 * time.Millisecond
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		e := setup(t, k, func(c *net.TCPConn) { _, _ = tcpproxytest.Drain(c) }, tcpproxy.Options{MaxDuration: limit}, tcpproxytest.StartOptions{})
		c := e.dial()
		r := e.result()
		if r.Duration < limit {
			t.Errorf("closed after %v", r.Duration)
		}
		checkEnd(t, "last", r.Last, tcpproxy.SideNone, tcpproxy.ReasonMaxDuration)
		if _, err := tcpproxytest.Drain(c); err != nil {
			t.Errorf("client: %v; want an orderly end", err)
		}
	})
}

// TestUpstreamReset: a reset from the upstream reaches the client as a reset.
func TestUpstreamReset(t *testing.T) {
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		e := setup(t, k, func(c *net.TCPConn) {
			b := make([]byte, 4)
			_, _ = io.ReadFull(c, b)
			_ = c.SetLinger(0)
			_ = c.Close()
		}, tcpproxy.Options{}, tcpproxytest.StartOptions{})
		c := e.dial()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		n, err := tcpproxytest.Drain(c)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("client read %d bytes, %v; want ECONNRESET", n, err)
		}
		r := e.result()
		checkEnd(t, "first", r.First, tcpproxy.SideUpstream, tcpproxy.ReasonReset)
		if r.ClientBytes != 4 {
			t.Errorf("%d bytes up, want 4", r.ClientBytes)
		}
	})
}

// TestClientReset: a reset from the client reaches the upstream as a reset.
func TestClientReset(t *testing.T) {
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		upErr := make(chan error, 1)
		e := setup(t, k, func(c *net.TCPConn) {
			b := make([]byte, 4)
			if _, err := io.ReadFull(c, b); err != nil {
				upErr <- err
				return
			}
			_, _ = c.Write([]byte("pong"))
			_, err := tcpproxytest.Drain(c)
			upErr <- err
		}, tcpproxy.Options{}, tcpproxytest.StartOptions{})
		c := e.dial()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		tcp, ok := c.(*net.TCPConn)
		if !ok {
			tcp = c.(interface{ NetConn() net.Conn }).NetConn().(*net.TCPConn)
		}
		_ = tcp.SetLinger(0)
		_ = tcp.Close()
		select {
		case err := <-upErr:
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("upstream read ended with %v; want ECONNRESET", err)
			}
		case <-time.After(bound):
			t.Fatal("upstream never saw the end")
		}
		r := e.result()
		checkEnd(t, "first", r.First, tcpproxy.SideClient, tcpproxy.ReasonReset)
		if r.ClientBytes != 4 || r.UpstreamBytes != 4 {
			t.Errorf("bytes %d up, %d down; want 4 each", r.ClientBytes, r.UpstreamBytes)
		}
	})
}

// TestClientPrefix: bytes the proxy read before the pipe (a peeked
// ClientHello) go upstream first and are counted.
func TestClientPrefix(t *testing.T) {
	data := randomBytes(1<<20, 6)
	for _, name := range []string{"copy", "splice", "hybrid", "netpoll"} {
		k, _ := tcpproxytest.KindByName(name)
		t.Run(name, func(t *testing.T) {
			e := setup(t, k, tcpproxytest.Echo, tcpproxy.Options{}, tcpproxytest.StartOptions{Prefix: 517})
			c := e.dial()
			go func() {
				_, _ = c.Write(data)
				_ = c.(interface{ CloseWrite() error }).CloseWrite()
			}()
			back, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("read back %d bytes (%v), want the %d sent", len(back), err, len(data))
			}
			r := e.result()
			if r.ClientBytes != int64(len(data)) || r.UpstreamBytes != int64(len(data)) {
				t.Errorf("bytes %d up, %d down; want %d each", r.ClientBytes, r.UpstreamBytes, len(data))
			}
		})
	}
}

func TestParseMethod(t *testing.T) {
	for _, m := range []tcpproxy.Method{tcpproxy.Auto, tcpproxy.Copy, tcpproxy.Splice, tcpproxy.Netpoll, tcpproxy.Hybrid} {
		if got, err := tcpproxy.ParseMethod(m.String()); got != m || err != nil {
			t.Errorf("ParseMethod(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := tcpproxy.ParseMethod("sendfile"); err == nil {
		t.Error("ParseMethod(sendfile) accepted")
	}
}

// TestConnWithoutHalfClose: a connection that cannot half-close (net.Pipe's)
// ends both directions at its end; bytes still count, and the idle check
// counts them.
func TestConnWithoutHalfClose(t *testing.T) {
	base := runtime.NumGoroutine()
	client, cProxy := net.Pipe()
	uProxy, upstream := net.Pipe()
	results := make(chan tcpproxy.Result, 1)
	go func() { results <- tcpproxy.Pipe(cProxy, uProxy, tcpproxy.Options{Idle: time.Minute}) }()
	go func() {
		_, _ = client.Write([]byte("hello"))
		_ = client.Close()
	}()
	b := make([]byte, 5)
	if _, err := io.ReadFull(upstream, b); err != nil || string(b) != "hello" {
		t.Fatalf("upstream read %q, %v", b, err)
	}
	if n, err := tcpproxytest.Drain(upstream); n != 0 || err != nil {
		t.Fatalf("upstream read %d more bytes, %v; want the end", n, err)
	}
	var r tcpproxy.Result
	select {
	case r = <-results:
	case <-time.After(bound):
		t.Fatal("no pipe result")
	}
	upstream.Close()
	if r.Method != tcpproxy.Copy || r.ClientBytes != 5 || r.UpstreamBytes != 0 {
		t.Errorf("result %+v", r)
	}
	checkEnd(t, "first", r.First, tcpproxy.SideClient, tcpproxy.ReasonEOF)
	checkGoroutines(t, base)
}

// TestMixedSizes: small and bulk messages in turn, each echoed before the
// next (Hybrid goes from copying to splicing and back).
func TestMixedSizes(t *testing.T) {
	sizes := []int{10, 100 << 10, 5, 2<<20 + 3, 1, 17000, 16 << 10, 3, 1<<20 + 1, 700}
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		e := setup(t, k, tcpproxytest.Echo, tcpproxy.Options{Idle: time.Minute}, tcpproxytest.StartOptions{})
		c := e.dial()
		var total int64
		for i, size := range sizes {
			msg := randomBytes(size, uint64(10+i))
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write(msg)
				werr <- err
			}()
			back := make([]byte, size)
			if _, err := io.ReadFull(c, back); err != nil {
				t.Fatalf("message %d (%d bytes): %v", i, size, err)
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, msg) {
				t.Fatalf("message %d (%d bytes) came back different", i, size)
			}
			total += int64(size)
		}
		closeWrite(t, c)
		if n, err := tcpproxytest.Drain(c); n != 0 || err != nil {
			t.Fatalf("after the messages: %d bytes, %v", n, err)
		}
		r := e.result()
		if r.ClientBytes != total || r.UpstreamBytes != total {
			t.Errorf("bytes %d up, %d down; want %d each", r.ClientBytes, r.UpstreamBytes, total)
		}
	})
}

// TestHybridSpans: with spans that end almost at once, a stream of messages
// of every size goes from copying to splicing and back many times, while
// bytes are under way, and arrives intact.
func TestHybridSpans(t *testing.T) {
	defer tcpproxy.SetSpanWait(2 * time.Millisecond)()
	k, _ := tcpproxytest.KindByName("hybrid")
	e := setup(t, k, tcpproxytest.Echo, tcpproxy.Options{}, tcpproxytest.StartOptions{})
	c := e.dial()
	rng := rand.New(rand.NewPCG(1, 2))
	data := randomBytes(256<<10, 20)
	var total int64
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		msg := data[:1+rng.IntN(len(data)-1)]
		werr := make(chan error, 1)
		go func() {
			_, err := c.Write(msg)
			werr <- err
		}()
		back := make([]byte, len(msg))
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatalf("after %d bytes: %v", total, err)
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, msg) {
			t.Fatalf("after %d bytes: a message of %d came back different", total, len(msg))
		}
		total += int64(len(msg))
	}
	closeWrite(t, c)
	if n, err := tcpproxytest.Drain(c); n != 0 || err != nil {
		t.Fatalf("after the messages: %d bytes, %v", n, err)
	}
	r := e.result()
	if r.ClientBytes != total || r.UpstreamBytes != total {
		t.Errorf("bytes %d up, %d down; want %d each", r.ClientBytes, r.UpstreamBytes, total)
	}
}

// TestGoneAfterItsEnd: a side that ended its sending in order and then
// closed its whole connection (a reset, as a peer that closes answers a
// late byte, a TLS close_notify) before the other side ended ends the pipe
// in order, once the other side ends too: the half-close towards it has
// nothing left to close, and is no failure of either side. Either side
// first.
func TestGoneAfterItsEnd(t *testing.T) {
	forEachKind(t, func(t *testing.T, k tcpproxytest.Kind) {
		t.Run("upstream first", func(t *testing.T) {
			if k.Upstream == tcpproxytest.Netpoll {
				// An upstream connection of netpoll's own reset after its
				// FIN may hold the pipe for good, fix or not (the gateway
				// dials upstreams with Go's net).
				t.Skip("netpoll-dialed upstream")
			}
			proxySide := make(chan [2]net.Addr, 1)
			reset := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(reset) }) }
			e := setup(t, k, func(c *net.TCPConn) {
				proxySide <- [2]net.Addr{c.RemoteAddr(), c.LocalAddr()}
				_ = c.CloseWrite()
				<-reset
				_ = c.SetLinger(0)
				_ = c.Close()
			}, tcpproxy.Options{}, tcpproxytest.StartOptions{})
			t.Cleanup(release) // (before setup's, which wait for the handler)
			c := e.dial()
			if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
				t.Fatalf("client read %q, %v; want the end", b, err)
			}
			addrs := <-proxySide
			release()
			awaitSocketGone(t, addrs[0], addrs[1])
			closeWrite(t, c)
			r := e.result()
			checkEnd(t, "first", r.First, tcpproxy.SideUpstream, tcpproxy.ReasonEOF)
			checkEnd(t, "last", r.Last, tcpproxy.SideClient, tcpproxy.ReasonEOF)
		})
		t.Run("client first", func(t *testing.T) {
			ended := make(chan struct{})
			gone := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(gone) }) }
			e := setup(t, k, func(c *net.TCPConn) {
				_, _ = tcpproxytest.Drain(c)
				close(ended)
				<-gone
				_ = c.CloseWrite()
			}, tcpproxy.Options{}, tcpproxytest.StartOptions{})
			t.Cleanup(release) // (before setup's, which wait for the handler)
			c := e.dial()
			if _, err := c.Write([]byte("req")); err != nil {
				t.Fatal(err)
			}
			closeWrite(t, c)
			select {
			case <-ended:
			case <-time.After(bound):
				t.Fatal("the upstream never read the client's end")
			}
			tcp, ok := c.(*net.TCPConn)
			if !ok {
				tcp = c.(interface{ NetConn() net.Conn }).NetConn().(*net.TCPConn)
			}
			local, proxy := tcp.LocalAddr(), tcp.RemoteAddr()
			_ = tcp.SetLinger(0)
			_ = tcp.Close()
			awaitSocketGone(t, proxy, local)
			release()
			r := e.result()
			checkEnd(t, "first", r.First, tcpproxy.SideClient, tcpproxy.ReasonEOF)
			checkEnd(t, "last", r.Last, tcpproxy.SideUpstream, tcpproxy.ReasonEOF)
		})
	})
}

// awaitSocketGone waits (bounded) until the IPv4 TCP socket from local to
// remote has left the kernel's table (/proc/net/tcp), as a socket does
// once a reset closed it.
func awaitSocketGone(t *testing.T, local, remote net.Addr) {
	t.Helper()
	hex := func(a net.Addr) string {
		ta := a.(*net.TCPAddr)
		ip := ta.IP.To4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port)
	}
	l, r := hex(local), hex(remote)
	deadline := time.Now().Add(bound)
	for {
		table, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Skipf("no socket table: %v", err)
		}
		found := false
		for _, line := range strings.Split(string(table), "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[1] == l && f[2] == r && f[3] != "07" { // 07: CLOSE
				found = true
			}
		}
		if !found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %v to %v still open", local, remote)
		}
		<-time.After(time.Millisecond)
	}
}
