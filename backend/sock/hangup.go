package sock

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// HangupWatch watches a client's connection for its hang-up (its FIN or
// RST: EPOLLRDHUP, as nginx watches for it), so that a request waiting on
// an upstream for that client stops waiting. It is the backend.ClientWatch
// of an HTTP/1.x request; an HTTP/2 stream has its own (a reset). A FIN
// counts as a hang-up, as for nginx: a client that half-closes its
// connection after its request and waits for the answer is taken to have
// gone.
//
// Each data-path connection has one (in its Server fields). Its socket
// joins an epoll set of the package's own, watched by one goroutine for
// the process, the first time Hangups is asked for it, edge-triggered, and
// stays there until the socket closes; watching one request costs no
// system call and takes only the watch's own lock. The Go poller's set is
// untouched: the request's goroutine keeps the connection's reads and
// deadlines to itself. Pipelined bytes are not a hang-up (only the hang-up
// is asked for).
//
// Watch, Unwatch and Gone are for the goroutine serving the connection;
// the hang-up is noted from the watcher's.
type HangupWatch struct {
	// id is the socket's key in the watcher (0: not registered), written
	// under the watcher's lock by the goroutine serving the connection.
	id uint64
	// mu guards the rest, between the serving goroutine and the watcher's
	// (which takes it under the watcher's lock).
	mu      sync.Mutex
	watched net.Conn // the upstream connection a hang-up ends, while one waits
	onGone  func()   // run at the hang-up (OnGone)
	gone    bool
	// grace, when positive, makes a FIN alone a hang-up only once it is
	// that old (a client that half-closes after its request may still
	// wait for the answer, RFC 9112 9.6); a reset is one at once. finTimer
	// runs out the grace of a FIN seen.
	grace    time.Duration
	finTimer *time.Timer
	// cut says the gateway cut the request (CutHangup); cutWatched is the
	// upstream connection a response streams from, which only a cut ends
	// (Cuts).
	cut        bool
	cutWatched net.Conn
}

// Hangups returns the HangupWatch of the data-path connection c (a TCP
// connection, under TLS or not), its socket watched from now on, or nil
// when c cannot be watched. ForgetHangup must follow when c is done with.
// grace is how old a FIN alone must be to count as the client's hang-up (0:
// at once, as nginx takes it); a reset counts at once whatever it is. The
// grace asked for last holds for the connection's next hang-up.
func Hangups(c net.Conn, grace time.Duration) *HangupWatch {
	f := ServerFields(c)
	if f == nil {
		return nil
	}
	h := &f.hangup
	h.setGrace(grace)
	if h.id != 0 {
		return h // (id is written only by the goroutine serving c)
	}
	w := theHangupWatcher()
	if w == nil {
		return nil
	}
	fd := clientFd(c)
	if fd < 0 {
		return nil
	}
	w.mu.Lock()
	w.next++
	id := w.next
	h.id = id
	w.byID[id] = h
	w.mu.Unlock()
	// (A socket forgotten while it stayed open, a parked connection handed
	// back to fasthttp later, is in the set already: it takes the new key.)
	if err := w.arm(fd, id, unix.EPOLLRDHUP|unix.EPOLLET, false); err != nil {
		w.mu.Lock()
		delete(w.byID, id)
		h.id = 0
		w.mu.Unlock()
		return nil
	}
	return h
}

// ForgetHangup ends the watch of c's socket (Hangups), when c is closed,
// parked or handed over, from the goroutine that served it: the watcher
// keeps nothing of c. (Closing the socket takes it out of the epoll set; a
// socket left open there, a parked one, has its events ignored until
// Hangups asks for it again.)
func ForgetHangup(c net.Conn) {
	f := ServerFields(c)
	if f == nil || f.hangup.id == 0 {
		return
	}
	w := hangups.w.Load()
	h := &f.hangup
	w.mu.Lock()
	delete(w.byID, h.id)
	h.id = 0
	h.mu.Lock()
	h.watched, h.onGone, h.gone, h.grace = nil, nil, false, 0
	if h.finTimer != nil {
		h.finTimer.Stop()
		h.finTimer = nil
	}
	h.mu.Unlock()
	w.mu.Unlock()
}

// CutHangup ends the wait of the request on the data-path connection c
// as its client's hang-up would (HangupWatch: the upstream exchange it
// waits on, OnGone's function), now and for any wait the request begins
// later: the gateway cuts the request (a drain whose time ran out). It may
// be called from any goroutine.
func CutHangup(c net.Conn) {
	f := ServerFields(c)
	if f == nil {
		return
	}
	h := &f.hangup
	h.mu.Lock()
	h.hangUp()
	h.cut = true
	if h.cutWatched != nil {
		_ = h.cutWatched.SetDeadline(LongAgo)
	}
	h.mu.Unlock()
}

// CutWatch is the watch of a data-path connection's request for its cut
// alone (CutHangup), not its client's hang-up: a response streaming from
// an upstream connection it watches is ended by the gateway's cut, while
// a client that half-closed after its request still reads it whole. It is
// a backend.ClientWatch; Gone reports the cut.
type CutWatch HangupWatch

// Cuts returns the CutWatch of the data-path connection c, nil when c has
// none.
func Cuts(c net.Conn) *CutWatch {
	f := ServerFields(c)
	if f == nil {
		return nil
	}
	return (*CutWatch)(&f.hangup)
}

// Watch ends c when the request is cut (at once, if it was).
func (w *CutWatch) Watch(c net.Conn) {
	h := (*HangupWatch)(w)
	h.mu.Lock()
	cut := h.cut
	if !cut {
		h.cutWatched = c
	}
	h.mu.Unlock()
	if cut {
		_ = c.SetDeadline(LongAgo)
	}
}

// Unwatch ends what Watch began and reports whether the request was cut.
func (w *CutWatch) Unwatch() bool {
	h := (*HangupWatch)(w)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cutWatched = nil
	return h.cut
}

// Gone reports whether the request was cut.
func (w *CutWatch) Gone() bool {
	h := (*HangupWatch)(w)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cut
}

// setGrace sets the grace of a FIN (Hangups).
func (h *HangupWatch) setGrace(d time.Duration) {
	h.mu.Lock()
	h.grace = d
	h.mu.Unlock()
}

// hangUp notes the hang-up: the upstream exchange waiting for this client
// ends, and OnGone's function runs (h.mu held).
func (h *HangupWatch) hangUp() {
	h.gone = true
	if h.watched != nil {
		_ = h.watched.SetDeadline(LongAgo)
	}
	if f := h.onGone; f != nil {
		h.onGone = nil
		f()
	}
}

// clientFd is the socket under a data-path connection, or -1.
func clientFd(c net.Conn) int {
	switch t := c.(type) {
	case *Conn:
		return t.fd
	case *PromptConn:
		return clientFd(t.Conn)
	case Layered:
		return clientFd(t.SockLayer().under)
	case interface{ Fd() int }: // a netpoll connection
		return t.Fd()
	case interface{ NetConn() net.Conn }: // a stream on a connection (a CONNECT tunnel's)
		return clientFd(t.NetConn())
	}
	return -1
}

// Watch ends c, an upstream connection serving the client's request, when
// the client hangs up (at once, if it has): c's deadline moves into the
// past, which ends the exchange's write or read.
func (h *HangupWatch) Watch(c net.Conn) {
	h.mu.Lock()
	gone := h.gone
	if !gone {
		h.watched = c
	}
	h.mu.Unlock()
	if gone {
		_ = c.SetDeadline(LongAgo)
	}
}

// OnGone has f run once when the client hangs up (at once, if it has),
// for a request whose wait is not on an upstream connection (an MCP call,
// ended through its context); OnGone(nil) takes it back. f runs on the
// watcher's goroutine and must not block: a context's cancel.
func (h *HangupWatch) OnGone(f func()) {
	h.mu.Lock()
	gone := h.gone
	if gone {
		h.onGone = nil
	} else {
		h.onGone = f
	}
	h.mu.Unlock()
	if gone && f != nil {
		f()
	}
}

// Unwatch ends what Watch began and reports whether the client hung up.
func (h *HangupWatch) Unwatch() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watched = nil
	return h.gone
}

// Gone reports whether the client hung up.
func (h *HangupWatch) Gone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gone
}

// LongAgo is a deadline long past: set from another goroutine, it ends a
// connection's read or write in progress (a client watch cutting an
// upstream exchange short).
var LongAgo = time.Unix(1, 0)

// hangupWatcher is the process's epoll set of watched client sockets and
// the goroutine that waits on it.
type hangupWatcher struct {
	epfd int
	mu   sync.Mutex
	next uint64
	byID map[uint64]watchEntry
}

// watchEntry is what the watcher holds for a socket: a client's
// HangupWatch, or an upstream connection's peerHangup.
type watchEntry interface {
	// event notes the socket's epoll events (the watcher's lock held).
	event(events uint32)
}

// arm gives the socket fd the key id and the events to watch in the
// epoll set: added, or, inSet, modified; a socket whose presence was
// guessed wrong (added before and forgotten, or taken out by its close)
// takes the other operation.
func (w *hangupWatcher) arm(fd int, id uint64, events uint32, inSet bool) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	op := unix.EPOLL_CTL_ADD
	if inSet {
		op = unix.EPOLL_CTL_MOD
	}
	err := unix.EpollCtl(w.epfd, op, fd, &ev)
	switch {
	case errors.Is(err, unix.EEXIST):
		err = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, fd, &ev)
	case errors.Is(err, unix.ENOENT):
		err = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	}
	return err
}

var hangups struct {
	once sync.Once
	w    atomic.Pointer[hangupWatcher] // nil until started, and if epoll failed
}

// theHangupWatcher starts the watcher on first use; nil when it cannot run.
func theHangupWatcher() *hangupWatcher {
	hangups.once.Do(func() {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		w := &hangupWatcher{epfd: epfd, byID: make(map[uint64]watchEntry)}
		go w.run()
		hangups.w.Store(w)
	})
	return hangups.w.Load()
}

// run waits for hang-ups and notes each on its connection's watch. The
// wait is a blocking system call: this goroutine holds a thread of its own.
func (w *hangupWatcher) run() {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		w.mu.Lock()
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if e := w.byID[id]; e != nil {
				e.event(ev.Events)
			}
		}
		w.mu.Unlock()
	}
}

// event notes a client's hang-up, or the start of a FIN's grace (the
// watcher's lock held).
func (h *HangupWatch) event(events uint32) {
	w := hangups.w.Load()
	reset := events&(unix.EPOLLHUP|unix.EPOLLERR) != 0
	h.mu.Lock()
	switch {
	case h.gone:
	case !reset && h.grace > 0:
		// A FIN alone: a half-close may still wait for its answer.
		if h.finTimer == nil {
			id := h.id
			h.finTimer = time.AfterFunc(h.grace, func() { w.expire(id, h) })
		}
	default:
		h.hangUp()
	}
	h.mu.Unlock()
}

// expire ends the grace of the FIN of watch id: from now on the client has
// hung up.
func (w *hangupWatcher) expire(id uint64, h *HangupWatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID[id] != watchEntry(h) {
		return // forgotten meanwhile
	}
	h.mu.Lock()
	h.finTimer = nil
	if !h.gone {
		h.hangUp()
	}
	h.mu.Unlock()
}
