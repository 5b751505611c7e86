package sock

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// awaitingUpstream returns an upstream connection whose read waits for an
// answer that never comes, and the channel its read's error arrives on.
func awaitingUpstream(t *testing.T) (*Conn, <-chan error) {
	t.Helper()
	up, _ := pair(t)
	errc := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := up.Read(b[:])
		errc <- err
	}()
	return up, errc
}

// mustEnd waits (bounded) for the upstream read to end with a timeout, as
// a deadline in the past ends it.
func mustEnd(t *testing.T, errc <-chan error) {
	t.Helper()
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the upstream read ended with %v, want a deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream wait outlived the client's hang-up")
	}
}

// eventuallyGone polls h.Gone, bounded.
func eventuallyGone(t *testing.T, h *HangupWatch) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !h.Gone(); {
		if time.Now().After(end) {
			t.Fatal("the hang-up was not noted")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHangupEndsTheUpstreamWait: a client's FIN, RST or half-close while a
// request waits on an upstream ends that wait; Unwatch reports it.
func TestHangupEndsTheUpstreamWait(t *testing.T) {
	for _, c := range []struct {
		desc   string
		hangUp func(*net.TCPConn)
	}{
		{"close", func(c *net.TCPConn) { c.Close() }},
		{"reset", func(c *net.TCPConn) { c.SetLinger(0); c.Close() }},
		{"half-close", func(c *net.TCPConn) { c.CloseWrite() }},
	} {
		t.Run(c.desc, func(t *testing.T) {
			client, peer := pair(t)
			h := Hangups(client, 0)
			if h == nil {
				t.Fatal("Hangups = nil for a TCP connection")
			}
			if h.Gone() {
				t.Fatal("gone before the client did anything")
			}
			up, errc := awaitingUpstream(t)
			h.Watch(up)
			c.hangUp(peer)
			mustEnd(t, errc)
			if !h.Unwatch() {
				t.Fatal("Unwatch did not report the hang-up")
			}
			ForgetHangup(client)
		})
	}
}

// TestHangupBeforeWatch: a client that hung up before the upstream was
// asked has the exchange end at once.
func TestHangupBeforeWatch(t *testing.T) {
	client, peer := pair(t)
	h := Hangups(client, 0)
	peer.Close()
	eventuallyGone(t, h)
	up, errc := awaitingUpstream(t)
	h.Watch(up)
	mustEnd(t, errc)
	ForgetHangup(client)
}

// TestPipelinedBytesAreNoHangup: bytes from the client (a pipelined
// request) do not end the wait; another connection's hang-up, noted after
// them, shows the watcher has seen them.
func TestPipelinedBytesAreNoHangup(t *testing.T) {
	client, peer := pair(t)
	h := Hangups(client, 0)
	up, errc := awaitingUpstream(t)
	h.Watch(up)
	if _, err := peer.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	other, otherPeer := pair(t)
	oh := Hangups(other, 0)
	otherPeer.Close()
	eventuallyGone(t, oh)
	if h.Gone() {
		t.Fatal("pipelined bytes were taken for a hang-up")
	}
	select {
	case err := <-errc:
		t.Fatalf("the upstream wait ended (%v) without a hang-up", err)
	default:
	}
	if h.Unwatch() {
		t.Fatal("Unwatch reported a hang-up")
	}
	ForgetHangup(client)
	ForgetHangup(other)
}

// TestHangupWatchOnceAConnection: a connection's socket is registered once
// for all its requests, and ForgetHangup leaves nothing of it in the
// watcher.
func TestHangupWatchOnceAConnection(t *testing.T) {
	client, _ := pair(t)
	h := Hangups(client, 0)
	if again := Hangups(client, 0); again != h {
		t.Fatal("a second request got another watch")
	}
	w := hangups.w.Load()
	w.mu.Lock()
	held := w.byID[h.id] == h
	w.mu.Unlock()
	if !held {
		t.Fatal("the watcher does not hold the connection's watch")
	}
	id := h.id
	ForgetHangup(client)
	w.mu.Lock()
	_, still := w.byID[id]
	w.mu.Unlock()
	if still || h.id != 0 {
		t.Fatal("ForgetHangup left the watch in the watcher")
	}
}

// TestHangupsNeedASocket: a connection with no socket under it is not
// watched.
func TestHangupsNeedASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if h := Hangups(a, 0); h != nil {
		t.Fatal("Hangups watches a pipe")
	}
	if h := Hangups(&PromptConn{Conn: a}, 0); h != nil {
		t.Fatal("Hangups watches a pipe under a PromptConn")
	}
}

// TestHangupAfterForget: a connection forgotten while its socket stays open
// (a parked one, served again later) is watched again when asked.
func TestHangupAfterForget(t *testing.T) {
	client, peer := pair(t)
	Hangups(client, 0)
	ForgetHangup(client)
	h := Hangups(client, 0)
	if h == nil {
		t.Fatal("Hangups = nil for a connection forgotten and served again")
	}
	up, errc := awaitingUpstream(t)
	h.Watch(up)
	peer.Close()
	mustEnd(t, errc)
	ForgetHangup(client)
}

// TestHangupRunsOnGone: OnGone's func runs once at the hang-up, or at once
// when the client already went; OnGone(nil) takes it back.
func TestHangupRunsOnGone(t *testing.T) {
	client, peer := pair(t)
	h := Hangups(client, 0)
	taken := make(chan struct{}, 1)
	h.OnGone(func() { taken <- struct{}{} })
	h.OnGone(nil)
	ran := make(chan struct{}, 2)
	h.OnGone(func() { ran <- struct{}{} })
	peer.Close()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("OnGone's func did not run at the hang-up")
	}
	eventuallyGone(t, h)
	late := make(chan struct{}, 1)
	h.OnGone(func() { late <- struct{}{} })
	select {
	case <-late:
	default:
		t.Fatal("OnGone after the hang-up did not run its func at once")
	}
	if len(taken) != 0 || len(ran) != 0 {
		t.Fatalf("a func taken back ran (%d), or one ran twice (%d)", len(taken), len(ran))
	}
	ForgetHangup(client)
}

// TestHangupGrace: with a grace, a client's reset is a hang-up at once, and
// a FIN alone only once the grace has passed; a watch forgotten before then
// is left alone.
func TestHangupGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	t.Run("reset at once", func(t *testing.T) {
		client, peer := pair(t)
		h := Hangups(client, time.Hour)
		up, errc := awaitingUpstream(t)
		h.Watch(up)
		peer.SetLinger(0)
		peer.Close()
		mustEnd(t, errc)
		if !h.Unwatch() {
			t.Fatal("Unwatch did not report the reset")
		}
		ForgetHangup(client)
	})
	t.Run("a FIN once the grace passed", func(t *testing.T) {
		client, peer := pair(t)
		h := Hangups(client, grace)
		up, errc := awaitingUpstream(t)
		h.Watch(up)
		start := time.Now()
		peer.CloseWrite()
		mustEnd(t, errc)
		if d := time.Since(start); d < grace*3/4 {
			t.Fatalf("the FIN ended the wait after %v, within the grace of %v", d, grace)
		}
		if !h.Unwatch() {
			t.Fatal("Unwatch did not report the hang-up")
		}
		ForgetHangup(client)
	})
	t.Run("forgotten within the grace", func(t *testing.T) {
		client, peer := pair(t)
		h := Hangups(client, grace)
		peer.CloseWrite()
		ForgetHangup(client)
		time.Sleep(2 * grace) // past the grace: the forgotten watch must stay untouched
		if h.Gone() {
			t.Fatal("a forgotten watch was marked gone")
		}
	})
}
