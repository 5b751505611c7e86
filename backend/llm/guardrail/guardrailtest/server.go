// Package guardrailtest owns the emulators of the guard services the
// guardrail package calls: agentgateway's guardrail webhook, OpenAI's
// moderation endpoint, Bedrock's ApplyGuardrail (SigV4 checked), Google
// Model Armor (access tokens checked with the llmtest Vertex emulator that
// issued them) and Azure AI Content Safety (text:analyze and
// text:detectJailbreak). Each is an HTTP server on 127.0.0.1 at an
// OS-chosen port, started by a test and stopped by its Cleanup; it checks
// the service's authentication, records every request, and judges texts by
// simple word rules the test sets, answering in the service's own format.
//
// Fail queues failures (an error status, a raw body, a reset connection)
// that the next admitted requests get instead; Hold makes requests wait
// and Refuse stops accepting connections. A test changes a running
// emulator's exported settings inside Configure. The Bedrock and OpenAI
// formats are proven by this package's tests with the official SDKs.
// Import the package from tests only.
package guardrailtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request an emulator received.
type Request struct {
	Method string
	// Path is the URL path as sent (escaped).
	Path   string
	Query  url.Values
	Host   string
	Header http.Header
	Body   []byte
	// AuthError says why the emulator refused the credentials ("" when it
	// accepted them).
	AuthError string
}

// JSON is the request's JSON body as a map (nil when it is not an object).
func (r Request) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

// Failure is an answer an admitted request gets instead of the
// emulator's judgement.
type Failure struct {
	// Status is the HTTP status (500 when zero).
	Status int
	// Body, when set, is the raw answer body (garbage, say); otherwise the
	// service's error body for Status.
	Body string
	// Reset closes the connection without an answer.
	Reset bool
}

func (f Failure) status() int {
	if f.Status == 0 {
		return http.StatusInternalServerError
	}
	return f.Status
}

// maxBody bounds a request body an emulator reads.
const maxBody = 32 << 20

// Server is what every emulator shares: the listener, the request log,
// the queued failures and the hold. Its methods are safe for concurrent
// use.
type Server struct {
	// URL is the emulator's origin, http://127.0.0.1:<port>.
	URL string

	tb   testing.TB
	hs   *httptest.Server
	done chan struct{}

	mu       sync.Mutex
	requests []Request
	failures []Failure
	always   *Failure
	changed  chan struct{} // closed and replaced when a request is recorded
	held     chan struct{} // while non-nil, admitted requests wait for it to close
	seq      int
}

// newServer binds the emulator's listener; start serves.
func newServer(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, done: make(chan struct{}), changed: make(chan struct{})}
	s.hs = httptest.NewUnstartedServer(nil)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("guardrailtest: listen: %v", err)
	}
	s.hs.Listener = ln
	return s
}

// start serves h; the emulator is complete by then, so that no handler
// reads a field written after its goroutine began.
func (s *Server) start(h http.Handler) {
	s.hs.Config.Handler = h
	s.hs.Start()
	s.URL = s.hs.URL
	s.tb.Cleanup(s.Close)
}

// Configure runs f, which changes the emulator's exported settings, under
// the lock the emulator reads them with. Change settings only there once
// the emulator runs: the race detector cannot tie a request the gateway
// sends through backend/sock's raw socket calls to the test's earlier
// writes, so only the lock orders them.
func (s *Server) Configure(f func()) { s.locked(f) }

// Addr is the emulator's host:port.
func (s *Server) Addr() string { return strings.TrimPrefix(s.URL, "http://") }

// Close stops the emulator: held requests are released and connections
// closed. Cleanup calls it; calling it again does nothing.
func (s *Server) Close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// Refuse stops accepting connections and closes the idle ones: calls made
// afterwards cannot connect.
func (s *Server) Refuse() {
	s.hs.Config.SetKeepAlivesEnabled(false)
	_ = s.hs.Listener.Close()
	s.hs.CloseClientConnections()
}

// locked runs f under the emulator's lock (to read its settings).
func (s *Server) locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// Fail queues failures: each admitted request takes the next one instead
// of the emulator's judgement.
func (s *Server) Fail(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f...)
}

// FailAll makes every admitted request fail with f once the queue is
// empty; nil ends it.
func (s *Server) FailAll(f *Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.always = f
}

// Hold makes admitted requests wait, once recorded and before anything is
// written, until release is called (or the client goes away, or the
// emulator closes). release may be called more than once.
func (s *Server) Hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.held = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.held == ch {
				s.held = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Last returns the last request received; the test fails when there is
// none.
func (s *Server) Last() Request {
	s.tb.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		s.tb.Fatalf("guardrailtest: %s received no request", s.URL)
	}
	return reqs[len(reqs)-1]
}

// WaitRequests waits until at least n requests were received and returns
// them; the test fails when that takes longer than timeout.
func (s *Server) WaitRequests(n int, timeout time.Duration) []Request {
	s.tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if len(s.requests) >= n {
			out := append([]Request(nil), s.requests...)
			s.mu.Unlock()
			return out
		}
		changed, got := s.changed, len(s.requests)
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			s.tb.Fatalf("guardrailtest: %s received %d requests in %v, want %d", s.URL, got, timeout, n)
			return nil
		}
	}
}

// id returns a new id with the given prefix, unique within the emulator.
func (s *Server) id(prefix string) string {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	return prefix + strconv.Itoa(100000+n)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextFailure is the failure the next admitted request gets, if any.
func (s *Server) nextFailure() (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		return f, true
	}
	if s.always != nil {
		return *s.always, true
	}
	return Failure{}, false
}

// errorFormat renders a service's error body for a status (it may set
// headers).
type errorFormat func(h http.Header, status int, msg string) []byte

// exchange is one request being answered.
type exchange struct {
	s   *Server
	w   http.ResponseWriter
	r   *http.Request
	rec Request
}

func (s *Server) begin(w http.ResponseWriter, r *http.Request) *exchange {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	return &exchange{s: s, w: w, r: r, rec: Request{
		Method: r.Method,
		Path:   r.URL.EscapedPath(),
		Query:  r.URL.Query(),
		Host:   r.Host,
		Header: r.Header.Clone(),
		Body:   body,
	}}
}

// refuse records the request as refused for reason and answers status in
// the service's format.
func (x *exchange) refuse(reason string, format errorFormat, status int, msg string) {
	x.rec.AuthError = reason
	x.s.record(x.rec)
	x.writeError(format, status, msg)
}

// admit records the request, waits while the emulator holds, and reports
// whether the emulator's judgement should answer: false when a queued
// failure answered instead, or the client or the emulator went away.
func (x *exchange) admit(format errorFormat) bool {
	x.s.record(x.rec)
	x.s.mu.Lock()
	held := x.s.held
	x.s.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-x.r.Context().Done():
			return false
		case <-x.s.done:
			return false
		}
	}
	f, ok := x.s.nextFailure()
	if !ok {
		return true
	}
	switch {
	case f.Reset:
		x.reset()
	case f.Body != "":
		x.w.Header().Set("Content-Type", "application/json")
		x.w.WriteHeader(f.status())
		_, _ = io.WriteString(x.w, f.Body)
	default:
		x.writeError(format, f.status(), http.StatusText(f.status()))
	}
	return false
}

// reset closes the connection without an answer.
func (x *exchange) reset() {
	hj, ok := x.w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func (x *exchange) writeError(format errorFormat, status int, msg string) {
	body := format(x.w.Header(), status, msg)
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(status)
	_, _ = x.w.Write(body)
}

func (x *exchange) writeJSON(v any) {
	x.w.Header().Set("Content-Type", "application/json")
	_, _ = x.w.Write(mustJSON(v))
}

// decode decodes the JSON body into v.
func (x *exchange) decode(v any) bool {
	d := json.NewDecoder(bytes.NewReader(x.rec.Body))
	return d.Decode(v) == nil
}

// obj is a JSON object that keeps its members' order.
type obj []kv

type kv struct {
	k string
	v any
}

// MarshalJSON writes the members in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// containsWord reports whether text holds word, ASCII case ignored.
func containsWord(text, word string) bool {
	return word != "" && strings.Contains(strings.ToLower(text), strings.ToLower(word))
}

// RefusedAddr returns a 127.0.0.1:<port> where nothing listens.
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("guardrailtest: listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
