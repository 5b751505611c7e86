package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSinkWritesEveryDatagramAsALine: over a real socket, each datagram
// becomes one line, whether or not it ends in a newline, and Close writes
// what is buffered.
func TestSinkWritesEveryDatagramAsALine(t *testing.T) {
	tests := []struct {
		desc string
		msg  string
		want string
	}{
		{desc: "syslog datagram without newline", msg: "<134>Nov 25 22:00:00 haproxy[1]: 127.0.0.1:5000 [..] bench upstream 0/0/0/0/0 200 100", want: "<134>Nov 25 22:00:00 haproxy[1]: 127.0.0.1:5000 [..] bench upstream 0/0/0/0/0 200 100\n"},
		{desc: "with its own newline", msg: "line\n", want: "line\n"},
		{desc: "empty datagram", msg: "", want: "\n"},
	}
	conn, err := listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "haproxy.log")
	s, err := openSink(out)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.receive(conn); close(done) }()
	client, err := net.Dial("udp", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var want strings.Builder
	for _, tc := range tests {
		if _, err := client.Write([]byte(tc.msg)); err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		want.WriteString(tc.want)
	}
	// Wait until every datagram was read: the file fills within the
	// flush interval.
	deadline := time.Now().Add(flushInterval + 5*time.Second)
	for {
		if b, _ := os.ReadFile(out); len(b) >= want.Len() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lines never reached the file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = conn.Close()
	<-done
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Fatalf("file holds %q, want %q", got, want.String())
	}
}

// TestSinkCloseFlushes: lines still buffered are written by Close.
func TestSinkCloseFlushes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "haproxy.log")
	s, err := openSink(out)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		s.appendLine([]byte("a log line"))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("a log line\n", 1000); string(got) != want {
		t.Fatalf("%d bytes written, want %d", len(got), len(want))
	}
}
