package sock

import (
	"io"
	"net"
	"testing"
	"time"
)

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
