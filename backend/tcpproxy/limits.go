package tcpproxy

import "time"

// idleChecks is how many times per Options.Idle a pipe looks for movement.
const idleChecks = 4

// limits is a pipe's idle and duration limits: one timer, which fires
// idleChecks times per idle period (or once, at the maximum duration) and
// is moved by nothing else. Each check compares the bytes moved since the
// last one: the pipe's own counts (per chunk written) and, for sockets, the
// kernel's (TCP_INFO bytes received and acknowledged, which move while a
// splice is under way, or a write waits on a slow peer). A pipe with no
// movement for idleChecks checks in a row, that is for at least Idle, ends.
// So no read or write touches a timer or a deadline.
type limits struct {
	timer     *time.Timer
	idle, max time.Duration
	quiet     int    // checks in a row without movement
	last      uint64 // the movement count at the last check
}

// startLimits starts the timer if there is a limit.
func (p *pipe) startLimits(idle, max time.Duration) {
	if idle <= 0 && max <= 0 {
		return
	}
	l := &p.limits
	l.idle, l.max = idle, max
	if idle > 0 {
		for s := SideClient; s <= SideUpstream; s++ {
			if e := &p.ends[s]; e.tcp != nil {
				e.raw, _ = e.tcp.SyscallConn()
			}
		}
		// No count yet: the first check takes its own as the baseline,
		// sparing every connection two getsockopt calls at its start. A
		// pipe silent from the start then ends after five checks rather
		// than four: Idle and a check's period, the latest any idle pipe
		// ends.
		l.last = noBaseline
	}
	p.mu.Lock()
	if !p.closed {
		l.timer = time.AfterFunc(l.next(0), p.check)
	}
	p.mu.Unlock()
}

// noBaseline is limits.last before the first check: no movement count is
// ever this.
const noBaseline = ^uint64(0)

// next is how long from elapsed the next check comes.
func (l *limits) next(elapsed time.Duration) time.Duration {
	d := l.max - elapsed
	if l.idle > 0 {
		if t := l.idle / idleChecks; l.max <= 0 || t < d {
			d = t
		}
	}
	return max(d, time.Millisecond)
}

// check is the timer's function.
func (p *pipe) check() {
	l := &p.limits
	elapsed := time.Since(p.start)
	if l.max > 0 && elapsed >= l.max {
		p.limit(ReasonMaxDuration)
		return
	}
	if l.idle > 0 {
		m := p.movement()
		p.mu.Lock()
		if m != l.last {
			l.last, l.quiet = m, 0
		} else {
			l.quiet++
		}
		idle := l.quiet >= idleChecks
		p.mu.Unlock()
		if idle {
			p.limit(ReasonIdle)
			return
		}
	}
	p.mu.Lock()
	if !p.closed {
		l.timer.Reset(l.next(elapsed))
	}
	p.mu.Unlock()
}

// movement is a count that changes whenever bytes move.
func (p *pipe) movement() uint64 {
	m := uint64(p.dirs[0].n.Load() + p.dirs[1].n.Load())
	m += p.ends[SideClient].kernelBytes()
	m += p.ends[SideUpstream].kernelBytes()
	return m
}

func (l *limits) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}
