package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/relaygate/gateway/backend/mcp/transport"
	codec "github.com/relaygate/gateway/codec/jsonrpc"
	"github.com/relaygate/gateway/config"
)

// Session is one client session: an upstream session per target, the calls
// in flight and the client's streams.
type Session struct {
	id       string
	b        *Backend
	issued   int64  // unix milliseconds, from the id
	subject  string // fingerprint of the identity that opened it, or ""
	lastUsed atomic.Int64
	nextID   atomic.Int64
	calls    atomic.Int32 // client calls in flight (takeCall)
	dialing  []sync.Mutex // by target index: one (re)connect at a time
	// token is the client's validated token as its latest request carried
	// it (noteToken), for a passthrough to HTTP targets: a client that
	// refreshes an expiring token has the new one reach them.
	token atomic.Pointer[[]byte]

	mu           sync.Mutex
	ups          []*upstream // by target index; nil: not connected (failOpen) or parked
	parked       []bool      // by target index: an idle process was stopped; it restarts on use
	drops        []dropped   // by target index: left out (failOpen) as its initialize failed
	caps         []*targetCaps
	pending      map[int64]*call
	serverReqs   map[string]serverRequest // downstream id -> target request
	stream       *sink                    // the client's GET (or legacy SSE) stream
	backlog      [][]byte                 // messages waiting for a stream
	unlisten     *time.Timer              // closes the targets' streams after the client's (streamEnded)
	closed       bool
	inited       bool // initialize was taken (legacy SSE: claimInitialize)
	gone         bool // a target forgot the upstream session: the session ended
	version      string
	init         json.RawMessage
	names        map[string]int   // unprefixed item name -> target (-1: several), for prefixMode never
	shadowed     map[string][]int // ... a name several targets list -> those targets
	shadowWarned bool             // the session logged names several targets list
	fresh        map[int]bool     // targets initialized by this process (not resumed)
	opts         connectOptions   // how targets were connected, to connect again
}

// dropped is a target that a failOpen session left out because its
// initialize failed. It is parked: a use of it initializes it again, not
// before at, so that a target that stays down costs its session's calls
// one try per wait, the wait doubling (up to Backend.dropRetryMax).
type dropped struct {
	at    time.Time
	delay time.Duration // the wait after the next failure; 0: not dropped
}

// waiting reports a dropped target whose next try is not due at now.
func (d dropped) waiting(now time.Time) bool { return d.delay > 0 && now.Before(d.at) }

// upstream is a target's connection within a session.
type upstream struct {
	idx      int
	name     string
	conn     sdk.Connection
	dead     atomic.Pointer[error]
	lastUsed atomic.Int64 // unix ns of the last message to or from it
	calls    atomic.Int32 // calls in flight on it
}

func (u *upstream) touch() { u.lastUsed.Store(time.Now().UnixNano()) }

// call is a request forwarded to one target, waiting for its response.
type call struct {
	up        *upstream // the connection it was sent on
	target    int
	upID      int64
	ch        chan *jsonrpc.Response
	clientKey string // idKey of the client's id
	sink      *sink  // where related messages go (an SSE response), or nil
	progress  string
	started   time.Time
	// stop ends the request's Write: whoever answers the call on ch
	// instead of the target calls it, so that a Write still waiting for a
	// plain-JSON target's response head lets the call take the answer.
	stop context.CancelFunc
}

// serverRequest is a request a target sent to the client.
type serverRequest struct {
	target int
	id     jsonrpc.ID
}

// sink is a stream of encoded messages towards the client.
type sink struct {
	ch     chan []byte
	done   chan struct{}
	closed sync.Once
	// stalled, when set, runs once the stream is ended because its client
	// stopped reading (a legacy SSE stream: its session ends with it).
	stalled func()
}

const sinkQueue = 64

// defaultClientStall is how long a message waits for a client stream whose
// queue is full (Backend.clientStall).
const defaultClientStall = 30 * time.Second

func newSink() *sink { return &sink{ch: make(chan []byte, sinkQueue), done: make(chan struct{})} }

// put queues msg. While the queue is full (the client reads slowly) it
// waits, at most stall: the message's producer (a call's goroutine, a
// target's reader) is held back rather than the message dropped. When the
// wait runs out the stream is ended, so that its client sees it end rather
// than a message missing. False when msg was not queued: the stream ended.
func (k *sink) put(msg []byte, stall time.Duration) bool {
	select {
	case <-k.done:
		return false
	default:
	}
	select {
	case k.ch <- msg: // the common case: no timer
		return true
	default:
	}
	t := time.NewTimer(stall)
	defer t.Stop()
	select {
	case k.ch <- msg:
		return true
	case <-k.done:
		return false
	case <-t.C:
		k.close()
		if k.stalled != nil {
			go k.stalled()
		}
		return false
	}
}

func (k *sink) close() { k.closed.Do(func() { close(k.done) }) }

// open reports whether the stream has not ended.
func (k *sink) open() bool {
	select {
	case <-k.done:
		return false
	default:
		return true
	}
}

// maxBacklog bounds messages kept for a stream the client has not opened.
const maxBacklog = 64

func (b *Backend) newSession() *Session {
	s := &Session{
		b:          b,
		ups:        make([]*upstream, len(b.targets)),
		parked:     make([]bool, len(b.targets)),
		drops:      make([]dropped, len(b.targets)),
		caps:       make([]*targetCaps, len(b.targets)),
		dialing:    make([]sync.Mutex, len(b.targets)),
		pending:    map[int64]*call{},
		serverReqs: map[string]serverRequest{},
		names:      map[string]int{},
		shadowed:   map[string][]int{},
		fresh:      map[int]bool{},
	}
	s.touch()
	return s
}

func (s *Session) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// usedAt notes a use of the session at t (unix ns), unless a later one
// was noted.
func (s *Session) usedAt(t int64) {
	for {
		last := s.lastUsed.Load()
		if last >= t || s.lastUsed.CompareAndSwap(last, t) {
			return
		}
	}
}

// noteToken keeps the token of a request of this session's identity (the
// caller checked the subject), when it carries one.
func (s *Session) noteToken(token []byte) {
	if len(token) == 0 {
		return
	}
	if cur := s.token.Load(); cur != nil && bytes.Equal(*cur, token) {
		return
	}
	t := bytes.Clone(token)
	s.token.Store(&t)
}

// currentToken is the token noteToken kept last (nil: none).
func (s *Session) currentToken() []byte {
	if t := s.token.Load(); t != nil {
		return *t
	}
	return nil
}

func (s *Session) expired(now time.Time) bool {
	return now.UnixNano()-s.lastUsed.Load() > int64(s.b.ttl)
}

// endUpstreamSessions closes the connections that hold an upstream session
// (streamable HTTP targets: Close sends the DELETE), concurrently, and
// waits for them.
func (s *Session) endUpstreamSessions() {
	s.mu.Lock()
	var held []*upstream
	for i, u := range s.ups {
		if u != nil && u.conn.SessionID() != "" {
			held = append(held, u)
			s.ups[i] = nil
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = u.conn.Close()
		}()
	}
	wg.Wait()
}

// releaser is a connection that can stop without ending its upstream
// session (transport's streamable HTTP connection).
type releaser interface{ Release() error }

// close ends the upstream sessions (stdio processes stop) and the streams;
// calls in flight get an error.
func (s *Session) close() { s.shutdown(false) }

// release stops the session here but leaves the targets' upstream sessions
// alive, so that the client's id can resume it (see Backend.Close).
func (s *Session) release() { s.shutdown(true) }

func (s *Session) shutdown(keepUpstream bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	ups := s.ups
	pending := s.pending
	s.pending = map[int64]*call{}
	stream := s.stream
	if s.unlisten != nil {
		s.unlisten.Stop()
	}
	s.mu.Unlock()
	for _, c := range pending {
		c.ch <- errorResponse(jsonrpc.ID{}, jsonrpc.CodeInternalError, "session closed")
		c.stop()
	}
	if stream != nil {
		stream.close()
	}
	var wg sync.WaitGroup
	for _, u := range ups {
		if u != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r, ok := u.conn.(releaser); ok && keepUpstream {
					_ = r.Release()
					return
				}
				_ = u.conn.Close()
			}()
		}
	}
	wg.Wait()
}

// connectOptions is what connecting to targets needs from the request.
type connectOptions struct {
	// headers gives the gateway's credentials for each request to an HTTP
	// target (Request.Credentials); nil: none.
	headers func() (http.Header, error)
	resume  map[string]string
	version string
	// proceed, when set, is asked before targets are initialized again in
	// a resume: false (the session ended meanwhile) starts nothing.
	proceed func() bool
}

// dial opens the connection to target i.
func (s *Session) dial(ctx context.Context, i int, o connectOptions) (sdk.Connection, error) {
	t := s.b.targets[i]
	log := s.b.log.With(zap.String("backend", s.b.opts.Name), zap.String("target", t.Name))
	if o.headers != nil && (t.Kind == config.MCPTargetStreamable || t.Kind == config.MCPTargetSSE) {
		// Credentials that cannot be had fail the connect, not its first
		// request.
		if _, err := o.headers(); err != nil {
			return nil, fmt.Errorf("%w: %w", transport.ErrCredentials, err)
		}
	}
	switch t.Kind {
	case config.MCPTargetStreamable:
		return transport.DialStreamable(ctx, transport.StreamableOptions{
			URL: s.b.urls[i], Client: s.b.client, HeaderFunc: o.headers, ListenOnDemand: true,
			SessionID: o.resume[t.Name], ProtocolVersion: o.version, Logger: log,
		})
	case config.MCPTargetSSE:
		return transport.DialSSE(ctx, transport.SSEOptions{URL: s.b.urls[i], Client: s.b.client, HeaderFunc: o.headers})
	case config.MCPTargetStdio:
		if err := s.b.takeProcess(s); err != nil {
			return nil, err
		}
		stderr, skipped := newStderrLog(log), newSkippedLog(log)
		conn, err := transport.StartStdio(ctx, transport.StdioOptions{
			Cmd: t.Stdio.Cmd, Args: t.Stdio.Args, Env: t.Stdio.Env, ClearEnv: t.Stdio.ClearEnv,
			Stderr:  func(line string) { stderr.line(line) },
			Skipped: skipped.skipped,
			OnExit: func() {
				s.b.procs.give()
				stderr.flush()
				skipped.flush()
			},
		})
		if err != nil {
			s.b.procs.give() // no process runs
		}
		return conn, err
	}
	return nil, fmt.Errorf("target %q: unknown kind", t.Name)
}

// resumeParams are the client's initialize params as the session keeps
// them (resumeInit).
func (s *Session) resumeParams() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.init
}

// claimInitialize reports whether the session's initialize may run: only
// the first asks. A legacy SSE session is opened by its stream and
// initialized by a POST, which a client could send again.
func (s *Session) claimInitialize() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inited {
		return false
	}
	s.inited = true
	return true
}

// attach starts reading from a connected target. A connection it replaces
// is closed: none may outlive its place in the session.
func (s *Session) attach(i int, conn sdk.Connection) *upstream {
	u := &upstream{idx: i, name: s.b.targets[i].Name, conn: conn}
	u.touch()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = conn.Close()
		return nil
	}
	old := s.ups[i]
	s.ups[i] = u
	s.parked[i] = false
	if s.listening() {
		listen(conn)
	}
	s.mu.Unlock()
	if old != nil {
		go old.conn.Close()
	}
	go s.read(u)
	return u
}

// listen opens a target's standalone stream (transport's ListenOnDemand):
// what it sends outside any call now has a client stream to go to. A
// session whose client never listens holds no such upstream connection.
// It does not block: it may be called under s.mu.
func listen(conn sdk.Connection) {
	if l, ok := conn.(interface{ Listen() }); ok {
		l.Listen()
	}
}

// unlisten closes a target's standalone stream (Listen taken back). It
// does not block.
func unlisten(conn sdk.Connection) {
	if l, ok := conn.(interface{ Unlisten() }); ok {
		l.Unlisten()
	}
}

// listening reports whether the targets' standalone streams are to be
// open (s.mu held): while the client's stream is, and for listenLinger
// after it ended (streamEnded).
func (s *Session) listening() bool {
	return s.stream != nil && (s.stream.open() || s.unlisten != nil)
}

// streamOpenedLocked notes the client's new stream k (s.mu held): every live
// target's standalone stream opens, or stays open.
func (s *Session) streamOpenedLocked(k *sink) {
	if s.stream != nil {
		s.stream.close()
	}
	s.stream = k
	if s.unlisten != nil {
		s.unlisten.Stop()
		s.unlisten = nil
	}
	for _, u := range s.ups {
		if u != nil && u.dead.Load() == nil {
			listen(u.conn)
		}
	}
}

// streamEnded notes that the client's stream k ended. When no other took
// its place, the targets' standalone streams, open only to feed it, close
// after listenLinger: a client that opens its stream again within it
// (a reconnect) finds them open and what they sent meanwhile in the
// backlog, and one that left holds no upstream connection past it.
func (s *Session) streamEnded(k *sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != k || s.closed || s.unlisten != nil {
		return
	}
	s.unlisten = time.AfterFunc(s.b.listenLinger, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stream != k || s.closed {
			return // another stream opened, or the session closed
		}
		s.unlisten = nil
		for _, u := range s.ups {
			if u != nil {
				unlisten(u.conn)
			}
		}
	})
}

// read delivers what a target sends until its connection ends.
func (s *Session) read(u *upstream) {
	for {
		msg, err := u.conn.Read(context.Background())
		if err != nil {
			s.upstreamFailed(u, err)
			return
		}
		u.touch()
		switch m := msg.(type) {
		case *jsonrpc.Response:
			s.deliver(u, m)
		case *jsonrpc.Request:
			if m.ID.IsValid() {
				s.serverCall(u, m)
			} else {
				s.serverNotification(u, m)
			}
		}
	}
}

// upstreamFailed answers the calls waiting on a target that went away. A
// stdio target whose process ended on its own is started again on the
// session's next use of it, as a parked one is: its process' state is gone
// either way, and without a restart every later call to it failed until
// the session expired.
func (s *Session) upstreamFailed(u *upstream, err error) {
	// What the calls are told; the log has err (below).
	failed := errors.New("target " + u.name + " failed: " + publicFailure(err))
	s.mu.Lock()
	closed := s.closed
	replaced := s.ups[u.idx] != u // parked or reconnected: closed on purpose
	// Under s.mu: a call registers only on a connection not yet dead
	// (forwardOnce), so each call is either answered here or refused there.
	u.dead.Store(&failed)
	var waiting []*call
	for id, c := range s.pending {
		if c.up == u {
			waiting = append(waiting, c)
			delete(s.pending, id)
		}
	}
	if !closed && !replaced && s.b.targets[u.idx].Kind == config.MCPTargetStdio {
		s.ups[u.idx] = nil
		s.parked[u.idx] = true
	}
	s.mu.Unlock()
	if closed {
		return
	}
	if !replaced {
		s.b.log.Warn("mcp target failed", zap.String("backend", s.b.opts.Name), zap.String("target", u.name), zap.Error(err))
	}
	for _, c := range waiting {
		c.ch <- &jsonrpc.Response{Error: &failure{wire: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: failed.Error()}, cause: err}}
		c.stop()
	}
}

func (s *Session) deliver(u *upstream, r *jsonrpc.Response) {
	id, ok := r.ID.Raw().(int64)
	if !ok {
		return
	}
	s.mu.Lock()
	c := s.pending[id]
	if c != nil && c.up == u {
		delete(s.pending, id)
	} else {
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.ch <- r
	}
}

// relatedSink picks the stream for a message a target sends on its own: a
// progress notification goes with the call of that target whose token it
// carries (its SSE response, or the client's stream for a call answered
// in plain JSON); anything else to the SSE response of the target's latest
// call in flight, else the client's stream (nil). A progress notification
// whose token names only other targets' calls is refused (false): tokens
// are the client's, often small numbers, and one target must not report
// progress on another's call.
func (s *Session) relatedSink(target int, progress string) (*sink, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *call
	foreign := false
	for _, c := range s.pending {
		if progress != "" && c.progress == progress {
			if c.target == target {
				return c.sink, true
			}
			foreign = true
			continue
		}
		if c.sink != nil && c.target == target && (best == nil || c.started.After(best.started)) {
			best = c
		}
	}
	if foreign {
		return nil, false
	}
	if best != nil {
		return best.sink, true
	}
	return nil, true
}

// toClient sends a message to the client on the best stream, or keeps it for
// the client's next stream when none is open. It waits while that stream's
// client reads slowly (sink.put), and never holds s.mu meanwhile.
func (s *Session) toClient(target int, progress string, msg jsonrpc.Message) {
	data, err := codec.Encode(msg)
	if err != nil {
		return
	}
	stall := s.b.clientStall
	related, ok := s.relatedSink(target, progress)
	if !ok {
		s.b.log.Debug("mcp progress notification dropped: its token is another target's call's", zap.String("backend", s.b.opts.Name), zap.String("target", s.b.targets[target].Name))
		return
	}
	if related != nil && related.put(data, stall) {
		return
	}
	s.mu.Lock()
	k := s.stream
	if k == nil || !k.open() {
		if len(s.backlog) < maxBacklog {
			s.backlog = append(s.backlog, data)
		} else {
			s.b.log.Debug("mcp message dropped: no client stream open and the backlog is full", zap.String("backend", s.b.opts.Name))
		}
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if !k.put(data, stall) {
		s.b.log.Info("mcp client stream ended: its client read nothing for a while, a message waiting", zap.String("backend", s.b.opts.Name), zap.Duration("stall", stall))
	}
}

// serverCall forwards a target's request (sampling, elicitation, roots,
// ping) to the client under an id of the gateway's.
func (s *Session) serverCall(u *upstream, r *jsonrpc.Request) {
	down := "t" + strconv.Itoa(u.idx) + "-" + strconv.FormatInt(s.nextID.Add(1), 10)
	s.mu.Lock()
	if len(s.serverReqs) >= maxServerRequests {
		s.mu.Unlock()
		_ = u.conn.Write(context.Background(), errorResponse(r.ID, jsonrpc.CodeInternalError, "too many requests to the client in flight"))
		return
	}
	s.serverReqs[down] = serverRequest{target: u.idx, id: r.ID}
	s.mu.Unlock()
	id, _ := jsonrpc.MakeID(down)
	params := r.Params
	if s.b.multi() {
		params = prefixTaskIDs(params, u.name) // a related task's id
	}
	s.toClient(u.idx, "", &jsonrpc.Request{ID: id, Method: r.Method, Params: params})
}

const maxServerRequests = 1024

// serverNotification forwards a target's notification, rewriting what names
// its items.
func (s *Session) serverNotification(u *upstream, r *jsonrpc.Request) {
	progress := ""
	params := r.Params
	switch r.Method {
	case "notifications/progress":
		progress = notificationProgressToken(params)
	case "notifications/cancelled":
		// The target gave up one of its requests to the client.
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		down := s.downstreamServerID(u.idx, p.RequestID)
		if down == "" {
			return
		}
		params = setField(params, "requestId", down)
	case "notifications/tasks/status":
		if s.b.multi() {
			params = prefixTaskIDs(params, u.name)
		}
	case "notifications/resources/updated":
		if s.b.prefix {
			if obj, ok := object(params); ok && prefixString(obj, "uri", u.name+"+") {
				params = encode(obj, params)
			}
		}
	}
	s.toClient(u.idx, progress, &jsonrpc.Request{Method: r.Method, Params: params})
}

// downstreamServerID finds the gateway's id for a target's request id.
func (s *Session) downstreamServerID(target int, id any) string {
	want, err := jsonrpc.MakeID(normalizeID(id))
	if err != nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for down, sr := range s.serverReqs {
		if sr.target == target && sr.id == want {
			return down
		}
	}
	return ""
}

// clientResponse passes the client's answer to a target's request back.
func (s *Session) clientResponse(ctx context.Context, r *jsonrpc.Response) {
	key, ok := r.ID.Raw().(string)
	if !ok {
		return
	}
	s.mu.Lock()
	sr, found := s.serverReqs[key]
	delete(s.serverReqs, key)
	var u *upstream
	if found {
		u = s.ups[sr.target]
	}
	s.mu.Unlock()
	if u == nil {
		return
	}
	_ = u.conn.Write(ctx, &jsonrpc.Response{ID: sr.id, Result: r.Result, Error: r.Error})
}

// clientNotification forwards a notification from the client. One MCP
// does not define from a client is dropped (a notification has no answer).
func (s *Session) clientNotification(ctx context.Context, r *jsonrpc.Request) {
	if !clientNotifications[r.Method] {
		s.b.log.Debug("mcp client notification dropped: not an MCP client notification", zap.String("backend", s.b.opts.Name), zap.String("method", r.Method))
		return
	}
	if r.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(r.Params, &p) != nil {
			return
		}
		s.cancelByClientID(p.RequestID)
		return
	}
	for _, u := range s.live() {
		_ = u.conn.Write(ctx, &jsonrpc.Request{Method: r.Method, Params: r.Params})
	}
}

// live returns the connected targets that have not failed.
func (s *Session) live() []*upstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*upstream, 0, len(s.ups))
	for _, u := range s.ups {
		if u != nil && u.dead.Load() == nil {
			out = append(out, u)
		}
	}
	return out
}

// cancelByClientID forwards the client's cancellation of a call in flight
// to its target, under the target's id.
func (s *Session) cancelByClientID(clientID any) {
	key := idKey(clientID)
	if key == "" {
		return
	}
	s.mu.Lock()
	var c *call
	for id, pc := range s.pending {
		if pc.clientKey == key {
			c = pc
			delete(s.pending, id)
			break
		}
	}
	s.mu.Unlock()
	if c == nil {
		return
	}
	s.cancelUpstream(c, "cancelled by the client")
	c.ch <- errorResponse(jsonrpc.ID{}, jsonrpc.CodeInternalError, "cancelled")
	c.stop() // a target answering in plain JSON may not have sent its head
}

// forward sends a request to target i and waits for its response, which it
// returns under the client's id. Related messages go to k when set. A
// parked or exited stdio target is started first. When the target refuses
// the upstream session (it restarted, or the session was ended through
// another replica), see renewable: the target is initialized again and the
// request, which it did not process, sent once more; or the client's
// session ends, and its client gets 404 and starts a new one.
func (s *Session) forward(ctx context.Context, i int, clientID jsonrpc.ID, method string, params json.RawMessage, k *sink) *jsonrpc.Response {
	if method != "initialize" {
		if err := s.unpark(ctx, i); err != nil {
			return errorResponse(clientID, jsonrpc.CodeInternalError, targetMessage(s.b.targets[i].Name, err))
		}
	}
	r, u := s.forwardOnce(ctx, i, clientID, method, params, k)
	if method == "initialize" || method == "ping" || !sessionExpired(r) {
		return r
	}
	name := s.b.targets[i].Name
	if s.b.renewable() {
		err := s.renew(ctx, i, u)
		if err == nil {
			// Whatever the target answers now is the request's answer: a
			// second refusal is not the session's end.
			r, _ = s.forwardOnce(ctx, i, clientID, method, params, k)
			return r
		}
		s.b.log.Info("mcp upstream session not renewed", zap.String("backend", s.b.opts.Name), zap.String("target", name), zap.Error(err))
	}
	s.lose()
	return errorResponse(clientID, jsonrpc.CodeInternalError, fmt.Sprintf("session ended: target %s no longer holds it", name))
}

// renewable reports whether a target's refusal of an upstream session is
// met by a new upstream session rather than by the end of the client's
// session. Without config.session.key no other replica can hold or end a
// session of this process, so a refusal means that the target lost it (a
// restart); with the key it may be how a DELETE on another replica reaches
// this one (the DELETE ended the upstream sessions), and renewing would
// bring the ended session back.
func (b *Backend) renewable() bool { return !b.sharedIDs }

// renew replaces target i's upstream session u, which the target refused,
// with a new one (initialized with the client's params). When another call
// renewed it meanwhile, that one is kept.
func (s *Session) renew(ctx context.Context, i int, u *upstream) error {
	s.dialing[i].Lock()
	defer s.dialing[i].Unlock()
	s.mu.Lock()
	cur := s.ups[i]
	s.mu.Unlock()
	switch {
	case cur == nil:
		return safe("not connected") // a renewal failed meanwhile
	case cur != u:
		return nil
	}
	return s.reconnectLocked(ctx, i)
}

// streaming reports whether the client has its stream open.
func (s *Session) streaming() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		return false
	}
	select {
	case <-s.stream.done:
		return false
	default:
		return true
	}
}

// lose ends a session whose target forgot its upstream session.
func (s *Session) lose() {
	s.mu.Lock()
	already := s.gone
	s.gone = true
	id := s.id
	s.mu.Unlock()
	if !already && id != "" {
		s.b.log.Info("mcp session ended by a target", zap.String("backend", s.b.opts.Name))
		s.b.end(id)
	}
}

// ended reports whether the session ended while in use (see lose).
func (s *Session) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// unpark starts a parked target again (its process was stopped while idle,
// or exited, or its initialize failed in a failOpen session) and
// initializes it with the client's original params. A dropped target is
// tried only once its wait is over; another failure doubles the wait.
func (s *Session) unpark(ctx context.Context, i int) error {
	s.mu.Lock()
	parked := s.parked[i]
	s.mu.Unlock()
	if !parked {
		return nil
	}
	s.dialing[i].Lock()
	defer s.dialing[i].Unlock()
	s.mu.Lock()
	parked, drop := s.parked[i], s.drops[i]
	s.mu.Unlock()
	if !parked {
		return nil // another call started it meanwhile
	}
	if drop.waiting(time.Now()) {
		return errNotInitialized
	}
	err := s.reconnectLocked(ctx, i)
	if drop.delay == 0 {
		return err
	}
	s.mu.Lock()
	if err != nil {
		// Still down: left out until the next wait is over.
		s.parked[i] = !s.closed
		s.drops[i] = dropped{at: time.Now().Add(drop.delay), delay: min(2*drop.delay, s.b.dropRetryMax)}
	} else {
		s.drops[i] = dropped{}
	}
	s.mu.Unlock()
	if err == nil {
		s.b.log.Info("mcp target initialized after a failed initialize", zap.String("backend", s.b.opts.Name), zap.String("target", s.b.targets[i].Name))
	}
	return err
}

// errNotInitialized is the error of a call to a target that a failOpen
// session left out (its initialize failed) and will try again later.
var errNotInitialized = safe("not available: its initialize failed; the gateway tries it again later")

// leaveOut leaves target i, whose initialize failed, out of a failOpen
// session: parked, it is initialized again by a use after the first wait.
func (s *Session) leaveOut(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.parked[i] = true
	s.drops[i] = dropped{at: time.Now().Add(s.b.dropRetry), delay: min(2*s.b.dropRetry, s.b.dropRetryMax)}
}

// park stops a target's connection that has been idle for longer than
// idle with no call in flight; the next call to it starts it again. It
// reports whether it did.
func (s *Session) park(i int, idle time.Duration, now time.Time) bool {
	if !s.dialing[i].TryLock() {
		return false
	}
	defer s.dialing[i].Unlock()
	s.mu.Lock()
	u := s.ups[i]
	if s.closed || u == nil || u.calls.Load() > 0 || now.UnixNano()-u.lastUsed.Load() < int64(idle) {
		s.mu.Unlock()
		return false
	}
	for _, sr := range s.serverReqs {
		if sr.target == i {
			s.mu.Unlock()
			return false // it waits for the client's answer
		}
	}
	s.ups[i] = nil
	s.parked[i] = true
	s.mu.Unlock()
	_ = u.conn.Close()
	return true
}

// sessionExpired reports a response the transport made up because the
// target refused the upstream session (transport.ErrSessionExpired): the
// request was not processed. A target's own JSON-RPC error is never one,
// whatever its code (the TypeScript SDK's -32001 is a request timeout).
func sessionExpired(r *jsonrpc.Response) bool {
	return r.Error != nil && errors.Is(r.Error, transport.ErrSessionExpired)
}

// reconnectLocked opens a new upstream session to target i with the
// client's initialize params. The caller holds s.dialing[i]. When it fails
// the target is left unconnected; a stdio target is started again on its
// next use.
func (s *Session) reconnectLocked(ctx context.Context, i int) error {
	s.mu.Lock()
	params, o := s.init, s.opts
	s.mu.Unlock()
	if len(params) == 0 {
		return safe("upstream session expired")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.b.initTimeout)
	defer cancel()
	s.disconnect(i)
	conn, err := s.dial(ctx, i, o)
	if err != nil {
		s.b.targetInitFailed(i, err, start)
		return err
	}
	u := s.attach(i, conn)
	if u == nil {
		return safe("session closed")
	}
	id, _ := jsonrpc.MakeID("reinitialize")
	r, _ := s.forwardOnce(ctx, i, id, "initialize", params, nil)
	if r.Error != nil {
		err = r.Error
	} else {
		err = u.conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
	}
	if err != nil {
		s.b.targetInitFailed(i, err, start)
		// Not initialized: no call may reach it.
		s.mu.Lock()
		if s.ups[i] == u {
			s.ups[i] = nil
			s.parked[i] = s.b.targets[i].Kind == config.MCPTargetStdio
		}
		s.mu.Unlock()
		go u.conn.Close()
		return err
	}
	s.noteCaps(i, r.Result)
	s.b.log.Info("mcp upstream session renewed", zap.String("backend", s.b.opts.Name), zap.String("target", u.name))
	return nil
}

// forwardOnce sends a request to target i's connection and waits for its
// response; it returns the connection it used (nil when none).
func (s *Session) forwardOnce(ctx context.Context, i int, clientID jsonrpc.ID, method string, params json.RawMessage, k *sink) (*jsonrpc.Response, *upstream) {
	s.mu.Lock()
	u := s.ups[i]
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errorResponse(clientID, jsonrpc.CodeInternalError, "session closed"), nil
	}
	if u == nil {
		return errorResponse(clientID, jsonrpc.CodeInternalError, fmt.Sprintf("target %s is not available", s.b.targets[i].Name)), nil
	}
	u.calls.Add(1)
	defer u.calls.Add(-1)
	u.touch()
	up := s.nextID.Add(1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	c := &call{up: u, target: i, upID: up, ch: make(chan *jsonrpc.Response, 1), sink: k, clientKey: idKey(clientID.Raw()), progress: requestProgressToken(params), started: time.Now(), stop: stop}
	s.mu.Lock()
	if dead := u.dead.Load(); dead != nil {
		s.mu.Unlock()
		return errorResponse(clientID, jsonrpc.CodeInternalError, (*dead).Error()), u
	}
	s.pending[up] = c
	s.mu.Unlock()
	upID, _ := jsonrpc.MakeID(float64(up))
	if err := u.conn.Write(wctx, &jsonrpc.Request{ID: upID, Method: method, Params: params}); err != nil {
		select {
		case r := <-c.ch:
			// Answered while the Write waited (cancelled by the client,
			// the target failed, the session closed): that is the answer.
			return &jsonrpc.Response{ID: clientID, Result: r.Result, Error: r.Error}, u
		default:
		}
		s.drop(up)
		if ctx.Err() != nil {
			// The client left or the call timed out before the target's
			// response head (a target answering in plain JSON sends it
			// with the answer): the request may well be in its hands.
			s.cancelUpstream(c, "cancelled by the gateway")
		}
		if ctx.Err() == nil && method != "initialize" { // a failed initialize is logged with its cause
			s.b.targetRequestFailed(i, method, err)
		}
		return failureResponse(clientID, u.name, err), u
	}
	select {
	case r := <-c.ch:
		if r.Error == nil && noResult(r.Result) {
			// Not an answer a client can use ("result":null): the same
			// error as other malformed answers.
			return errorResponse(clientID, jsonrpc.CodeInternalError, fmt.Sprintf("target %s: bad response: neither a result nor an error", u.name)), u
		}
		return &jsonrpc.Response{ID: clientID, Result: r.Result, Error: r.Error}, u
	case <-ctx.Done():
		s.drop(up)
		// Tell the target to stop working on it.
		s.cancelUpstream(c, "cancelled by the gateway")
		return failureResponse(clientID, u.name, ctx.Err()), u
	}
}

// noResult reports a response's result that is missing or null.
func noResult(result json.RawMessage) bool {
	r := bytes.TrimSpace(result)
	return len(r) == 0 || string(r) == "null"
}

// cancelTimeout bounds sending notifications/cancelled to a target.
const cancelTimeout = 5 * time.Second

func (s *Session) drop(up int64) {
	s.mu.Lock()
	delete(s.pending, up)
	s.mu.Unlock()
}

// cancelUpstream tells a call's target that the call was given up, within
// cancelTimeout: the call's own context may be what ended.
func (s *Session) cancelUpstream(c *call, reason string) {
	s.mu.Lock()
	u := s.ups[c.target]
	s.mu.Unlock()
	if u == nil {
		return
	}
	p, _ := json.Marshal(map[string]any{"requestId": c.upID, "reason": reason})
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	_ = u.conn.Write(ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: p})
}

func errorResponse(id jsonrpc.ID, code int64, msg string) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}}
}

// requestProgressToken reads a request's _meta.progressToken as a map key.
// It decodes into a struct, so the rest of the params (a tool's arguments)
// are only scanned, never built into values.
func requestProgressToken(params json.RawMessage) string {
	var p struct {
		Meta struct {
			Token any `json:"progressToken"`
		} `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return ""
	}
	return idKey(p.Meta.Token)
}

// notificationProgressToken reads a progress notification's token as a map
// key.
func notificationProgressToken(params json.RawMessage) string {
	var p struct {
		Token any `json:"progressToken"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return ""
	}
	return idKey(p.Token)
}

// idKey is a map key for a JSON id value that tells 1 from "1".
func idKey(v any) string {
	switch x := v.(type) {
	case string:
		return "s:" + x
	case float64:
		return "n:" + strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		return "n:" + strconv.FormatInt(x, 10)
	}
	return ""
}

// normalizeID turns a decoded JSON id into what jsonrpc.MakeID takes.
func normalizeID(v any) any {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v
}

// setField returns the JSON object params with one field replaced.
func setField(params json.RawMessage, field string, value any) json.RawMessage {
	m, ok := object(params)
	if !ok {
		return params
	}
	v, err := json.Marshal(value)
	if err != nil {
		return params
	}
	m[field] = v
	return encode(m, params)
}
