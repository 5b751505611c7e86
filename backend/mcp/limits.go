package mcp

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	codec "github.com/relaygate/gateway/codec/jsonrpc"

	"github.com/relaygate/gateway/config"
)

// DefaultMaxSessions is Options.MaxSessions' default.
const DefaultMaxSessions = 10000

// DefaultMaxStdioProcesses is Options.MaxStdioProcesses' default.
const DefaultMaxStdioProcesses = 64

// evictionSample is how many sessions are looked at to pick one to make
// room: the least recently used of a random sample (Go's map order),
// as Redis approximates LRU, so that making room costs the same with
// ten sessions or ten thousand.
const evictionSample = 32

// errTooManySessions refuses a session when every session is busy.
var errTooManySessions = errors.New("too many MCP sessions, all in use; try again later")

// maxSessionCalls bounds a session's client calls in flight. Each holds a
// goroutine and, to an HTTP target, a connection until its answer is
// delivered: a legacy SSE client, answered 202 at once, had 3000 calls
// (and 3000 upstream connections) running 0.8 s after it began. Past it a
// call is refused with 429 and Retry-After.
const maxSessionCalls = 64

// codeTooManyCalls is the JSON-RPC code of a call refused at
// maxSessionCalls (implementation-defined server error).
const codeTooManyCalls = -32000

// takeCall counts a client call in flight; false at the session's bound.
func (s *Session) takeCall() bool {
	if s.calls.Add(1) > s.b.maxCalls {
		s.calls.Add(-1)
		return false
	}
	return true
}

// doneCall ends a call takeCall counted, once its answer is delivered.
func (s *Session) doneCall() { s.calls.Add(-1) }

// tooManyCalls refuses a call past maxSessionCalls.
func (b *Backend) tooManyCalls(fctx *fasthttp.RequestCtx, id jsonrpc.ID) {
	body, _ := codec.Encode(errorResponse(id, codeTooManyCalls,
		fmt.Sprintf("too many calls in flight on this session (%d, the gateway's bound); try again later", b.maxCalls)))
	fctx.Response.SetStatusCode(fasthttp.StatusTooManyRequests)
	fctx.Response.Header.Set("Retry-After", tooManyRetryAfter)
	fctx.Response.Header.SetContentType("application/json")
	fctx.Response.SetBody(body)
}

// HTTP status of a refused session, and its Retry-After (seconds).
const (
	tooManyStatus     = http.StatusServiceUnavailable
	tooManyRetryAfter = "1"
)

// procBudget counts the stdio processes running for a backend.
type procBudget struct {
	mu      sync.Mutex
	max     int
	running int
}

func (p *procBudget) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running >= p.max {
		return false
	}
	p.running++
	return true
}

func (p *procBudget) give() {
	p.mu.Lock()
	p.running--
	p.mu.Unlock()
}

// Running is the number of stdio processes running for the backend.
func (b *Backend) Running() int {
	b.procs.mu.Lock()
	defer b.procs.mu.Unlock()
	return b.procs.running
}

// takeProcess reserves a process slot for a stdio target of s. At the
// bound it stops the least recently used idle process of another session
// (parked: that session starts it again on its next call), and fails when
// none is idle.
func (b *Backend) takeProcess(s *Session) error {
	for range 4 {
		if b.procs.take() {
			return nil
		}
		if !b.parkLeastUsed(s) {
			break
		}
	}
	return safe(fmt.Sprintf("%d stdio processes are running for this backend, its bound (config.mcp.maxStdioProcesses), and none is idle; try again later", b.procs.max))
}

// parkLeastUsed stops the least recently used stdio process, among a
// sample of the sessions other than except, that has no call in flight;
// sessions without an open client stream go first. It reports whether it
// stopped one (its slot is free once park returns: Close waits for the
// process to be reaped).
func (b *Backend) parkLeastUsed(except *Session) bool {
	b.mu.Lock()
	sample := make([]*Session, 0, evictionSample)
	for _, s := range b.sessions {
		if s != except && s.hasStdio() {
			sample = append(sample, s)
			if len(sample) == evictionSample {
				break
			}
		}
	}
	b.mu.Unlock()
	type candidate struct {
		s         *Session
		i         int
		streaming bool
		used      int64
	}
	var best *candidate
	for _, s := range sample {
		streaming := s.streaming()
		s.mu.Lock()
		for i, u := range s.ups {
			if !runsProcess(s, i, u) || u.calls.Load() > 0 {
				continue
			}
			c := candidate{s: s, i: i, streaming: streaming, used: u.lastUsed.Load()}
			if best == nil || (!c.streaming && best.streaming) || (c.streaming == best.streaming && c.used < best.used) {
				best = &c
			}
		}
		s.mu.Unlock()
	}
	if best == nil || !best.s.park(best.i, 0, time.Now()) {
		return false
	}
	b.log.Info("mcp stdio process stopped to make room for another session's", zap.String("backend", b.opts.Name),
		zap.String("target", b.targets[best.i].Name), zap.Int("max", b.procs.max))
	return true
}

// hasStdio reports whether a stdio target of s has a process running.
func (s *Session) hasStdio() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, u := range s.ups {
		if runsProcess(s, i, u) {
			return true
		}
	}
	return false
}

// runsProcess reports whether u, target i's connection in s, is a stdio
// process still running: one that exited (a crash) gave its slot back,
// and parking it would bring the target back on the next call.
func runsProcess(s *Session, i int, u *upstream) bool {
	return u != nil && s.b.targets[i].Kind == config.MCPTargetStdio && u.dead.Load() == nil
}

// busy reports whether s is in use: a call in flight, a target's request
// waiting for the client, or the client's stream open.
func (s *Session) busy() bool {
	if s.streaming() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) > 0 || len(s.serverReqs) > 0
}

// makeRoomLocked is called, with b.mu held, before a session is added: at
// the bound it ends the least recently used idle session of a sample and
// closes it in the background (evicted), and reports false when every
// sampled session is busy.
func (b *Backend) makeRoomLocked() (evicted, ok bool) {
	if len(b.sessions) < b.maxSessions {
		return false, true
	}
	var victim *Session
	var victimID string
	n := 0
	for id, s := range b.sessions {
		if n == evictionSample {
			break
		}
		n++
		if s.busy() {
			continue
		}
		if victim == nil || s.lastUsed.Load() < victim.lastUsed.Load() {
			victim, victimID = s, id
		}
	}
	if victim == nil {
		return false, false
	}
	b.endLocked(victimID, victim)
	b.closeLaterLocked(victim)
	return true, true
}

// admit makes room for a new session before it is opened, so that an
// evicted session's processes stop before the new one's start. It reports
// false when the backend is full of busy sessions.
func (b *Backend) admit() bool {
	b.mu.Lock()
	evicted, ok := b.makeRoomLocked()
	b.mu.Unlock()
	if evicted {
		b.log.Info("mcp session ended to make room for a new one", zap.String("backend", b.opts.Name), zap.Int("max", b.maxSessions))
	}
	return ok
}
