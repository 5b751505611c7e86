package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures StartHTTP and StartSSE.
type HTTPOptions struct {
	// Options selects the tools; its Recorder is used when set (so servers
	// can share one), else the server gets its own. ExitOnCrash is ignored.
	Options
	// Stateless, JSONResponse and SessionTimeout are the SDK's
	// StreamableHTTPOptions (StartSSE ignores them).
	Stateless      bool
	JSONResponse   bool
	SessionTimeout time.Duration
}

// HTTPServer is a running MCP server on 127.0.0.1 (an OS-chosen port).
type HTTPServer struct {
	// URL is the MCP endpoint: http://127.0.0.1:<port>/mcp for streamable
	// HTTP, .../sse for SSE.
	URL string
	// Addr is 127.0.0.1:<port>.
	Addr string
	// Recorder records what the server receives, including every HTTP
	// request (method, path, session, Authorization).
	Recorder *Recorder

	sh      *shared
	srv     *httptest.Server
	newGen  func() *generation
	current atomic.Pointer[generation]
	closed  sync.Once
	tb      testing.TB
}

// generation is a handler with its servers: ForgetSessions starts a new one.
type generation struct {
	handler http.Handler
	stop    context.Context // done when the generation is retired
	cancel  context.CancelFunc

	mu      sync.Mutex
	servers []*mcp.Server
}

func (g *generation) add(s *mcp.Server) *mcp.Server {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.servers = append(g.servers, s)
	return s
}

// retire ends the generation's calls in flight and closes its sessions.
func (g *generation) retire() {
	g.cancel()
	g.mu.Lock()
	servers := g.servers
	g.mu.Unlock()
	for _, s := range servers {
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	}
}

// StartHTTP starts a streamable HTTP server (the SDK's
// StreamableHTTPHandler) named name, closed when the test ends.
func StartHTTP(tb testing.TB, name string, opts HTTPOptions) *HTTPServer {
	tb.Helper()
	s := newHTTPServer(tb, name, opts)
	s.newGen = func() *generation {
		g := s.generation()
		srv := g.add(s.sh.newServer(g.stop, ""))
		g.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
			Stateless:      opts.Stateless,
			JSONResponse:   opts.JSONResponse,
			SessionTimeout: opts.SessionTimeout,
			// The gateway may forward any Host.
			DisableLocalhostProtection: true,
		})
		return g
	}
	s.start("/mcp")
	return s
}

// StartSSE starts a legacy HTTP+SSE server (the SDK's SSEHandler) named
// name, closed when the test ends. Each GET opens a session with a server of
// its own, whose whoami answers the GET's Authorization header.
func StartSSE(tb testing.TB, name string, opts HTTPOptions) *HTTPServer {
	tb.Helper()
	s := newHTTPServer(tb, name, opts)
	s.newGen = func() *generation {
		g := s.generation()
		g.handler = mcp.NewSSEHandler(func(r *http.Request) *mcp.Server {
			return g.add(s.sh.newServer(g.stop, r.Header.Get("Authorization")))
		}, &mcp.SSEOptions{DisableLocalhostProtection: true})
		return g
	}
	s.start("/sse")
	return s
}

func newHTTPServer(tb testing.TB, name string, opts HTTPOptions) *HTTPServer {
	rec := opts.Recorder
	if rec == nil {
		rec = NewRecorder()
	}
	o := opts.Options
	o.ExitOnCrash = false
	return &HTTPServer{Recorder: rec, sh: newShared(name, o, rec), tb: tb}
}

func (s *HTTPServer) generation() *generation {
	g := &generation{}
	g.stop, g.cancel = context.WithCancel(context.Background())
	return g
}

func (s *HTTPServer) start(path string) {
	s.current.Store(s.newGen())
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(s.serve))
	s.srv = httptest.NewServer(mux)
	s.Addr = s.srv.Listener.Addr().String()
	s.URL = s.srv.URL + path
	s.tb.Cleanup(s.Close)
}

// serve records the request and hands it to the current generation.
func (s *HTTPServer) serve(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get("Mcp-Session-Id")
	if session == "" {
		session = r.URL.Query().Get("sessionid")
	}
	s.Recorder.add(Event{Kind: KindHTTP, Method: r.Method, Path: r.URL.Path, Session: session, Auth: r.Header.Get("Authorization")})
	s.current.Load().handler.ServeHTTP(w, r)
}

// ForgetSessions drops every session, as a restarted server would: requests
// with an old session id get 404 from now on, streams of old sessions end
// and their calls in flight are cancelled. Sessions opened afterwards work
// (and count from 1 again).
func (s *HTTPServer) ForgetSessions() {
	old := s.current.Swap(s.newGen())
	old.retire()
}

// closeTimeout bounds Close.
const closeTimeout = 10 * time.Second

// Close stops the server: calls in flight are cancelled, sessions closed,
// connections cut. It is called when the test ends; calling it earlier (to
// make a target unreachable) is fine.
func (s *HTTPServer) Close() {
	s.closed.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.current.Load().retire()
			s.srv.CloseClientConnections()
			s.srv.Close()
			s.sh.watchers.Wait()
		}()
		select {
		case <-done:
		case <-time.After(closeTimeout):
			s.tb.Errorf("mcptest: server %s did not close within %v", s.sh.name, closeTimeout)
		}
	})
}

func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}
