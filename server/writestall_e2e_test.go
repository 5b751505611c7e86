package server

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestResponseWriteStall: a client that stops reading its response is cut
// off once the gateway's writes have waited responseWriteStall for it, and
// the upstream streaming to it is let go, on both transports and under TLS.
// Before, such a client held its request and the upstream's connection for
// as long as it stayed connected (150 s and counting, measured). A slow
// client that keeps taking bytes is served to the end, however long the
// whole response takes.
func TestResponseWriteStall(t *testing.T) {
	old := responseWriteStall.Swap(int64(400 * time.Millisecond))
	t.Cleanup(func() { responseWriteStall.Store(old) })
	var streams, ended atomic.Int32
	chunk := make([]byte, 64<<10)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			// 2 MiB, which a slow reader takes over a few stalls' time.
			w.Header().Set("Content-Length", strconv.Itoa(32*len(chunk)))
			for range 32 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		// Endless: only the client's going ends it.
		streams.Add(1)
		defer ended.Add(1)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	pki := newTestPKI(t, "stall")
	srv := pki.Server("stall.test", "stall.test")
	cfg := `
binds:
- port: 1
  listeners:
  - routes: [{backends: [{host: '${UP}'}]}]
- port: 2
  listeners:
  - protocol: HTTPS
    tls: {cert: '${CERT}', key: '${KEY}'}
    routes: [{backends: [{host: '${UP}'}]}]
`
	vars := map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile}
	for _, tc := range []struct {
		desc string
		tr   Transport
		tls  bool
	}{
		{"std", TransportStd, false},
		{"netpoll", TransportNetpoll, false},
		{"std, HTTPS", TransportStd, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGatewayWith(t, cfg, vars, tc.tr)
			dial := func() net.Conn {
				if tc.tls {
					c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tg.addr(2),
						&tls.Config{ServerName: "stall.test", RootCAs: pki.Pool, NextProtos: []string{"http/1.1"}})
					if err != nil {
						t.Fatal(err)
					}
					return c
				}
				c, err := net.DialTimeout("tcp", tg.addr(1), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}

			// A client that reads the head and then nothing.
			before := ended.Load()
			c := dial()
			defer c.Close()
			if tcp, ok := c.(*net.TCPConn); ok {
				_ = tcp.SetReadBuffer(4 << 10)
			}
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(c, "GET /endless HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReaderSize(c, 1024)
			if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 200 OK\r\n" {
				t.Fatalf("status line %q, %v", line, err)
			}
			eventually(t, 20*time.Second, "the upstream let go of the stalled client's stream", func() bool {
				return ended.Load() > before
			})
			// The connection was reset (what the gateway had not sent yet
			// is dropped, not trickled out): reading ends at once.
			_, err := io.Copy(io.Discard, br)
			if err == nil {
				err = io.EOF
			}
			if !errors.Is(err, io.EOF) && !isClosed(err) {
				t.Fatalf("after the stall: %v; want the connection closed", err)
			}

			// A slow client that keeps reading gets all of it.
			c2 := dial()
			defer c2.Close()
			_ = c2.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(c2, "GET /slow HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(&slowReader{r: c2, every: 150 * time.Millisecond, n: 256 << 10}), nil)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil || n != int64(32*len(chunk)) {
				t.Fatalf("the slow client got %d bytes, %v; want %d", n, err, 32*len(chunk))
			}
		})
	}
}

// slowReader reads at most n bytes, then waits every before reading on.
type slowReader struct {
	r     io.Reader
	every time.Duration
	n     int
	left  int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		time.Sleep(s.every) // the slow client's pace, not a wait for a condition
		s.left = s.n
	}
	if len(p) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= n
	return n, err
}

// TestTunnelsHaveNoWriteStall: a CONNECT tunnel whose client pauses its
// reading longer than responseWriteStall is not cut: a tunnel's peer may
// hold its side back (backpressure), and the tunnel's own idle limits
// apply. Before, the stall was taken off fasthttp's wrapper of the client's
// connection, not the connection, and the tunnel was reset.
func TestTunnelsHaveNoWriteStall(t *testing.T) {
	old := responseWriteStall.Swap(int64(200 * time.Millisecond))
	t.Cleanup(func() { responseWriteStall.Store(old) })
	const size = 16 << 20 // more than the sockets on the way hold
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(make([]byte, size))
	}()
	tg := startGateway(t, connectToTCPRoute, map[string]string{"UP": ln.Addr().String()})
	c, br, status := connectRaw(t, tg.addr(1), ln.Addr().String())
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	time.Sleep(time.Second) // the client holds its side back, five stalls long
	n, err := io.CopyN(io.Discard, br, size)
	if err != nil || n != size {
		t.Fatalf("the tunnel carried %d bytes, %v; want %d", n, err, size)
	}
}
