package sock

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/tlstest"
)

func TestRecordWatch(t *testing.T) {
	// Two records (bodies of 3 and 0 bytes), then a 300-byte one.
	rec := func(n int) []byte {
		b := []byte{23, 3, 3, byte(n >> 8), byte(n)}
		return append(b, make([]byte, n)...)
	}
	stream := append(append(rec(3), rec(0)...), rec(300)...)
	ends := map[int]bool{0: true, 8: true, 13: true, len(stream): true}
	// Fed in pieces of every size, the watch is whole exactly at the
	// records' ends.
	for size := 1; size <= len(stream); size++ {
		w := recordWatch{on: true}
		for at := 0; at < len(stream); {
			next := min(at+size, len(stream))
			w.saw(stream[at:next])
			at = next
			if w.whole() != ends[at] {
				t.Fatalf("pieces of %d: whole() = %v after %d bytes", size, w.whole(), at)
			}
		}
	}
	if w := (recordWatch{}); !w.whole() {
		t.Fatal("a watch that is off is not whole")
	}
}

// A Conn under a TLS layer does not park while the bytes it has read end
// inside a record; it parks again once the record is whole.
func TestPartOfARecordDoesNotPark(t *testing.T) {
	sc, peer := pair(t)
	var l Layer
	l.Init(sc)
	sc.EnableParking(10 * time.Millisecond)
	sc.SetIdleWait(true)
	// A record header and half of its 8-byte body.
	if _, err := peer.Write([]byte{23, 3, 3, 0, 8, 1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := io.ReadAtLeast(sc, buf, 9); n != 9 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	// Many check periods pass: the read ends at its real deadline.
	sc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := sc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle Read inside a record = %v; want the deadline", err)
	}
	if _, err := peer.Write([]byte{5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	sc.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := io.ReadFull(sc, buf[:4]); n != 4 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	readParked(t, sc, 5*time.Second)
}

// tlsPair returns the server side of a TLS connection over a parking Conn,
// served through a Layer, and the client side, both handshaken, with the
// client's socket.
func tlsPair(t *testing.T) (*layered, *tls.Conn, net.Conn) {
	t.Helper()
	ca := tlstest.NewCA(t, "layer")
	leaf := ca.Server(t, tlstest.Names{DNS: []string{"a.test"}})
	sc, peer := pair(t)
	sc.EnableParking(10 * time.Millisecond)
	lc := &layered{Conn: tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})}
	lc.layer.Init(sc)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cc := tls.Client(peer, &tls.Config{ServerName: "a.test", RootCAs: roots})
	_ = peer.SetDeadline(time.Now().Add(15 * time.Second))
	done := make(chan error, 1)
	go func() { done <- lc.Handshake() }()
	if err := cc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return lc, cc, peer
}

// layered is a TLS connection served through a Layer, as the server's is.
type layered struct {
	*tls.Conn
	layer Layer
}

func (c *layered) Read(p []byte) (int, error) { return c.layer.Read(c.Conn, p) }
func (c *layered) Close() error               { return c.layer.Close(c.Conn) }
func (c *layered) SockLayer() *Layer          { return &c.layer }
func (c *layered) Held() bool                 { return c.layer.Held() }
func (c *layered) Park(h ParkHandler) error   { return c.layer.Park(c, h) }
func (c *layered) SetReadDeadline(t time.Time) error {
	c.layer.EndHead()
	return c.Conn.SetReadDeadline(t)
}

var _ Parkable = (*layered)(nil)

// A TLS connection whose socket parks gets ErrParked through crypto/tls,
// which does not keep it: the server's Close holds the socket without
// touching the TLS session, and once woken, the same session goes on in
// both directions. At its deadline the parker closes it through the TLS
// connection, which sends close_notify.
func TestTLSOverAParkedConn(t *testing.T) {
	lc, cc, peer := tlsPair(t)
	br := bufio.NewReader(cc)
	// exchange sends msg from the client (unless it was sent already) and
	// a reply back.
	exchange := func(msg string, sent bool) {
		t.Helper()
		if !sent {
			if _, err := io.WriteString(cc, msg); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(lc, buf); err != nil || string(buf) != msg {
			t.Fatalf("server read %q, %v; want %q", buf, err, msg)
		}
		if _, err := io.WriteString(lc, "reply\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := br.ReadString('\n'); err != nil || line != "reply\n" {
			t.Fatalf("client read %q, %v", line, err)
		}
	}
	// park waits idle until the connection parks, as the server does.
	park := func(deadline time.Time) *parkEvents {
		t.Helper()
		ServerWaits(lc, true)
		lc.SetReadDeadline(deadline)
		if _, err := lc.Read(make([]byte, 16)); !errors.Is(err, ErrParked) {
			t.Fatalf("idle Read = %v; want ErrParked", err)
		}
		if err := lc.Close(); err != nil || !lc.Held() {
			t.Fatalf("Close after ErrParked = %v, held %v; want nil, held", err, lc.Held())
		}
		ev := newParkEvents()
		if err := lc.Park(ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}

	exchange("request 1", false)
	for _, msg := range []string{"request 2", "request 3"} {
		ev := park(time.Now().Add(time.Minute))
		if _, err := io.WriteString(cc, msg); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-ev.woke:
			if c != net.Conn(lc) {
				t.Fatalf("woke %T, not the layered connection", c)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not woken by the next message")
		}
		ServerWaits(lc, false)
		exchange(msg, true)
	}

	ev := park(time.Now().Add(300 * time.Millisecond))
	select {
	case c := <-ev.closed:
		if c != net.Conn(lc) {
			t.Fatalf("closed %T, not the layered connection", c)
		}
	case <-ev.woke:
		t.Fatal("woke with nothing sent")
	case <-time.After(5 * time.Second):
		t.Fatal("not closed at its read deadline")
	}
	// What the client has left to read is one record (the alert), then
	// the end.
	rest, err := io.ReadAll(peer)
	if err != nil || len(rest) < recordHeaderLen || int(rest[3])<<8|int(rest[4]) != len(rest)-recordHeaderLen {
		t.Fatalf("after the close: %d bytes (%x), %v; want one record, close_notify", len(rest), rest, err)
	}
}

// AwaitFirstByte keeps the byte it read for Read, or reports ErrParked when
// nothing came for a check period, leaving the session usable.
func TestLayerAwaitFirstByte(t *testing.T) {
	t.Run("a byte", func(t *testing.T) {
		lc, cc, _ := tlsPair(t)
		if !lc.layer.Parks() {
			t.Fatal("a layer over a parking Conn does not park")
		}
		if _, err := io.WriteString(cc, "hello"); err != nil {
			t.Fatal(err)
		}
		if err := lc.layer.AwaitFirstByte(lc.Conn); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(lc, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v", buf, err)
		}
	})
	t.Run("silence", func(t *testing.T) {
		lc, cc, _ := tlsPair(t)
		lc.SetReadDeadline(time.Now().Add(time.Minute))
		if err := lc.layer.AwaitFirstByte(lc.Conn); !errors.Is(err, ErrParked) {
			t.Fatalf("AwaitFirstByte on a silent connection = %v; want ErrParked", err)
		}
		if err := lc.Close(); err != nil || !lc.Held() {
			t.Fatalf("Close after ErrParked = %v, held %v", err, lc.Held())
		}
		ev := newParkEvents()
		if err := lc.Park(ev); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(cc, "hello"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ev.woke:
		case <-time.After(5 * time.Second):
			t.Fatal("not woken by the first message")
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(lc, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read after waking %q, %v", buf, err)
		}
	})
}
