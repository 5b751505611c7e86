package sock

import (
	"sync"

	"golang.org/x/sys/unix"
)

// peerHangup watches an upstream connection for its peer's hang-up (FIN
// or RST) while a request's streamed body is sent on it (WatchPeerHangup).
// Sending such a body waits on the client as much as on the upstream: the
// exchange's goroutine sits in a read of the client's connection while the
// client is quiet, and an upstream that goes meanwhile is noticed only when
// the client sends more (or its body idle timeout passes, and the failure
// is taken for the client's). The socket joins the hang-up watcher's epoll
// set (HangupWatch's), one-shot, so that the watcher runs the exchange's
// interruption of that read.
type peerHangup struct {
	// id is the socket's key in the watcher while watched (kept across
	// watches); inSet says the socket is in the watcher's epoll set.
	// Both are the exchange's goroutine's.
	id    uint64
	inSet bool
	// mu guards the rest, between the exchange's goroutine and the
	// watcher's.
	mu    sync.Mutex
	intr  Interrupter
	fired bool
}

// Interrupter ends a read in progress elsewhere, from any goroutine,
// without blocking (WatchPeerHangup).
type Interrupter interface {
	InterruptRead()
}

// event notes the peer's hang-up (the watcher's goroutine, its lock held).
func (p *peerHangup) event(uint32) {
	p.mu.Lock()
	if !p.fired {
		p.fired = true
		if p.intr != nil {
			p.intr.InterruptRead()
		}
	}
	p.mu.Unlock()
}

// WatchPeerHangup has intr's InterruptRead run once, on another
// goroutine, if the peer hangs up (its FIN or RST) before
// UnwatchPeerHangup, or has already. It reports false, watching nothing,
// when the socket cannot be watched. Only the goroutine using the
// connection calls it.
func (c *Conn) WatchPeerHangup(intr Interrupter) bool {
	w := theHangupWatcher()
	if w == nil || c.fd < 0 {
		return false
	}
	p := &c.peer
	p.mu.Lock()
	p.intr, p.fired = intr, false
	p.mu.Unlock()
	w.mu.Lock()
	if p.id == 0 {
		w.next++
		p.id = w.next
	}
	w.byID[p.id] = p
	w.mu.Unlock()
	// Once in the set, the socket stays there (disarmed by EPOLLONESHOT
	// or by an event nobody waits for), so the next watch is one MOD;
	// closing the socket takes it out.
	err := w.arm(c.fd, p.id, unix.EPOLLRDHUP|unix.EPOLLONESHOT, p.inSet)
	if err != nil {
		c.UnwatchPeerHangup()
		return false
	}
	p.inSet = true
	return true
}

// UnwatchPeerHangup ends what WatchPeerHangup began and reports whether
// the peer hung up meanwhile (the interruption ran, or is done running). An event that
// comes later finds no watch.
func (c *Conn) UnwatchPeerHangup() (hungUp bool) {
	w := hangups.w.Load()
	if w == nil {
		return false
	}
	p := &c.peer
	w.mu.Lock()
	if w.byID[p.id] == watchEntry(p) {
		delete(w.byID, p.id)
	}
	w.mu.Unlock()
	p.mu.Lock()
	hungUp = p.fired
	p.intr = nil
	p.mu.Unlock()
	return hungUp
}

// HasBytes reports whether bytes from the peer wait to be read (an answer
// that came before a hang-up), without waiting or taking them.
func (c *Conn) HasBytes() bool { return c.peerSending() }
