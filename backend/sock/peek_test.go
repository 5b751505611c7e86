package sock

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A peek goes on when the poller's timer fires before the deadline asked
// for (a park check, or a lazy deadline), and ends at the real one. A new
// connection's ClientHello is peeked at with parking already on: a
// spurious end there closed the connection with a reset.
func TestPeekOutlivesAnEarlyTimer(t *testing.T) {
	sc, peer := pair(t)
	sc.EnableParking(time.Hour)
	// As if the timer had fired for a check: the poller's deadline is past.
	if err := sc.setPoller(time.Now().Add(-time.Millisecond).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	enough := func(b []byte) bool { return len(b) >= 5 }
	if n, err := sc.Peek(buf, enough); n != 5 || err != nil {
		t.Fatalf("Peek = %d, %v; want the 5 bytes", n, err)
	}
	// The deadline asked for still ends a peek waiting for more.
	sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := sc.Peek(buf, func(b []byte) bool { return len(b) >= 10 })
	if n != 5 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Peek for more = %d, %v; want 5 and the deadline", n, err)
	}
}

// TestPromptConnPeekKeepsWhatItRead: a PromptConn peeks by reading, so
// what one peek read must reach every later peek and read, whatever their
// sizes: a shorter peek after a longer one (the classifier's first byte
// after a PROXY header's peek), then the reads.
func TestPromptConnPeekKeepsWhatItRead(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		_, _ = io.WriteString(b, "HEADER")
		_, _ = io.WriteString(b, "body!")
	}()
	c := &PromptConn{Conn: a}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Peek(buf, func(p []byte) bool { return len(p) >= 11 })
	if err != nil || string(buf[:n]) != "HEADERbody!" {
		t.Fatalf("peek %q, %v", buf[:n], err)
	}
	if _, err := io.ReadFull(c, buf[:6]); err != nil || string(buf[:6]) != "HEADER" {
		t.Fatalf("read %q, %v", buf[:6], err)
	}
	if n, _ := c.Peek(buf[:1], func(p []byte) bool { return len(p) >= 1 }); n != 1 || buf[0] != 'b' {
		t.Fatalf("short peek %q", buf[:n])
	}
	if n, _ := c.Peek(buf[:3], func(p []byte) bool { return len(p) >= 3 }); string(buf[:n]) != "bod" {
		t.Fatalf("second peek %q", buf[:n])
	}
	if _, err := io.ReadFull(c, buf[:5]); err != nil || string(buf[:5]) != "body!" {
		t.Fatalf("read %q, %v", buf[:5], err)
	}
}
