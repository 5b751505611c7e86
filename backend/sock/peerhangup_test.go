package sock

import (
	"net"
	"testing"
	"time"
)

// TestWatchPeerHangup: the peer's FIN or RST during a watch runs its
// function once and Unwatch reports it; bytes alone are no hang-up; a
// connection watched again (the socket already in the watcher's set) is
// watched afresh, and a hang-up that came between two watches is seen by
// the next one at once.
func TestWatchPeerHangup(t *testing.T) {
	fired := func(t *testing.T, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the hang-up was not noted")
		}
	}
	for _, c := range []struct {
		desc   string
		hangUp func(*net.TCPConn)
	}{
		{"close", func(c *net.TCPConn) { c.Close() }},
		{"reset", func(c *net.TCPConn) { c.SetLinger(0); c.Close() }},
	} {
		t.Run(c.desc, func(t *testing.T) {
			up, peer := pair(t)
			// A first watch that sees nothing, and bytes from the peer.
			if !up.WatchPeerHangup(interruptFunc(func() { t.Error("ran without a hang-up") })) {
				t.Fatal("not watched")
			}
			if _, err := peer.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			for end := time.Now().Add(10 * time.Second); !up.HasBytes(); {
				if time.Now().After(end) {
					t.Fatal("the peer's byte never came")
				}
				time.Sleep(time.Millisecond)
			}
			if up.UnwatchPeerHangup() {
				t.Fatal("bytes taken for a hang-up")
			}
			// Watched again: the hang-up runs the function once.
			ch := make(chan struct{}, 2)
			if !up.WatchPeerHangup(interruptFunc(func() { ch <- struct{}{} })) {
				t.Fatal("not watched again")
			}
			c.hangUp(peer)
			fired(t, ch)
			if !up.UnwatchPeerHangup() {
				t.Fatal("Unwatch did not report the hang-up")
			}
			if len(ch) != 0 {
				t.Fatal("the function ran twice")
			}
			// A watch that begins after the hang-up sees it at once.
			ch2 := make(chan struct{}, 1)
			if !up.WatchPeerHangup(interruptFunc(func() { ch2 <- struct{}{} })) {
				t.Fatal("not watched a third time")
			}
			fired(t, ch2)
			up.UnwatchPeerHangup()
		})
	}
}

// interruptFunc is a function as an Interrupter.
type interruptFunc func()

func (f interruptFunc) InterruptRead() { f() }
