//go:build unix

package sockpeek

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
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
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// eventually polls cond with a bound: loopback delivery is not instant.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 5 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func peekConn(t *testing.T, c net.Conn, b []byte) (n int, e syscall.Errno) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) { n, e = Peek(fd, b) }); err != nil {
		t.Fatal(err)
	}
	return n, e
}

func TestPeekAndPeerClosed(t *testing.T) {
	client, server := tcpPair(t)
	var b [4]byte
	if _, e := peekConn(t, client, b[:]); e != syscall.EAGAIN {
		t.Fatalf("idle connection: Peek errno = %v, want EAGAIN", e)
	}
	if PeerClosed(client) {
		t.Fatal("idle open connection reported closed")
	}

	// Bytes nobody asked for: seen, and still there for the next read.
	if _, err := server.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "unasked bytes", func() bool { return PeerClosed(client) })
	if n, e := peekConn(t, client, b[:]); e != 0 || string(b[:n]) != "hi" {
		t.Fatalf("Peek = %q, %v; want \"hi\"", b[:n], e)
	}
	got := make([]byte, 2)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "hi" {
		t.Fatalf("read after Peek = %q, %v: the bytes must still be there", got, err)
	}
	if PeerClosed(client) {
		t.Fatal("drained connection reported closed")
	}

	// The peer's close: the end of the stream, 0 bytes and no error.
	server.Close()
	eventually(t, "peer close", func() bool { return PeerClosed(client) })
	if n, e := peekConn(t, client, b[:]); n != 0 || e != 0 {
		t.Fatalf("after close: Peek = %d, %v; want 0, no error", n, e)
	}
}

func TestPeerClosedNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	b.Close()
	if PeerClosed(a) {
		t.Fatal("a connection that is not a socket is taken as open")
	}
}
