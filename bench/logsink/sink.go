package main

import (
	"bufio"
	"net"
	"os"
	"sync"
	"time"
)

// As nginx's `access_log ... buffer=64k flush=1s`.
const (
	bufferSize    = 64 << 10
	flushInterval = time.Second
	// maxDatagram bounds one message; HAProxy's default is 1024 bytes.
	maxDatagram = 64 << 10
)

// sink appends each datagram it receives to a file, as one line.
type sink struct {
	file *os.File
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

func openSink(path string) (*sink, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s := &sink{file: f, w: bufio.NewWriterSize(f, bufferSize), stop: make(chan struct{}), done: make(chan struct{})}
	go s.flushEvery(flushInterval)
	return s, nil
}

// receive appends datagrams until conn is closed or fails.
func (s *sink) receive(conn net.PacketConn) {
	buf := make([]byte, maxDatagram)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		s.appendLine(buf[:n])
	}
}

// appendLine writes msg with a newline of its own if it has none (syslog
// datagrams usually do not).
func (s *sink) appendLine(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(msg)
	if len(msg) == 0 || msg[len(msg)-1] != '\n' {
		_ = s.w.WriteByte('\n')
	}
}

func (s *sink) flushEvery(d time.Duration) {
	defer close(s.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.mu.Lock()
			_ = s.w.Flush()
			s.mu.Unlock()
		case <-s.stop:
			return
		}
	}
}

// Close stops the flush timer, writes what the buffer holds and closes the
// file.
func (s *sink) Close() error {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.w.Flush()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}
