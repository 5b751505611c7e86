package sock

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// parkEvents records what the parker reports.
type parkEvents struct {
	woke   chan net.Conn
	closed chan net.Conn
}

func newParkEvents() *parkEvents {
	return &parkEvents{woke: make(chan net.Conn, 1), closed: make(chan net.Conn, 1)}
}

func (e *parkEvents) Wake(c net.Conn)   { e.woke <- c }
func (e *parkEvents) Closed(c net.Conn) { e.closed <- c }

// idleServer returns a server-side Conn that has served one request and
// waits, idle, for the next, parking after period.
func idleServer(t *testing.T, period time.Duration, deadline time.Time) (*Conn, *net.TCPConn) {
	t.Helper()
	sc, peer := pair(t)
	sc.EnableParking(period)
	if _, err := peer.Write([]byte("request 1")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9)
	if _, err := io.ReadFull(sc, buf); err != nil {
		t.Fatal(err)
	}
	sc.SetIdleWait(true)
	if err := sc.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	return sc, peer
}

// readParked reads sc, which must end with ErrParked within bound.
func readParked(t *testing.T, sc *Conn, bound time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := sc.Read(make([]byte, 16))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrParked) {
			t.Fatalf("idle Read = %v; want ErrParked", err)
		}
	case <-time.After(bound):
		t.Fatalf("idle Read still waiting after %v", bound)
	}
}

// parkIdle reads sc until ErrParked, closes it as the server does, and
// parks it, reporting to the returned events.
func parkIdle(t *testing.T, sc *Conn) *parkEvents {
	t.Helper()
	readParked(t, sc, 5*time.Second)
	sc.Close()
	ev := newParkEvents()
	if err := sc.Park(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestIdleConnectionParksAndWakesOnTheNextRequest(t *testing.T) {
	sc, peer := idleServer(t, 20*time.Millisecond, time.Now().Add(time.Minute))
	readParked(t, sc, 5*time.Second)
	// The server's close after ErrParked keeps the connection.
	if err := sc.Close(); err != nil || !sc.Held() {
		t.Fatalf("Close after ErrParked = %v, held %v; want nil, held", err, sc.Held())
	}
	ev := newParkEvents()
	if err := sc.Park(ev); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ev.woke:
		t.Fatal("woke before anything arrived")
	case <-ev.closed:
		t.Fatal("closed before its deadline")
	default:
	}
	if _, err := peer.Write([]byte("request 2")); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-ev.woke:
		if c != sc {
			t.Fatal("woke another connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by the next request")
	}
	buf := make([]byte, 9)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "request 2" {
		t.Fatalf("read after waking = %q, %v", buf, err)
	}
	// Served again: a reply goes out, and Close closes for real.
	if _, err := sc.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(peer)
	if err != nil || string(got) != "reply" {
		t.Fatalf("peer read %q, %v; want the reply, then the end", got, err)
	}
}

func TestParkedConnectionWakesWhenThePeerCloses(t *testing.T) {
	sc, peer := idleServer(t, 20*time.Millisecond, time.Now().Add(time.Minute))
	ev := parkIdle(t, sc)
	peer.Close()
	select {
	case <-ev.woke:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by the peer's close")
	}
	if n, err := sc.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("Read after waking = %d, %v; want io.EOF", n, err)
	}
}

func TestParkedConnectionClosesAtItsDeadline(t *testing.T) {
	sc, peer := idleServer(t, 20*time.Millisecond, time.Now().Add(400*time.Millisecond))
	ev := parkIdle(t, sc)
	select {
	case <-ev.closed:
	case <-ev.woke:
		t.Fatal("woke with nothing sent")
	case <-time.After(5 * time.Second):
		t.Fatal("not closed at its read deadline")
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := peer.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("peer Read = %d, %v; want io.EOF", n, err)
	}
}

func TestCloseOfAParkedConnection(t *testing.T) {
	sc, peer := idleServer(t, 20*time.Millisecond, time.Now().Add(time.Minute))
	ev := parkIdle(t, sc)
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ev.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Closed not reported")
	}
	if err := sc.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close = %v; want net.ErrClosed", err)
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := peer.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("peer Read = %d, %v; want io.EOF", n, err)
	}
	// The parker dropped it.
	p := defaultParker()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c == sc {
			t.Fatal("closed connection still in the parker")
		}
	}
}

func TestParkWithThePassedDeadlineFails(t *testing.T) {
	sc, _ := idleServer(t, 20*time.Millisecond, time.Now().Add(time.Minute))
	readParked(t, sc, 5*time.Second)
	sc.Close()
	sc.SetReadDeadline(time.Now().Add(-time.Second))
	if err := sc.Park(newParkEvents()); err == nil {
		t.Fatal("Park with a read deadline already passed succeeded")
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
}

// A connection serving a request (not in an idle wait), or without parking,
// waits for its bytes until its real deadline, however many park checks
// pass meanwhile.
func TestOnlyAnIdleWaitParks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		period time.Duration
		idle   bool
	}{
		{"serving", 10 * time.Millisecond, false},
		{"parking off", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, _ := pair(t)
			sc.EnableParking(tc.period)
			sc.SetIdleWait(tc.idle)
			sc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, err := sc.Read(make([]byte, 4))
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Read = %v; want the deadline", err)
			}
		})
	}
}

// Bytes arriving within each check period keep an idle-waiting connection
// from parking: it parks only after a whole period without any.
func TestBytesWithinAPeriodPreventParking(t *testing.T) {
	sc, peer := pair(t)
	sc.EnableParking(time.Hour) // no check fires on its own
	sc.SetIdleWait(true)
	sc.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// A check now sees a byte since the last: no park, next check set.
	if park, next := sc.parkCheck(time.Now().Add(time.Minute).UnixNano(), time.Now().UnixNano()); park || next == 0 {
		t.Fatalf("parkCheck after a byte = %v, %d; want no park and a next check", park, next)
	}
	// The next check sees nothing new: park.
	if park, _ := sc.parkCheck(time.Now().Add(time.Minute).UnixNano(), time.Now().UnixNano()); !park {
		t.Fatal("parkCheck after a silent period did not park")
	}
	// The next check comes no later than the real deadline.
	sc.SetIdleWait(false)
	now := time.Now().UnixNano()
	want := now + int64(time.Millisecond)
	if _, next := sc.parkCheck(want, now); next != want {
		t.Fatalf("next check %d; want the deadline %d", next, want)
	}
}

// An idle check (SetIdleCheck) decides instead of SetIdleWait: it is asked
// only at a check after a silent period, and a connection it parks, woken
// by bytes, reads them rather than parking again at once (its poller's
// deadline passed while it was parked, so the first Read after the wake
// runs a check straight away).
func TestIdleCheckParksAndTheWakeServes(t *testing.T) {
	sc, peer := pair(t)
	sc.EnableParking(20 * time.Millisecond)
	asked := 0
	idle := false
	sc.SetIdleCheck(func() bool { asked++; return idle })
	// Not idle: the reads run into their deadline, never parked.
	sc.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	if _, err := sc.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read while the check says busy = %v; want the deadline", err)
	}
	if asked == 0 {
		t.Fatal("the idle check was never asked")
	}
	idle = true
	sc.SetReadDeadline(time.Time{})
	ev := parkIdle(t, sc)
	if _, err := peer.Write([]byte("next")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ev.woke:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by the next bytes")
	}
	buf := make([]byte, 4)
	n, err := sc.Read(buf)
	if err != nil || string(buf[:n]) != "next" {
		t.Fatalf("Read after the wake = %q, %v; want the bytes that woke it", buf[:n], err)
	}
}

// BenchmarkParkAndWake is the cost of one park and wake: the server gives
// the connection up, the parker adds it, the next request wakes it, and
// the server reads that request.
func BenchmarkParkAndWake(b *testing.B) {
	sc, peer := pair(b)
	ev := newParkEvents()
	buf := make([]byte, 1)
	sc.park.after = time.Hour
	for b.Loop() {
		sc.park.state.Store(parkPending)
		sc.Close() // the server's close: held
		if err := sc.Park(ev); err != nil {
			b.Fatal(err)
		}
		peer.Write(buf)
		<-ev.woke
		if _, err := sc.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAwaitFirstByte(t *testing.T) {
	t.Run("nothing within the wait", func(t *testing.T) {
		sc, _ := pair(t)
		sc.SetReadDeadline(time.Now().Add(time.Minute))
		if ok, err := sc.AwaitFirstByte(30 * time.Millisecond); ok || err != nil {
			t.Fatalf("AwaitFirstByte = %v, %v; want false, nil", ok, err)
		}
		if !sc.Hold() || !sc.Held() {
			t.Fatal("a served connection could not be held")
		}
	})
	t.Run("bytes waiting", func(t *testing.T) {
		sc, peer := pair(t)
		peer.Write([]byte("GET"))
		if ok, err := sc.AwaitFirstByte(time.Minute); !ok || err != nil {
			t.Fatalf("AwaitFirstByte = %v, %v; want true, nil", ok, err)
		}
		// Nothing was consumed.
		buf := make([]byte, 3)
		if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "GET" {
			t.Fatalf("read %q, %v", buf, err)
		}
	})
	t.Run("bytes arriving during the wait", func(t *testing.T) {
		sc, peer := pair(t)
		go func() {
			time.Sleep(20 * time.Millisecond) // the wait must be under way
			peer.Write([]byte("x"))
		}()
		if ok, err := sc.AwaitFirstByte(time.Minute); !ok || err != nil {
			t.Fatalf("AwaitFirstByte = %v, %v; want true, nil", ok, err)
		}
	})
	t.Run("the peer closes", func(t *testing.T) {
		sc, peer := pair(t)
		peer.Close()
		if ok, err := sc.AwaitFirstByte(time.Minute); !ok || err != nil {
			t.Fatalf("AwaitFirstByte = %v, %v; want true, nil", ok, err)
		}
	})
	t.Run("the read deadline first", func(t *testing.T) {
		sc, _ := pair(t)
		sc.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		if _, err := sc.AwaitFirstByte(time.Minute); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("AwaitFirstByte error %v; want the deadline", err)
		}
	})
}
