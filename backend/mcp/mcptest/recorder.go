package mcptest

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kinds of Event.
const (
	// KindMessage is a JSON-RPC request or notification the server
	// received: Method is its method; for tools/call Tool is the tool's name
	// and Params its arguments, otherwise Params are the message's params.
	KindMessage = "message"
	// KindInitialized is a completed initialize handshake (the initialize
	// request was answered without an error).
	KindInitialized = "initialized"
	// KindClosed is a session that ended: a DELETE, an idle timeout,
	// ForgetSessions, Close, the client going away, or (stdio) stdin closing.
	KindClosed = "closed"
	// KindHTTP is an HTTP request the server received: Method is the HTTP
	// method, Path the URL path, Auth the Authorization header and Session
	// the Mcp-Session-Id header (or, for SSE, the sessionid query parameter).
	KindHTTP = "http"
	// KindCancelled is a tool handler (slow) that stopped because its call
	// was cancelled; Tool is its name.
	KindCancelled = "cancelled"
)

// Event is one thing a server recorded. Session is the upstream session id
// ("" when there is none: a stateless or SSE server; "pid-<pid>" on a stdio
// server, so a restarted process is a new session).
type Event struct {
	Kind    string          `json:"kind"`
	Session string          `json:"session,omitempty"`
	Method  string          `json:"method,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Path    string          `json:"path,omitempty"`
	Auth    string          `json:"auth,omitempty"`
}

// ToolCall is a tools/call a server received, whether or not the tool
// exists or the call succeeded.
type ToolCall struct {
	Session string
	Name    string
	Args    json.RawMessage
}

// Recorder records what a server receives. It is safe for concurrent use;
// the accessors return copies in the order things happened.
type Recorder struct {
	mu     sync.Mutex
	events []Event
	sink   io.Writer // JSON lines, for stdio servers (MCPTEST_RECORD)
}

// maxEvents bounds a Recorder: further events are dropped.
const maxEvents = 100_000

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

func (r *Recorder) add(e Event) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) >= maxEvents {
		return
	}
	r.events = append(r.events, e)
	if r.sink != nil {
		line, err := json.Marshal(e)
		if err == nil {
			// One write per line: appends of concurrent processes sharing
			// the file do not interleave.
			_, _ = r.sink.Write(append(line, '\n'))
		}
	}
}

// filter returns the events of kind that keep accepts (all when keep is
// nil).
func (r *Recorder) filter(kind string, keep func(*Event) bool) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for i := range r.events {
		if e := &r.events[i]; e.Kind == kind && (keep == nil || keep(e)) {
			out = append(out, *e)
		}
	}
	return out
}

// Events returns every event.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Reset forgets every event.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}

// ToolCalls returns the tools/call requests received.
func (r *Recorder) ToolCalls() []ToolCall {
	var out []ToolCall
	for _, e := range r.filter(KindMessage, func(e *Event) bool { return e.Method == "tools/call" }) {
		out = append(out, ToolCall{Session: e.Session, Name: e.Tool, Args: e.Params})
	}
	return out
}

// CallCount is how many calls of tool were received.
func (r *Recorder) CallCount(tool string) int {
	return len(r.filter(KindMessage, func(e *Event) bool { return e.Method == "tools/call" && e.Tool == tool }))
}

// Methods returns the method of every JSON-RPC request and notification
// received.
func (r *Recorder) Methods() []string {
	var out []string
	for _, e := range r.filter(KindMessage, nil) {
		out = append(out, e.Method)
	}
	return out
}

// MethodCount is how many requests or notifications of method were
// received.
func (r *Recorder) MethodCount(method string) int {
	return len(r.filter(KindMessage, func(e *Event) bool { return e.Method == method }))
}

// Notifications returns the notifications received (notifications/...),
// e.g. notifications/initialized and notifications/cancelled.
func (r *Recorder) Notifications() []Event {
	return r.filter(KindMessage, func(e *Event) bool { return strings.HasPrefix(e.Method, "notifications/") })
}

// Sessions returns the sessions whose initialize handshake completed.
func (r *Recorder) Sessions() []string { return sessions(r.filter(KindInitialized, nil)) }

// Closed returns the sessions that ended.
func (r *Recorder) Closed() []string { return sessions(r.filter(KindClosed, nil)) }

// Deletes returns the session ids of the HTTP DELETE requests received.
func (r *Recorder) Deletes() []string {
	return sessions(r.filter(KindHTTP, func(e *Event) bool { return e.Method == http.MethodDelete }))
}

// Cancelled returns the tools whose handler saw its call cancelled.
func (r *Recorder) Cancelled() []string {
	var out []string
	for _, e := range r.filter(KindCancelled, nil) {
		out = append(out, e.Tool)
	}
	return out
}

// HTTPRequests returns the HTTP requests received.
func (r *Recorder) HTTPRequests() []Event { return r.filter(KindHTTP, nil) }

// Authorizations returns the Authorization header of every HTTP request
// received, "" for a request without one.
func (r *Recorder) Authorizations() []string {
	var out []string
	for _, e := range r.filter(KindHTTP, nil) {
		out = append(out, e.Auth)
	}
	return out
}

func sessions(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Session)
	}
	return out
}

// WaitFor is the package's WaitFor.
func (r *Recorder) WaitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	WaitFor(tb, cond)
}

// WaitTimeout bounds WaitFor.
const WaitTimeout = 15 * time.Second

// WaitFor polls cond every few milliseconds until it holds, failing tb
// (Fatal) when it still does not after WaitTimeout.
func WaitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitTimeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("mcptest: condition not met within %v", WaitTimeout)
		}
		<-tick.C
	}
}
