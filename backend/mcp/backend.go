// Package mcp owns the MCP gateway: many MCP servers ("targets") behind one
// endpoint. It keeps client sessions, opens the upstream session of each
// target through backend/mcp/transport, fans list calls out and merges them
// (prefixing names when several targets are multiplexed), routes calls to the
// target that serves them, maps JSON-RPC ids in both directions so targets
// never collide, and asks an Authorizer which tools, prompts and resources a
// request may see.
package mcp

import (
	"cmp"
	"crypto/cipher"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
)

// Options configure one MCP backend.
type Options struct {
	// Name identifies the backend in logs and metrics (the route's name).
	Name string
	// Scope names the bind, listener and route the backend serves; session
	// ids are sealed to it, so no other route takes them. Default: Name.
	Scope  string
	Config *config.MCPBackend
	// SessionTTL closes client sessions idle for longer (default 30m).
	SessionTTL time.Duration
	// SessionKey (32 bytes) seals session ids; replicas that share it resume
	// each other's sessions. Without it a key of this process seals them.
	SessionKey []byte
	Logger     *zap.Logger
	Metrics    Metrics
	// CallTimeout bounds one call to a target when the route sets no timeout
	// (default 10m).
	CallTimeout time.Duration
	// TLS, when set, is how the HTTP targets are reached: with TLS on
	// their address, an http:// URL included (backendTLS). Without, an
	// https:// URL is verified as net/http does.
	TLS *tls.Config
	// StdioIdle stops a session's stdio process once it has been idle this
	// long while the client has no stream open (default 1m, at most the
	// session TTL); the next call starts it again. Clients that never end
	// their sessions then cost no process beyond it.
	StdioIdle time.Duration
	// MaxSessions bounds the live client sessions (default
	// DefaultMaxSessions): past it a new session ends the least recently
	// used idle one, or is refused with 503 when all are busy.
	MaxSessions int
	// MaxStdioProcesses bounds the stdio processes running at once over
	// all sessions (default DefaultMaxStdioProcesses): past it starting
	// one parks the least recently used idle one, or fails.
	MaxStdioProcesses int
	// TargetInitTimeout bounds one target's connect and initialize
	// (default DefaultTargetInitTimeout; the call's own timeout when
	// shorter), so that a target that never answers does not hold up the
	// session's initialize: with failOpen it is left out, with failClosed
	// the initialize fails.
	TargetInitTimeout time.Duration
}

// Metrics records one MCP call; the server implements it.
type Metrics interface {
	ObserveMCP(method, target, tool string, failed bool, d time.Duration)
}

// DefaultSessionTTL is config.mcp.sessionTtl's default.
const DefaultSessionTTL = 30 * time.Minute

const defaultCallTimeout = 10 * time.Minute

// DefaultStdioIdle is Options.StdioIdle's default.
const DefaultStdioIdle = time.Minute

// DefaultTargetInitTimeout is Options.TargetInitTimeout's default: long
// enough for a stdio server started through npx to come up, short of the
// ten minutes a call may take.
const DefaultTargetInitTimeout = 30 * time.Second

// Waits before a target left out of a session (failOpen, its initialize
// failed) is initialized again on its next use: the first, doubling after
// each failure up to the last.
const (
	dropRetryFirst = time.Second
	dropRetryMax   = time.Minute
)

// Backend is the compiled MCP backend of a route. It is shared by every
// request of the route and outlives reloads that leave its config unchanged.
type Backend struct {
	opts      Options
	log       *zap.Logger
	targets   []*config.MCPTarget
	urls      []string // of the HTTP targets, by index: https with Options.TLS
	byName    map[string]int
	prefix    bool // names are prefixed with the target name
	never     bool // prefixMode never with several targets: route by lookup
	failOpen  bool
	stateless bool
	sharedIDs bool // sealed with Options.SessionKey: other replicas may hold and end them
	ttl       time.Duration
	scope     string
	aead      cipher.AEAD
	client    *http.Client
	caps      *capabilitySet // what each target declared, learned at initialize

	keepAlive       time.Duration // between comments on a client's GET stream
	legacyKeepAlive time.Duration // between comments on a legacy SSE stream
	listenLinger    time.Duration // targets' streams outlive the client's by this (Session.streamEnded)
	maxSessions     int
	clientStall     time.Duration // a message waits this long for a slow client (sink.put)
	maxCalls        int32         // client calls in flight per session (maxSessionCalls)
	procs           procBudget    // stdio processes running
	initTimeout     time.Duration // one target's initialize (Options.TargetInitTimeout)
	dropRetry       time.Duration // first wait before a dropped target is tried again (dropRetryFirst)
	dropRetryMax    time.Duration
	initLogs        []logline.Throttle // by target index: failed initializes logged
	reqLogs         []logline.Throttle // by target index: requests that could not be sent

	mu       sync.Mutex
	sessions map[string]*Session
	// draining is set by EndStreams: client streams end at once.
	draining atomic.Bool
	ended    map[string]int64         // ids of ended sessions -> when the mark may go (unix ns)
	resuming map[string]chan struct{} // ids being resumed, closed when done
	closed   bool
	stop     chan struct{}
	sweeping sync.WaitGroup
	closing  sync.WaitGroup // sessions being closed in the background
}

// New compiles an MCP backend.
func New(o Options) (*Backend, error) {
	c := o.Config
	b := &Backend{
		opts:            o,
		log:             o.Logger,
		byName:          map[string]int{},
		failOpen:        c.FailureMode == "failOpen",
		stateless:       c.Stateless(),
		sharedIDs:       len(o.SessionKey) > 0,
		ttl:             o.SessionTTL,
		scope:           o.Scope,
		keepAlive:       sseKeepAlive,
		legacyKeepAlive: legacyKeepAlive,
		listenLinger:    listenLinger,
		maxCalls:        maxSessionCalls,
		clientStall:     defaultClientStall,
		caps:            newCapabilitySet(len(c.Targets)),
		initTimeout:     cmp.Or(max(o.TargetInitTimeout, 0), DefaultTargetInitTimeout),
		dropRetry:       dropRetryFirst,
		dropRetryMax:    dropRetryMax,
		initLogs:        make([]logline.Throttle, len(c.Targets)),
		reqLogs:         make([]logline.Throttle, len(c.Targets)),
		sessions:        map[string]*Session{},
		ended:           map[string]int64{},
		resuming:        map[string]chan struct{}{},
		stop:            make(chan struct{}),
	}
	if b.scope == "" {
		b.scope = o.Name
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
	if b.opts.StdioIdle <= 0 {
		b.opts.StdioIdle = DefaultStdioIdle
	}
	b.opts.StdioIdle = min(b.opts.StdioIdle, b.ttl)
	b.maxSessions = cmp.Or(max(b.opts.MaxSessions, 0), DefaultMaxSessions)
	b.procs.max = cmp.Or(max(b.opts.MaxStdioProcesses, 0), DefaultMaxStdioProcesses)
	for i := range c.Targets {
		b.targets = append(b.targets, &c.Targets[i])
		b.byName[c.Targets[i].Name] = i
		u := c.Targets[i].URL
		if o.TLS != nil {
			u = httpsURL(u)
		}
		b.urls = append(b.urls, u)
	}
	switch c.PrefixMode {
	case "always":
		b.prefix = true
	case "never":
		b.never = len(b.targets) > 1
	default:
		b.prefix = len(b.targets) > 1
	}
	key := o.SessionKey
	if len(key) == 0 {
		key = processKey()
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	b.aead = aead
	b.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig:       o.TLS,
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

// EndStreams ends the clients' open streams (GET, and the legacy SSE
// endpoint's), leaving their sessions: the gateway is draining, and a
// stream carries no call to wait for, only what targets may send outside
// one. Its client reconnects, here or to another replica, which resumes
// the session from its id. Streams opened from now on end at once.
func (b *Backend) EndStreams() {
	b.draining.Store(true)
	b.mu.Lock()
	sessions := make([]*Session, 0, len(b.sessions))
	for _, s := range b.sessions {
		sessions = append(sessions, s)
	}
	b.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		if s.stream != nil {
			s.stream.close()
		}
		s.mu.Unlock()
	}
}

// Close stops every session here (stdio processes stop) and the sweeper.
// It does not end the sessions: streamable HTTP targets keep their
// upstream sessions, so the clients' ids resume them on the backend that
// replaces this one or on another replica.
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
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.release()
		}()
	}
	wg.Wait()
	b.sweeping.Wait()
	b.closing.Wait()
	b.client.CloseIdleConnections()
}

// sweep closes idle sessions.
func (b *Backend) sweep() {
	defer b.sweeping.Done()
	every := min(b.ttl, b.opts.StdioIdle) / 4
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
		var idle, live []*Session
		b.mu.Lock()
		for id, s := range b.sessions {
			if s.expired(now) {
				b.endLocked(id, s)
				idle = append(idle, s)
			} else {
				live = append(live, s)
			}
		}
		for id, until := range b.ended {
			if now.UnixNano() > until {
				delete(b.ended, id)
			}
		}
		b.mu.Unlock()
		for _, s := range idle {
			b.log.Debug("mcp session expired", zap.String("backend", b.opts.Name))
			b.closeLater(s)
		}
		b.parkIdle(live, now)
	}
}

// parkIdle stops the stdio processes of sessions that have not used them
// for StdioIdle and have no client stream open.
func (b *Backend) parkIdle(sessions []*Session, now time.Time) {
	for _, s := range sessions {
		if s.streaming() {
			continue
		}
		for i, t := range b.targets {
			if t.Kind == config.MCPTargetStdio && s.park(i, b.opts.StdioIdle, now) {
				b.log.Debug("mcp stdio target idle, stopped", zap.String("backend", b.opts.Name), zap.String("target", t.Name))
			}
		}
	}
}

// maxEnded bounds the marks of ended sessions. Past it the oldest half
// goes; their ids are refused anyway once their TTL since issue has passed.
const maxEnded = 1 << 16

// endLocked forgets a session and marks its id ended, so that it is never
// resumed. The mark lasts as long as the id could otherwise be resumed.
func (b *Backend) endLocked(id string, s *Session) {
	delete(b.sessions, id)
	until := time.Now().Add(b.ttl).UnixNano()
	if s != nil && s.issued > 0 {
		until = s.issued*int64(time.Millisecond) + int64(b.ttl)
	}
	if len(b.ended) >= maxEnded {
		for k := range b.ended {
			delete(b.ended, k)
			if len(b.ended) < maxEnded/2 {
				break
			}
		}
	}
	b.ended[id] = until
}

// closeLater closes a session in the background: a client ending its
// session never waits for a target's process to stop. Close waits for
// these.
func (b *Backend) closeLater(s *Session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLaterLocked(s)
}

// closeLaterLocked is closeLater for a caller holding b.mu. Once Close has
// begun its wait, a late session is closed without being waited for.
func (b *Backend) closeLaterLocked(s *Session) {
	if b.closed {
		go s.close()
		return
	}
	b.closing.Add(1)
	go func() {
		defer b.closing.Done()
		s.close()
	}()
}

// lookup returns a live session that the identity with this subject
// fingerprint opened.
func (b *Backend) lookup(id, subject string) *Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	if s == nil || s.subject != subject {
		return nil // another identity's session is no session
	}
	if s.expired(time.Now()) {
		b.endLocked(id, s)
		b.closeLaterLocked(s)
		return nil
	}
	s.touch()
	return s
}

// isEnded reports whether a session id was ended here (DELETE or expiry).
func (b *Backend) isEnded(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ended := b.ended[id]
	return ended
}

// register stores a session under its id, making room for it
// (makeRoomLocked); it fails once the backend closed, when the id was ended
// meanwhile (a DELETE that came while it was resumed), or with
// errTooManySessions.
func (b *Backend) register(s *Session) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errBackendClosed
	}
	if _, ended := b.ended[s.id]; ended {
		return errSessionEnded
	}
	if _, ok := b.makeRoomLocked(); !ok {
		return errTooManySessions
	}
	b.sessions[s.id] = s
	return nil
}

// errBackendClosed is register's error once the backend closed.
var errBackendClosed = errors.New("backend closed")

// end terminates a session: its id is marked ended, the targets' upstream
// sessions are ended (a DELETE each, bounded, so that no replica can resume
// the session once end returns), and the rest, stdio processes above all,
// stops in the background.
func (b *Backend) end(id string) {
	b.mu.Lock()
	s := b.sessions[id]
	b.endLocked(id, s)
	b.mu.Unlock()
	if s != nil {
		s.endUpstreamSessions()
		b.closeLater(s)
	}
}

// SessionCount is the number of live client sessions.
func (b *Backend) SessionCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

// targetInitFailed logs (throttled per target) and counts a target's
// failed connect or initialize, which its client may never hear of: with
// failOpen the session goes on without the target.
func (b *Backend) targetInitFailed(i int, err error, start time.Time) {
	name := b.targets[i].Name
	b.observe("initialize", name, "", true, start)
	if dropped, ok := b.initLogs[i].Allow(time.Now()); ok {
		mode := "failClosed"
		if b.failOpen {
			mode = "failOpen"
		}
		b.log.Warn("mcp target initialize failed", zap.String("backend", b.opts.Name), zap.String("target", name),
			zap.String("failureMode", mode), zap.Error(logDetail(err)), logline.DroppedField(dropped))
	}
}

// targetRequestFailed logs (throttled per target) a request that could
// not be sent to a target: its client is told only the class of failure
// (targetMessage).
func (b *Backend) targetRequestFailed(i int, method string, err error) {
	if dropped, ok := b.reqLogs[i].Allow(time.Now()); ok {
		b.log.Warn("mcp target request failed", zap.String("backend", b.opts.Name), zap.String("target", b.targets[i].Name),
			zap.String("method", method), zap.Error(err), logline.DroppedField(dropped))
	}
}

func (b *Backend) observe(method, target, tool string, failed bool, start time.Time) {
	if b.opts.Metrics != nil {
		b.opts.Metrics.ObserveMCP(method, target, tool, failed, time.Since(start))
	}
}

// httpsURL is an http:// target URL with TLS on the same address: the
// scheme becomes https and the port stays (80 when it was left out).
// Other URLs are returned as they are.
func httpsURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return raw
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), "80")
	}
	u.Scheme = "https"
	return u.String()
}
