// Package mcp owns the MCP gateway: many MCP servers ("targets") behind one
// endpoint. It keeps client sessions, opens the upstream session of each
// target through backend/mcp/transport, fans list calls out and merges them
// (prefixing names when several targets are multiplexed), routes calls to the
// target that serves them, maps JSON-RPC ids in both directions so targets
// never collide, and asks an Authorizer which tools, prompts and resources a
// request may see.
package mcp

import (
	"crypto/cipher"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
)

// Options configure one MCP backend.
type Options struct {
	// Name identifies the backend in logs and metrics (the route's name).
	Name   string
	Config *config.MCPBackend
	// SessionTTL closes client sessions idle for longer (default 30m).
	SessionTTL time.Duration
	// SessionKey (32 bytes) encrypts session ids; without it they are only
	// encoded.
	SessionKey []byte
	Logger     *zap.Logger
	Metrics    Metrics
	// CallTimeout bounds one call to a target when the route sets no timeout
	// (default 10m).
	CallTimeout time.Duration
}

// Metrics records one MCP call; the server implements it.
type Metrics interface {
	ObserveMCP(method, target, tool string, failed bool, d time.Duration)
}

// DefaultSessionTTL is config.mcp.sessionTtl's default.
const DefaultSessionTTL = 30 * time.Minute

const defaultCallTimeout = 10 * time.Minute

// Backend is the compiled MCP backend of a route. It is shared by every
// request of the route and outlives reloads that leave its config unchanged.
type Backend struct {
	opts      Options
	log       *zap.Logger
	targets   []*config.MCPTarget
	byName    map[string]int
	prefix    bool // names are prefixed with the target name
	never     bool // prefixMode never with several targets: route by lookup
	failOpen  bool
	stateless bool
	ttl       time.Duration
	aead      cipher.AEAD
	client    *http.Client

	mu       sync.Mutex
	sessions map[string]*Session
	closed   bool
	stop     chan struct{}
	sweeping sync.WaitGroup
}

// New compiles an MCP backend.
func New(o Options) (*Backend, error) {
	c := o.Config
	b := &Backend{
		opts:      o,
		log:       o.Logger,
		byName:    map[string]int{},
		failOpen:  c.FailureMode == "failOpen",
		stateless: c.Stateless(),
		ttl:       o.SessionTTL,
		sessions:  map[string]*Session{},
		stop:      make(chan struct{}),
	}
	if b.log == nil {
		b.log = zap.NewNop()
	}
	if b.ttl <= 0 {
		b.ttl = DefaultSessionTTL
	}
	if b.opts.CallTimeout <= 0 {
		b.opts.CallTimeout = defaultCallTimeout
	}
	for i := range c.Targets {
		b.targets = append(b.targets, &c.Targets[i])
		b.byName[c.Targets[i].Name] = i
	}
	switch c.PrefixMode {
	case "always":
		b.prefix = true
	case "never":
		b.never = len(b.targets) > 1
	default:
		b.prefix = len(b.targets) > 1
	}
	if len(o.SessionKey) > 0 {
		aead, err := newAEAD(o.SessionKey)
		if err != nil {
			return nil, err
		}
		b.aead = aead
	}
	b.client = &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 0, // calls are bounded by their context
		ExpectContinueTimeout: time.Second,
	}}
	b.sweeping.Add(1)
	go b.sweep()
	return b, nil
}

// Close ends every session (stopping stdio processes) and the sweeper.
func (b *Backend) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	sessions := b.sessions
	b.sessions = map[string]*Session{}
	b.mu.Unlock()
	close(b.stop)
	for _, s := range sessions {
		s.close()
	}
	b.sweeping.Wait()
	b.client.CloseIdleConnections()
}

// sweep closes idle sessions.
func (b *Backend) sweep() {
	defer b.sweeping.Done()
	every := b.ttl / 4
	every = min(max(every, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		var idle []*Session
		b.mu.Lock()
		for id, s := range b.sessions {
			if s.expired(now) {
				delete(b.sessions, id)
				idle = append(idle, s)
			}
		}
		b.mu.Unlock()
		for _, s := range idle {
			b.log.Debug("mcp session expired", zap.String("backend", b.opts.Name))
			s.close()
		}
	}
}

// lookup returns a live session.
func (b *Backend) lookup(id string) *Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	if s == nil {
		return nil
	}
	if s.expired(time.Now()) {
		delete(b.sessions, id)
		go s.close()
		return nil
	}
	s.touch()
	return s
}

// register stores a session under its id; it fails once the backend closed.
func (b *Backend) register(s *Session) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.sessions[s.id] = s
	return true
}

// remove forgets and closes a session.
func (b *Backend) remove(id string) bool {
	b.mu.Lock()
	s := b.sessions[id]
	delete(b.sessions, id)
	b.mu.Unlock()
	if s == nil {
		return false
	}
	s.close()
	return true
}

// SessionCount is the number of live client sessions.
func (b *Backend) SessionCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

func (b *Backend) observe(method, target, tool string, failed bool, start time.Time) {
	if b.opts.Metrics != nil {
		b.opts.Metrics.ObserveMCP(method, target, tool, failed, time.Since(start))
	}
}
