package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// writeSize is the size of each write: large, as bulk senders write.
const writeSize = 256 << 10

// bulkSummary is what one bulk run measured.
type bulkSummary struct {
	Bytes    int64 // bytes the sink confirmed
	Conns    int
	Elapsed  time.Duration
	Errors   int
	FirstErr string
}

func (s bulkSummary) kv() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bytes=%d\nconns=%d\nseconds=%.6f\n", s.Bytes, s.Conns, s.Elapsed.Seconds())
	tp := 0.0
	if s.Elapsed > 0 {
		tp = float64(s.Bytes) / s.Elapsed.Seconds()
	}
	fmt.Fprintf(&b, "throughput=%.0f\nerrors=%d\n", tp, s.Errors)
	if s.FirstErr != "" {
		fmt.Fprintf(&b, "first_error=%s\n", strings.Join(strings.Fields(s.FirstErr), " "))
	}
	return b.String()
}

func runBulk(args []string) error {
	fs := flag.NewFlagSet("bulk", flag.ContinueOnError)
	addr := fs.String("addr", "", "address of the sink, or of a proxy in front of it")
	total := fs.Int64("bytes", 1<<30, "bytes to write in all")
	conns := fs.Int("conns", 4, "connections to spread them over")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on a connection after this long")
	out := fs.String("out", "", "file for the key=value summary; standard output if empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" || *total <= 0 || *conns <= 0 || int64(*conns) > *total {
		return errors.New("bulk needs -addr, a positive -bytes and -conns, at most one connection per byte")
	}
	return output(*out, bulk(*addr, *total, *conns, *timeout).kv())
}

// bulk writes total bytes to addr over conns connections at once.
func bulk(addr string, total int64, conns int, timeout time.Duration) bulkSummary {
	s := bulkSummary{Conns: conns}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conns {
		share := total / int64(conns)
		if i == conns-1 {
			share += total % int64(conns)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := sendShare(addr, share, timeout)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.Errors++
				if s.FirstErr == "" {
					s.FirstErr = err.Error()
				}
				return
			}
			s.Bytes += share
		}()
	}
	wg.Wait()
	s.Elapsed = time.Since(start)
	return s
}

// sendShare writes n bytes on one connection, half-closes it and checks
// the sink's count.
func sendShare(addr string, n int64, timeout time.Duration) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	buf := make([]byte, writeSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	for left := n; left > 0; {
		chunk := buf
		if left < int64(len(chunk)) {
			chunk = chunk[:left]
		}
		m, err := c.Write(chunk)
		left -= int64(m)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return fmt.Errorf("half-close: %w", err)
	}
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("reading the sink's count: %w", err)
	}
	if got := int64(binary.BigEndian.Uint64(b[:])); got != n {
		return fmt.Errorf("the sink read %d bytes of %d", got, n)
	}
	return nil
}
