package sock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pair returns a *Conn dialled to a loopback listener and the accepted peer
// as a plain *net.TCPConn.
func pair(t testing.TB) (*Conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	sc, err := New(c.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close(); peer.Close() })
	return sc, peer.(*net.TCPConn)
}

func TestReadWriteBothWays(t *testing.T) {
	sc, peer := pair(t)
	if n, err := sc.Write([]byte("ping")); n != 4 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if _, err := io.ReadFull(peer, buf[:4]); err != nil || string(buf[:4]) != "ping" {
		t.Fatalf("peer read %q, %v", buf[:4], err)
	}
	if _, err := peer.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(sc, buf[:4]); err != nil || string(buf[:4]) != "pong" {
		t.Fatalf("Read %q, %v", buf[:4], err)
	}
	if n, err := sc.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty Read = %d, %v", n, err)
	}
}

func TestReadEOFWhenPeerCloses(t *testing.T) {
	sc, peer := pair(t)
	peer.Write([]byte("last"))
	peer.Close()
	got, err := io.ReadAll(sc)
	if err != nil || string(got) != "last" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if n, err := sc.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v; want io.EOF", n, err)
	}
}

func TestReadDeadlineIsATimeout(t *testing.T) {
	sc, _ := pair(t)
	sc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := sc.Read(make([]byte, 4))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past deadline = %v; want a net.Error timeout", err)
	}
}

func TestClosedConnReportsErrClosed(t *testing.T) {
	sc, _ := pair(t)
	sc.Close()
	if _, err := sc.Read(make([]byte, 4)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read on closed = %v; want net.ErrClosed", err)
	}
	if _, err := sc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on closed = %v; want net.ErrClosed", err)
	}
}

// A write larger than the socket buffers waits for the peer to read, and
// every byte arrives in order.
func TestLargeWriteWaitsForPeer(t *testing.T) {
	sc, peer := pair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB, more than the socket buffers hold
	done := make(chan []byte)
	go func() {
		got, _ := io.ReadAll(peer)
		done <- got
	}()
	if n, err := sc.Write(want); n != len(want) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	sc.CloseWrite()
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatalf("peer got %d bytes, want %d intact", len(got), len(want))
	}
}

// The awaited write returns only once the answer is there, and the read
// that follows gets it.
func TestAwaitAfterWriteReturnsWithTheAnswerReadable(t *testing.T) {
	sc, peer := pair(t)
	release := make(chan struct{})
	go func() {
		buf := make([]byte, 7)
		io.ReadFull(peer, buf)
		<-release
		peer.Write([]byte("answer:" + string(buf)))
	}()
	wrote := make(chan error, 1)
	go func() {
		sc.AwaitAfterWrite(true)
		_, err := sc.Write([]byte("request"))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("Write returned (%v) before the answer came", err)
	case <-time.After(50 * time.Millisecond):
		// A bounded check that it is waiting: the answer is withheld.
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := sc.Read(buf)
	if err != nil || string(buf[:n]) != "answer:request" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	// The request is used up: the next write does not wait.
	if _, err := sc.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
}

// Bytes that arrived before the awaited write started, once the poller has
// seen them, do not end the wait (AwaitAfterWrite's limit): the read
// deadline does, and the bytes are read then.
func TestAwaitAfterWriteWithBytesAlreadyThereWaitsForTheDeadline(t *testing.T) {
	sc, peer := pair(t)
	peer.Write([]byte("early"))
	// The poller records the bytes while nothing waits for them.
	sc.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(sc, buf[:1]); err != nil {
		t.Fatal(err)
	}
	sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	sc.AwaitAfterWrite(true)
	if _, err := sc.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	sc.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(sc, buf[1:]); err != nil || string(buf) != "early" {
		t.Fatalf("Read = %q, %v", buf, err)
	}
}

// The read deadline ends the wait: the write still succeeds (everything was
// sent) and the read reports the timeout.
func TestAwaitAfterWriteEndsAtTheReadDeadline(t *testing.T) {
	sc, peer := pair(t)
	sc.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	sc.AwaitAfterWrite(true)
	if n, err := sc.Write([]byte("req")); n != 3 || err != nil {
		t.Fatalf("Write = %d, %v; want 3, nil", n, err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "req" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	if _, err := sc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %v; want the deadline", err)
	}
}

// A peer that closes while the write waits wakes it; the read sees EOF.
func TestAwaitAfterWriteWakesOnPeerClose(t *testing.T) {
	sc, peer := pair(t)
	go func() {
		buf := make([]byte, 3)
		io.ReadFull(peer, buf)
		peer.Close()
	}()
	sc.SetReadDeadline(time.Now().Add(10 * time.Second))
	sc.AwaitAfterWrite(true)
	if _, err := sc.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Read(make([]byte, 4)); err != io.EOF {
		t.Fatalf("Read = %v; want io.EOF", err)
	}
}

// A big awaited write that fills the socket buffer finishes the plain way.
func TestAwaitAfterWriteLargerThanTheSocketBuffer(t *testing.T) {
	sc, peer := pair(t)
	want := bytes.Repeat([]byte("x"), 16<<20)
	go func() {
		io.ReadFull(peer, make([]byte, len(want)))
		peer.Write([]byte("ok"))
	}()
	sc.SetReadDeadline(time.Now().Add(10 * time.Second))
	sc.AwaitAfterWrite(true)
	if n, err := sc.Write(want); n != len(want) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("Read = %q, %v", buf, err)
	}
}

func TestReadFromWritesEveryPiece(t *testing.T) {
	sc, peer := pair(t)
	src := strings.NewReader(strings.Repeat("abc", 50000))
	done := make(chan int)
	go func() {
		n, _ := io.Copy(io.Discard, peer)
		done <- int(n)
	}()
	if n, err := sc.ReadFrom(src); n != 150000 || err != nil {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	sc.CloseWrite()
	if n := <-done; n != 150000 {
		t.Fatalf("peer got %d bytes", n)
	}
}

// sizedReader serves total bytes in pieces of at most piece bytes and
// records the size of every buffer it is asked to fill.
type sizedReader struct {
	total, piece int
	asked        []int
}

func (r *sizedReader) Read(p []byte) (int, error) {
	r.asked = append(r.asked, len(p))
	if r.total == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.piece, r.total)
	r.total -= n
	return n, nil
}

// A copy that fills its buffer moves to the bulk buffer; one that reads
// small pieces, as an event stream does, keeps the small one.
func TestReadFromBufferGrowsOnlyForBulk(t *testing.T) {
	for _, tc := range []struct {
		name         string
		total, piece int
		want         []int
	}{
		{"events", 3000, 1000, []int{streamBuffer, streamBuffer, streamBuffer, streamBuffer}},
		{"bulk", streamBuffer + 2*bulkBuffer, 1 << 20, []int{streamBuffer, bulkBuffer, bulkBuffer, bulkBuffer}},
		{"short bulk", streamBuffer, 1 << 20, []int{streamBuffer, bulkBuffer}},
		{"just under", streamBuffer - 1, 1 << 20, []int{streamBuffer, streamBuffer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &sizedReader{total: tc.total, piece: tc.piece}
			var w bytes.Buffer
			if n, err := copyPromptly(&w, r); n != int64(tc.total) || err != nil || w.Len() != tc.total {
				t.Fatalf("copyPromptly = %d, %v; wrote %d", n, err, w.Len())
			}
			if !slices.Equal(r.asked, tc.want) {
				t.Fatalf("buffers asked to fill: %v, want %v", r.asked, tc.want)
			}
		})
	}
}

func TestWrapLeavesOtherConnsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("Wrap changed a non-TCP connection")
	}
	sc, _ := pair(t)
	if _, ok := Wrap(sc.TCPConn).(*Conn); !ok {
		t.Fatal("Wrap did not wrap a TCP connection")
	}
}

func TestDataPathWrapsEveryConnection(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if pc, ok := DataPath(a).(*PromptConn); !ok || pc.Conn != a {
		t.Fatal("a non-TCP connection is not a PromptConn around itself")
	}
	sc, _ := pair(t)
	if _, ok := DataPath(sc.TCPConn).(*Conn); !ok {
		t.Fatal("a TCP connection is not a *Conn")
	}
}

func TestReadWriteAllocateNothing(t *testing.T) {
	sc, peer := pair(t)
	go io.Copy(peer, peer) // echo
	msg := []byte("0123456789")
	buf := make([]byte, len(msg))
	allocs := testing.AllocsPerRun(200, func() {
		sc.AwaitAfterWrite(true)
		if _, err := sc.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(sc, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per exchange; want 0", allocs)
	}
}

func BenchmarkExchange(b *testing.B) {
	for _, mode := range []string{"net.TCPConn", "sock.Conn", "sock.Conn-await"} {
		b.Run(mode, func(b *testing.B) {
			sc, peer := pair(b)
			go io.Copy(peer, peer)
			var c net.Conn = sc
			if mode == "net.TCPConn" {
				c = sc.TCPConn
			}
			msg := make([]byte, 100)
			buf := make([]byte, 100)
			b.ReportAllocs()
			for b.Loop() {
				if mode == "sock.Conn-await" {
					sc.AwaitAfterWrite(true)
				}
				c.Write(msg)
				io.ReadFull(c, buf)
			}
		})
	}
}

// A deadline moved later after an earlier one was set still holds: the
// poller's earlier timer fires, Read re-arms it and keeps waiting, and the
// data that comes before the later deadline is read.
func TestLaterDeadlineOutlivesTheEarlierTimer(t *testing.T) {
	sc, peer := pair(t)
	sc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	sc.SetReadDeadline(time.Now().Add(10 * time.Second))
	go func() {
		// Sent only once the early timer has certainly fired: the reader
		// is told so by the poller state below.
		for limit := time.Now().Add(5 * time.Second); sc.poller.Load() < time.Now().Add(5*time.Second).UnixNano() && time.Now().Before(limit); {
			runtime.Gosched()
		}
		peer.Write([]byte("late"))
	}()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "late" {
		t.Fatalf("Read = %q, %v; want the data, not the early timer", buf, err)
	}
}

// The deadline asked for is the one that ends a read, even when the poller
// holds a later one.
func TestEarlierDeadlineIsAppliedAtOnce(t *testing.T) {
	sc, _ := pair(t)
	sc.SetReadDeadline(time.Now().Add(time.Hour))
	sc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	start := time.Now()
	_, err := sc.Read(make([]byte, 4))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %v; want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Read waited %v for a 20ms deadline", d)
	}
}

// Moving the deadline later costs no poller update; clearing it does.
func TestDeadlineMovesLaterWithoutTouchingThePoller(t *testing.T) {
	sc, _ := pair(t)
	first := time.Now().Add(time.Minute)
	sc.SetReadDeadline(first)
	for i := 1; i <= 3; i++ {
		sc.SetReadDeadline(first.Add(time.Duration(i) * time.Minute))
	}
	if got := sc.poller.Load(); got != first.UnixNano() {
		t.Fatalf("poller deadline %v; want the first, %v", time.Unix(0, got), first)
	}
	if got := sc.readDeadline.Load(); got != first.Add(3*time.Minute).UnixNano() {
		t.Fatalf("asked deadline %v; want the last", time.Unix(0, got))
	}
	sc.SetReadDeadline(time.Time{})
	if sc.poller.Load() != 0 || sc.readDeadline.Load() != 0 {
		t.Fatal("clearing the deadline left one behind")
	}
}

// Splicing out (WriteTo) reads under the deadline asked for, not an
// earlier timer left in the poller.
func TestWriteToUsesTheDeadlineAskedFor(t *testing.T) {
	sc, peer := pair(t)
	sc.SetReadDeadline(time.Now().Add(time.Millisecond))
	sc.SetReadDeadline(time.Now().Add(10 * time.Second))
	go func() {
		peer.Write([]byte("spliced"))
		peer.CloseWrite()
	}()
	var out bytes.Buffer
	if _, err := sc.WriteTo(&out); err != nil || out.String() != "spliced" {
		t.Fatalf("WriteTo = %q, %v", out.String(), err)
	}
}

// BenchmarkServerDeadlines sets the three read deadlines a fasthttp server
// sets per request (idle, header, body timeouts).
// BenchmarkReadFrom copies a 1 MiB body into a socket through ReadFrom, the
// path a streamed body of known length takes to the client.
func BenchmarkReadFrom(b *testing.B) {
	sc, peer := pair(b)
	go io.Copy(io.Discard, peer)
	body := bytes.Repeat([]byte("x"), 1<<20)
	var src bytes.Reader
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(body)
		if _, err := sc.ReadFrom(&src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkServerDeadlines(b *testing.B) {
	for _, mode := range []string{"net.TCPConn", "sock.Conn"} {
		b.Run(mode, func(b *testing.B) {
			sc, _ := pair(b)
			var c net.Conn = sc
			if mode == "net.TCPConn" {
				c = sc.TCPConn
			}
			b.ReportAllocs()
			for b.Loop() {
				now := time.Now()
				c.SetReadDeadline(now.Add(10 * time.Minute))
				c.SetReadDeadline(now.Add(time.Minute))
				c.SetReadDeadline(now.Add(time.Hour))
			}
		})
	}
}

// A tunnel reads and writes one connection from two goroutines at once, as
// net.Conn allows: under -race this fails if Read and Write share state
// without synchronisation. The peer sends and discards on its own, so
// neither side waits for the other.
func TestConcurrentReadAndWrite(t *testing.T) {
	sc, peer := pair(t)
	const n = 4 << 20
	go io.Copy(io.Discard, peer)
	go peer.Write(bytes.Repeat([]byte("r"), n))
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, sc, n)
		done <- err
	}()
	chunk := bytes.Repeat([]byte("w"), 4096)
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := sc.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTransfersAroundTheRawCallLimit moves payloads on both sides of
// rawCallMax in both directions, so both system call paths carry real bytes.
func TestTransfersAroundTheRawCallLimit(t *testing.T) {
	for _, size := range []int{1, rawCallMax - 1, rawCallMax, rawCallMax + 1, 4 * rawCallMax} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			sc, peer := pair(t)
			want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
			want[size-1] = '!'
			done := make(chan error, 1)
			go func() {
				got := make([]byte, size)
				_, err := io.ReadFull(peer, got)
				if err == nil && !bytes.Equal(got, want) {
					err = errors.New("peer received different bytes")
				}
				if err == nil {
					_, err = peer.Write(want)
				}
				done <- err
			}()
			if n, err := sc.Write(want); n != size || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			// One Read with a buffer of the payload's size, so reads above
			// the limit take the ordinary path.
			got := make([]byte, size)
			if _, err := io.ReadFull(sc, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Read: equal=%v, %v", bytes.Equal(got, want), err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStale: an idle connection is live; one whose peer closed it, or sent
// bytes nobody asked for, is stale; asking consumes nothing and counts as
// no read end.
func TestStale(t *testing.T) {
	sc, _ := pair(t)
	if sc.Stale() {
		t.Fatal("an idle connection reported stale")
	}

	sc, peer := pair(t)
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	eventuallyStale(t, sc)
	buf := make([]byte, 1)
	if _, err := io.ReadFull(sc, buf); err != nil || buf[0] != 'x' {
		t.Fatalf("after Stale, Read = %q, %v: the byte must still be there", buf, err)
	}

	sc, peer = pair(t)
	peer.Close()
	eventuallyStale(t, sc)
	if sc.ReadEnds() != 0 {
		t.Fatalf("ReadEnds = %d after Stale alone, want 0", sc.ReadEnds())
	}
	if _, err := sc.Read(buf); err != io.EOF || sc.ReadEnds() != 1 {
		t.Fatalf("Read = %v, ReadEnds %d; want io.EOF, 1", err, sc.ReadEnds())
	}
}

// eventuallyStale polls, with a bound, until sc reports stale (loopback
// delivers the peer's bytes or FIN at once, but not under our control).
func eventuallyStale(t *testing.T, sc *Conn) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !sc.Stale() {
		if time.Now().After(deadline) {
			t.Fatal("the connection never reported stale")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAbortResets: the peer of an aborted connection reads a reset, not the
// end of the stream.
func TestAbortResets(t *testing.T) {
	for _, kind := range []string{"Conn", "PromptConn", "TCPConn"} {
		t.Run(kind, func(t *testing.T) {
			sc, peer := pair(t)
			var c net.Conn = sc
			switch kind {
			case "PromptConn":
				c = &PromptConn{Conn: sc.TCPConn} // a TCPConn has no Fd: Close alone
			case "TCPConn":
				c = sc.TCPConn
			}
			if _, err := c.Write([]byte("part")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(peer, buf); err != nil {
				t.Fatal(err)
			}
			if err := Abort(c); err != nil {
				t.Fatal(err)
			}
			peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := peer.Read(buf)
			if kind == "PromptConn" {
				if err != io.EOF {
					t.Fatalf("peer read %v, want io.EOF from a connection without a descriptor to reset", err)
				}
				return
			}
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("peer read %v, want a reset", err)
			}
		})
	}
}

// TestWriteStall: with a write stall, a Write to a peer that takes nothing
// fails once its wait lasted that long, and the close that follows resets
// the connection; the deadline it set never fails a later Write; an explicit
// write deadline is left alone.
func TestWriteStall(t *testing.T) {
	big := make([]byte, 64<<20) // more than both socket buffers hold

	t.Run("a peer that takes nothing", func(t *testing.T) {
		sc, peer := pair(t)
		sc.SetWriteStall(200 * time.Millisecond)
		start := time.Now()
		n, err := sc.Write(big)
		if !errors.Is(err, os.ErrDeadlineExceeded) || n == len(big) {
			t.Fatalf("Write = %d, %v; want a deadline error before the end", n, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the stalled Write took %v", d)
		}
		sc.Close()
		_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, peer)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("the peer read to %v; want a reset", err)
		}
	})

	t.Run("a later write after the wait", func(t *testing.T) {
		sc, peer := pair(t)
		sc.SetWriteStall(300 * time.Millisecond)
		// A Write that waits (the peer takes its bytes a moment later),
		// then a pause longer than the stall, then another Write.
		done := make(chan error, 1)
		go func() {
			time.Sleep(100 * time.Millisecond) // the peer starts reading late, within the stall
			_, err := io.CopyN(io.Discard, peer, 8<<20)
			done <- err
		}()
		if _, err := sc.Write(big[:8<<20]); err != nil {
			t.Fatalf("a write the peer takes within the stall: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // past the deadline the wait had set
		if _, err := sc.Write([]byte("later")); err != nil {
			t.Fatalf("a later Write failed: %v", err)
		}
	})

	t.Run("an explicit deadline wins", func(t *testing.T) {
		sc, _ := pair(t)
		sc.SetWriteStall(50 * time.Millisecond)
		if err := sc.SetWriteDeadline(time.Now().Add(800 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := sc.Write(big)
		if d := time.Since(start); !errors.Is(err, os.ErrDeadlineExceeded) || d < 700*time.Millisecond {
			t.Fatalf("Write = %v after %v; want the explicit deadline's error, not the stall's", err, d)
		}
	})
}
