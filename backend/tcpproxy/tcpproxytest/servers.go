package tcpproxytest

import (
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Server is a loopback listener whose every connection is handled by a
// function on a goroutine of its own.
type Server struct {
	Addr string
	ln   net.Listener
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Serve starts a Server. handle owns its connection (Close closes the ones
// left when it stops).
func Serve(handle func(*net.TCPConn)) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				handle(c.(*net.TCPConn))
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
		}
	}()
	return s, nil
}

// Close stops accepting, closes the connections left and waits for the
// handlers.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// ChunkSize is the size of the servers' and the source's reads and writes.
const ChunkSize = 63 << 10

// Echo writes back what it reads until the end of the stream, then closes
// its sending direction.
func Echo(c *net.TCPConn) {
	buf := make([]byte, ChunkSize)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = c.CloseWrite()
			return
		}
	}
}

// Drain reads r to its end and returns how many bytes it read.
func Drain(r io.Reader) (int64, error) {
	buf := make([]byte, ChunkSize)
	var total int64
	for {
		n, err := r.Read(buf)
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// SinkCount is what a sink read on one connection.
type SinkCount struct {
	Bytes int64
	Err   error
}

// Sink returns a handler that reads each connection to its end and sends
// the count on counts.
func Sink(counts chan<- SinkCount) func(*net.TCPConn) {
	return func(c *net.TCPConn) {
		n, err := Drain(c)
		counts <- SinkCount{n, err}
	}
}

// Source writes total bytes of block (repeated) to w.
func Source(w io.Writer, block []byte, total int64) error {
	for total > 0 {
		p := block
		if int64(len(p)) > total {
			p = p[:total]
		}
		n, err := w.Write(p)
		total -= int64(n)
		if err != nil {
			return err
		}
	}
	return nil
}

// CPU is the CPU time the process used (user and system).
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MaxRSS is the process's peak resident set size in KiB.
func MaxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss
}
