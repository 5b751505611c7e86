package logline

import (
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
)

// lineSink gathers lines in memory and writes them out in the background:
// two buffers, one filling while the other is written. A full buffer goes
// to the writer goroutine and the filling continues in the other one; only
// when the writer still holds that one does a line wait (back-pressure:
// no line is dropped, and memory stays at two buffers). A ticker hands over
// whatever was gathered every interval, so lines are out within about an
// interval when traffic is light. With size 0 every line is written at
// once, under the lock.
//
// This is nginx's `access_log … buffer=64k flush=1s`, but the write(2)
// happens off the request path: with one buffer (zapcore.BufferedWriteSyncer)
// the request that fills it waits for the write of all of it.
type lineSink struct {
	out zapcore.WriteSyncer

	mu      sync.Mutex
	cur     []byte      // the buffer filling
	full    chan []byte // to the writer
	free    chan []byte // from the writer, emptied
	done    chan struct{}
	stopped bool   // Stop ran: lines are written at once from then on
	scratch []byte // a line written at once (writeNow)
	// quit ends the ticker.
	quit chan struct{}
}

// newLineSink returns a sink of two buffers of size bytes flushed every
// interval (both > 0), or, with size 0, one that writes every line at once.
func newLineSink(out zapcore.WriteSyncer, size int, interval time.Duration) *lineSink {
	s := &lineSink{out: out}
	if size <= 0 {
		s.stopped = true
		return s
	}
	s.cur = make([]byte, 0, size)
	s.full, s.free = make(chan []byte, 1), make(chan []byte, 1)
	s.free <- make([]byte, 0, size)
	s.done, s.quit = make(chan struct{}), make(chan struct{})
	go s.writeLoop()
	go s.tickLoop(interval)
	return s
}

// write adds one line. The line is copied: the caller may reuse it.
func (s *lineSink) write(line []byte) {
	s.mu.Lock()
	if s.stopped {
		s.writeNow(line)
		s.mu.Unlock()
		return
	}
	if len(s.cur)+len(line) > cap(s.cur) {
		s.handOff()
		if len(line) > cap(s.cur) {
			// Longer than a buffer: out on its own, after what came before.
			s.waitWriter()
			s.writeNow(line)
			s.mu.Unlock()
			return
		}
	}
	s.cur = append(s.cur, line...)
	s.mu.Unlock()
}

// writeNow writes line at once, through a copy: handing the caller's
// bytes to out (an interface) would move every line's stack buffer to the
// heap. s.mu is held.
func (s *lineSink) writeNow(line []byte) {
	s.scratch = append(s.scratch[:0], line...)
	_, _ = s.out.Write(s.scratch)
	if cap(s.scratch) > maxPooledLine {
		s.scratch = nil
	}
}

// handOff gives the filling buffer, if it holds anything, to the writer
// and continues in the other one, waiting for the writer to be done with
// it. s.mu is held.
func (s *lineSink) handOff() {
	if len(s.cur) == 0 {
		return
	}
	s.full <- s.cur
	s.cur = <-s.free
}

// waitWriter returns once the writer has written what it was given. s.mu
// is held, so nothing new reaches it meanwhile.
func (s *lineSink) waitWriter() {
	b := <-s.free
	s.free <- b
}

// writeLoop writes the buffers handed over, in order, and hands them back.
func (s *lineSink) writeLoop() {
	defer close(s.done)
	for b := range s.full {
		_, _ = s.out.Write(b)
		s.free <- b[:0]
	}
}

// tickLoop hands the filling buffer over every interval.
func (s *lineSink) tickLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.mu.Lock()
			if !s.stopped {
				s.handOff()
			}
			s.mu.Unlock()
		case <-s.quit:
			return
		}
	}
}

// Sync writes out every line logged so far and syncs the output.
func (s *lineSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.handOff()
		s.waitWriter()
	}
	return s.out.Sync()
}

// Stop writes out every line logged so far and ends the background work;
// lines logged after it are written at once. A second call only syncs.
func (s *lineSink) Stop() error {
	s.mu.Lock()
	if !s.stopped {
		s.handOff()
		s.stopped = true
		close(s.full)
		close(s.quit)
		<-s.done
	}
	s.mu.Unlock()
	return s.out.Sync()
}
