package main

import (
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// testSink serves tcpsink's protocol: read to the end, answer the count
// (plus lie, to test the check), close.
func testSink(t *testing.T, lie int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				var b [8]byte
				binary.BigEndian.PutUint64(b[:], uint64(n+lie))
				_, _ = c.Write(b[:])
			}()
		}
	}()
	return ln.Addr().String()
}

func TestBulk(t *testing.T) {
	total := int64(3<<20 + 1) // not a multiple of the connections or the write size
	s := bulk(testSink(t, 0), total, 3, 10*time.Second)
	if s.Errors != 0 || s.Bytes != total || s.Elapsed <= 0 {
		t.Fatalf("bulk = %+v, want %d bytes and no error", s, total)
	}
	kv := s.kv()
	for _, want := range []string{"bytes=3145729\n", "conns=3\n", "errors=0\n", "throughput="} {
		if !strings.Contains(kv, want) {
			t.Errorf("summary lacks %q:\n%s", want, kv)
		}
	}
}

func TestBulkCountMismatch(t *testing.T) {
	s := bulk(testSink(t, -1), 1<<20, 2, 10*time.Second)
	if s.Errors != 2 || s.Bytes != 0 || !strings.Contains(s.FirstErr, "the sink read") {
		t.Fatalf("bulk = %+v, want both connections failed on the count", s)
	}
	if !strings.Contains(s.kv(), "first_error=the sink read") {
		t.Fatalf("summary lacks the first error:\n%s", s.kv())
	}
}

func TestHandshakes(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Connection") != "close" || r.Host != "example.com" {
			http.Error(w, "want Connection: close and Host example.com", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer ts.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	s := handshakes(ts.Listener.Addr().String(), clientConfig("example.com", roots), 2, 300*time.Millisecond)
	if s.Errors != 0 || s.Conns == 0 || s.P50 <= 0 || s.P99 < s.P50 {
		t.Fatalf("handshakes = %+v, want connections and no error", s)
	}
	// A name the certificate does not hold fails every handshake.
	s = handshakes(ts.Listener.Addr().String(), clientConfig("other.test", roots), 1, 100*time.Millisecond)
	if s.Conns != 0 || s.Errors == 0 || !strings.Contains(s.FirstErr, "handshake") {
		t.Fatalf("handshakes with a wrong name = %+v, want only failures", s)
	}
	if kv := s.kv(); !strings.Contains(kv, "requests=0\n") || !strings.Contains(kv, "first_error=handshake") {
		t.Fatalf("summary:\n%s", kv)
	}
}
