package sock

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Parking: a server connection idle between requests costs a goroutine
// (its stack) and whatever its server keeps for it while it waits: about
// 17 KiB under fasthttp. A parked connection costs neither. Its server
// gives it up (ErrParked from Read, then Close, which keeps it open), and
// the parker watches its descriptor in an epoll set of its own, with no
// goroutine per connection, until it becomes readable (the next request,
// or its end) or its read deadline passes (then the parker closes it).
//
// A connection parks only after a whole check period (the parkAfter given
// to EnableParking) in which it received nothing and ended waiting for its
// next request; the checks ride on the lazy read deadline (the poller's
// timer fires at least once per period), so a busy connection pays nothing
// per request.

// ErrParked is what Read returns when the connection, idle between requests
// for a check period, is to be parked: the server ends its serving loop and
// hands the connection to Park after its Close.
//
// It is a net.Error whose Temporary is true: crypto/tls keeps a read error
// of any other kind as the connection's for good (readRecordOrCCS), and a
// TLS connection read over a parked Conn must stay usable when it wakes.
var ErrParked error = parkedError{}

// parkedError is ErrParked's type.
type parkedError struct{}

func (parkedError) Error() string   { return "sock: idle connection parked" }
func (parkedError) Timeout() bool   { return false }
func (parkedError) Temporary() bool { return true }

// Park states.
const (
	parkServing int32 = iota // served by a goroutine
	parkPending              // Read returned ErrParked; the server's Close keeps it open
	parkHeld                 // the server holds it, not yet parked
	parkParked               // in the parker, no goroutine
	parkClosed               // closed while parked or held
)

// ParkHandler is told what becomes of a parked connection. The connection
// it gets is the one that was parked: a Conn, or the connection served over
// a layer on one (Layer.Park).
type ParkHandler interface {
	// Wake is called, on the parker's goroutine, when a parked connection
	// becomes readable (a request arrived, or the peer closed it). It must
	// not block: it hands the connection to a goroutine that serves it.
	Wake(c net.Conn)
	// Closed is called, on a goroutine of its own, once a parked connection
	// was closed: its read deadline passed, or Close was called.
	Closed(c net.Conn)
}

// Parkable is what a server needs of a connection to park it: a *Conn, or
// a connection served over a protocol layered on one (a TLS connection
// with a Layer). Its Read returns ErrParked when it is to park; the
// server's Close right after that keeps it open and makes it Held; Park
// then hands it to the parker, and the handler gets it back as it was.
type Parkable interface {
	net.Conn
	// Held reports whether the server, having got ErrParked, closed the
	// connection: it is still open, and the server is to Park it (or Close
	// it, which then closes it).
	Held() bool
	// Park hands a held connection to the parker until it becomes readable
	// (h.Wake) or its read deadline passes (the parker closes it, then
	// h.Closed). On an error the connection is still held, and the caller
	// closes it.
	Park(h ParkHandler) error
}

// parkFields are a Conn's parking state.
type parkFields struct {
	after    time.Duration // check period; 0 never parks
	idleWait bool          // the server waits for the next request (SetIdleWait)
	// idleCheck, when set, is asked at a park check whether the server,
	// reading, waits idle (SetIdleCheck).
	idleCheck func() bool
	mark      int64 // received at the last check
	state     atomic.Int32
	token     uint64
	timer     *time.Timer
	handler   ParkHandler
	// outer is the connection Park was given (the Conn itself, or a
	// connection layered on it): the handler gets it back, and the parker
	// closes it through it at its deadline, so that a layer can say goodbye
	// (TLS's close_notify) as an unparked connection would.
	outer net.Conn
}

// EnableParking makes the connection (a server's) park when it has been
// idle, between requests, for a whole check period of after. Only the
// serving goroutine may call it, before its first Read.
func (c *Conn) EnableParking(after time.Duration) {
	c.park.after = after
	c.park.mark = c.received
	if after <= 0 {
		return
	}
	// Give the poller a deadline no later than the first check.
	_ = c.pollBy(time.Now().Add(after).UnixNano())
}

// SetIdleWait tells the connection whether its server is waiting for the
// next request (true) or serving one (false); only an idle wait parks.
// Only the serving goroutine may call it.
func (c *Conn) SetIdleWait(idle bool) { c.park.idleWait = idle }

// SetIdleCheck gives the connection a question to ask, at a park check (a
// whole period in which nothing was received, during a Read), instead of
// being told by SetIdleWait: whether its server, reading, is waiting idle.
// A server whose idleness depends on work done on other goroutines (an
// HTTP/2 connection, idle once its last stream's handler is done) asks
// there; the check runs on the reading goroutine, inside its Read, about
// once a period. Only the serving goroutine may call it, before it reads.
func (c *Conn) SetIdleCheck(idle func() bool) { c.park.idleCheck = idle }

// SetIdleCheck is Conn.SetIdleCheck for a data-path connection, or one
// served over a Layer on one; other connections (which do not park) are
// left alone.
func SetIdleCheck(c net.Conn, idle func() bool) {
	switch t := c.(type) {
	case *Conn:
		t.SetIdleCheck(idle)
	case Layered:
		if l := t.SockLayer(); l.sock != nil {
			l.sock.SetIdleCheck(idle)
		}
	}
}

// AwaitFirstByte waits, up to d, for a new server connection's first byte
// (or its end) without reading it. It reports false when d passed first,
// and the caller may Hold and Park the connection rather than keep a
// goroutine waiting; an error means the read deadline passed first (or the
// connection failed). Only the serving goroutine may call it.
func (c *Conn) AwaitFirstByte(d time.Duration) (bool, error) {
	until := time.Now().Add(d).UnixNano()
	for fired := false; ; fired = true {
		poll := until
		if want := c.readDeadline.Load(); want != 0 && want < poll {
			poll = want
		}
		// A timer already due by then (EnableParking's) serves; once one
		// fired early, the poller gets the deadline itself.
		var err error
		if fired {
			err = c.setPoller(poll)
		} else {
			err = c.pollBy(poll)
		}
		if err != nil {
			return false, err
		}
		c.peekWait = true
		err = c.raw.Read(c.peekFn)
		c.peekWait = false
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return false, err
		}
		now := time.Now().UnixNano()
		if want := c.readDeadline.Load(); want != 0 && now >= want {
			return false, c.opError("read", err)
		}
		if now >= until {
			return false, nil
		}
	}
}

// Hold makes a connection its server serves held, as the server's Close
// after ErrParked does, for Park. It reports false if the connection is
// not being served (it was closed).
func (c *Conn) Hold() bool { return c.park.state.CompareAndSwap(parkServing, parkHeld) }

// Held is Parkable's: whether the server, having got ErrParked, closed the
// connection, which is still open, held for Park.
func (c *Conn) Held() bool { return c.park.state.Load() == parkHeld }

// holdPending makes a connection whose Read just returned ErrParked held,
// as the server's Close then does; it reports false in any other state.
func (c *Conn) holdPending() bool { return c.park.state.CompareAndSwap(parkPending, parkHeld) }

// parkCheck is the park check run when the poller's deadline fired before
// the one asked for (want, UnixNano, 0 for none) at now. It reports whether
// the connection parks; if not, it returns the poller's next deadline.
func (c *Conn) parkCheck(want, now int64) (park bool, next int64) {
	if c.park.after <= 0 {
		return false, want
	}
	if c.received == c.park.mark && c.records.whole() &&
		(c.park.idleWait || c.park.idleCheck != nil && c.park.idleCheck()) {
		return true, 0
	}
	c.park.mark = c.received
	next = now + int64(c.park.after)
	if want != 0 && want < next {
		next = want
	}
	return false, next
}

// Close closes the connection. The one exception is the server's close
// right after Read returned ErrParked: the connection then stays open,
// held for Park. (A close from elsewhere in that instant is taken for the
// server's; the server checks whether it still wants the connection before
// parking it.)
func (c *Conn) Close() error {
	if c.holdPending() {
		return nil
	}
	if c.park.state.Load() == parkServing {
		return c.closeSocket()
	}
	prev := c.park.state.Swap(parkClosed)
	if prev == parkParked {
		defaultParker().forget(c)
		if c.park.timer != nil {
			c.park.timer.Stop()
		}
		err := c.TCPConn.Close()
		go c.park.handler.Closed(c.park.outer)
		return err
	}
	if prev == parkClosed {
		return c.opError("close", net.ErrClosed)
	}
	return c.closeSocket()
}

// Park is Parkable's: it hands a held connection to the parker.
func (c *Conn) Park(h ParkHandler) error { return c.parkAs(c, h) }

// parkAs parks c, held, as the connection outer (c, or a connection
// layered on c), which h gets back and the parker closes at the deadline.
func (c *Conn) parkAs(outer net.Conn, h ParkHandler) error {
	if c.park.state.Load() != parkHeld {
		return errors.New("sock: Park of a connection not held")
	}
	want := c.readDeadline.Load()
	var wait time.Duration
	if want != 0 {
		if wait = time.Until(time.Unix(0, want)); wait <= 0 {
			return errParkDeadline
		}
	}
	c.park.handler = h
	c.park.outer = outer
	return defaultParker().add(c, wait)
}

var errParkDeadline = errors.New("sock: read deadline already passed")

// parker watches parked connections in an epoll set of its own.
type parker struct {
	epfd  int
	mu    sync.Mutex
	conns map[uint64]*Conn
	next  uint64
}

var defaultParker = sync.OnceValue(func() *parker {
	p := &parker{epfd: -1, conns: map[uint64]*Conn{}}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return p // add fails from now on; the server closes what it would park
	}
	p.epfd = fd
	go p.run()
	return p
})

// add registers c, held, for its first readable event; wait (0: none)
// bounds how long it stays parked.
func (p *parker) add(c *Conn, wait time.Duration) error {
	if p.epfd < 0 {
		return errors.New("sock: no epoll set for parking")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	token := p.next
	// The event's 64 bits of user data are Fd and Pad together.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
		Fd: int32(uint32(token)), Pad: int32(uint32(token >> 32))}
	var ctlErr error
	err := c.raw.Control(func(fd uintptr) {
		ctlErr = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil {
		err = ctlErr
	}
	if err != nil {
		return err
	}
	c.park.token = token
	p.conns[token] = c
	c.park.timer = nil
	if wait > 0 {
		// The timer's function takes p.mu, so it waits for this add to end
		// even if it fires at once.
		c.park.timer = time.AfterFunc(wait, func() { p.expire(c) })
	}
	c.park.state.Store(parkParked)
	return nil
}

// Parked returns how many connections are parked now.
func Parked() int {
	p := defaultParker()
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// forget drops c from the parker (it is being closed).
func (p *parker) forget(c *Conn) {
	p.mu.Lock()
	delete(p.conns, c.park.token)
	p.mu.Unlock()
}

// expire closes c when its read deadline passes while parked, through the
// connection it was parked as.
func (p *parker) expire(c *Conn) {
	p.mu.Lock()
	if p.conns[c.park.token] != c {
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = c.park.outer.Close()
}

// run waits for parked connections to become readable and wakes them.
func (p *parker) run() {
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			// EBADF/EINVAL cannot happen on a set that is never closed.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for i := range n {
			token := uint64(uint32(events[i].Fd)) | uint64(uint32(events[i].Pad))<<32
			p.mu.Lock()
			c := p.conns[token]
			delete(p.conns, token)
			p.mu.Unlock()
			if c == nil || !c.park.state.CompareAndSwap(parkParked, parkServing) {
				continue // closed meanwhile
			}
			if c.park.timer != nil {
				c.park.timer.Stop()
			}
			_ = c.raw.Control(func(fd uintptr) {
				_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
			})
			// What woke it is the next request (or the end): the server
			// serves it before the connection waits idle again. The
			// poller's deadline passed while parked, so the first Read
			// runs a park check at once: a mark that matches no count
			// keeps that check from parking before a whole period.
			c.park.idleWait = false
			c.park.mark = -1
			c.park.handler.Wake(c.park.outer)
		}
	}
}
