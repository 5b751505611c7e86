package server

import (
	"sync"
	"time"
)

// Streams are served on pooled goroutines. The request path needs a stack
// of tens of kilobytes; a new goroutine starts with a small one and grows
// it by copying, which measured 10 % of the HTTP/2 front-end's CPU under
// load with a goroutine per stream. A worker keeps its grown stack from
// one stream to the next, as fasthttp's worker pool does for HTTP/1.1
// connections. Workers idle for h2WorkerIdle end.

// h2WorkerIdle is how long a worker waits for a stream before it ends.
const h2WorkerIdle = 10 * time.Second

// h2Workers is the process's pool of stream workers.
var h2Workers h2WorkerPool

type h2WorkerPool struct {
	mu sync.Mutex
	// idle are the waiting workers, the most recently used last (and
	// first to be taken: its stack is the warmest).
	idle []*h2Worker
	// sweeping: a sweep of the idle workers is scheduled.
	sweeping bool
}

// h2Worker is a goroutine serving streams given to it on next; nil ends it.
type h2Worker struct {
	next     chan h2Job
	lastUsed time.Duration // monoNow when it last became idle
}

// h2Job is a stream for a worker to serve.
type h2Job struct {
	hc *h2Conn
	x  *h2Exchange
}

// serve has x's stream served by an idle worker, or a new one.
func (p *h2WorkerPool) serve(hc *h2Conn, x *h2Exchange) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.next <- h2Job{hc, x}
		return
	}
	p.mu.Unlock()
	w := &h2Worker{next: make(chan h2Job, 1)}
	go w.work(p, h2Job{hc, x})
}

// work serves its first stream, then each one it is given, until it is
// told to end.
func (w *h2Worker) work(p *h2WorkerPool, j h2Job) {
	for j.hc != nil {
		j.hc.run(j.x)
		p.release(w)
		j = <-w.next
	}
}

// release takes w back among the idle workers.
func (p *h2WorkerPool) release(w *h2Worker) {
	p.mu.Lock()
	w.lastUsed = monoNow()
	p.idle = append(p.idle, w)
	if !p.sweeping {
		p.sweeping = true
		time.AfterFunc(h2WorkerIdle, p.sweep)
	}
	p.mu.Unlock()
}

// sweep ends the workers idle for h2WorkerIdle, and schedules the next
// sweep while any remain.
func (p *h2WorkerPool) sweep() {
	now := monoNow()
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && now-p.idle[n].lastUsed >= h2WorkerIdle {
		p.idle[n].next <- h2Job{}
		n++
	}
	rest := copy(p.idle, p.idle[n:])
	clear(p.idle[rest:])
	p.idle = p.idle[:rest]
	if len(p.idle) > 0 {
		time.AfterFunc(h2WorkerIdle, p.sweep)
	} else {
		p.sweeping = false
	}
	p.mu.Unlock()
}
