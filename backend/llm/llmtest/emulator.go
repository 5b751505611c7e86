package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Usage is the token counts a reply reports, each in the provider's own
// fields (prompt_tokens/completion_tokens, input_tokens/output_tokens,
// promptTokenCount/candidatesTokenCount, inputTokens/outputTokens); totals
// are their sum.
type Usage struct {
	InputTokens  int
	OutputTokens int
	// CachedInputTokens are input tokens read from the prompt cache:
	// OpenAI's prompt_tokens_details.cached_tokens, Anthropic's
	// cache_read_input_tokens, Gemini's cachedContentTokenCount, Bedrock's
	// cacheReadInputTokens.
	CachedInputTokens int
}

// DefaultUsage is the usage of a Reply that sets none.
var DefaultUsage = Usage{InputTokens: 12, OutputTokens: 6}

// ToolCall is a function call the model answers with.
type ToolCall struct {
	// ID is the call's id; a provider-style one is made when empty.
	ID   string
	Name string
	// Arguments is the call's arguments, a JSON object ("{}" when empty).
	Arguments string
	// ThoughtSignature (Gemini and Vertex's Gemini models only) is the
	// thoughtSignature of the call's functionCall part, as Gemini 3
	// models give one to the first call of each step; the emulator
	// remembers it for RequireThoughtSignatures.
	ThoughtSignature string
}

// Answer is what an emulator does with one request: a Reply or a Failure.
type Answer interface{ isAnswer() }

// Reply is a model answer. Each emulator renders it in its provider's format,
// plain or streamed as the request asked.
type Reply struct {
	// Text is the assistant's text ("" with only tool calls).
	Text string
	// Chunks, when set, are the stream's text deltas and Text is ignored
	// (the plain answer is their concatenation). Otherwise Text is streamed
	// one word, with its trailing space, per delta.
	Chunks []string
	// ToolCalls are function calls after the text.
	ToolCalls []ToolCall
	// Usage is reported in the answer (DefaultUsage when zero).
	Usage Usage
	// StopReason replaces the stop reason the emulator derives (stop /
	// tool_calls, end_turn / tool_use, STOP, end_turn / tool_use), in the
	// provider's vocabulary: "length", "max_tokens", "MAX_TOKENS", ...
	StopReason string
	// Model is the model the answer names; default the requested one.
	Model string
	// Embedding is the vector answered for each embeddings input; default a
	// vector of 8 (or the requested dimensions) derived from the input.
	Embedding []float64
	// Delay holds back the response's first byte (a slow upstream); it ends
	// early when the client goes away or the emulator is closed.
	Delay time.Duration
	// DropAfter, when positive, cuts the connection mid-answer: a stream
	// after that many events (SSE events, or Bedrock event stream
	// messages), a plain answer after its head and half its body.
	DropAfter int
	// StreamError, on a streamed answer, is sent in-band in the provider's
	// stream format after the content, in place of the finishing events
	// (stop reason, usage, [DONE]). Only its Type and Message are used.
	StreamError *Failure
	// EmptyTextLast (Gemini and Vertex's Gemini models only) ends the
	// answer with an empty text part after its function calls, as Gemini
	// often ends one; streamed, in a last event of its own that carries
	// the finish reason and the usage.
	EmptyTextLast bool
	// NoLastBlankLine (Chat Completions and Anthropic streams) ends the stream
	// without the line end and blank line after its last event ("data:
	// [DONE]", message_stop): the provider sent everything else.
	NoLastBlankLine bool
}

func (Reply) isAnswer() {}

// text is the whole answer text.
func (r Reply) text() string {
	if r.Chunks != nil {
		return strings.Join(r.Chunks, "")
	}
	return r.Text
}

// deltas are the stream's text deltas.
func (r Reply) deltas() []string {
	if r.Chunks != nil {
		return r.Chunks
	}
	return splitWords(r.Text)
}

func (r Reply) usage() Usage {
	if r.Usage == (Usage{}) {
		return DefaultUsage
	}
	return r.Usage
}

// splitWords splits s after each space ("a b" -> "a ", "b").
func splitWords(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// splitN splits s into about n pieces (at least one piece when s is not
// empty), on byte boundaries that keep UTF-8 sequences whole.
func splitN(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > size {
		i := size
		for i < len(s) && !isRuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// DefaultReply is what an emulator answers when nothing is queued and no
// default was set.
var DefaultReply = Reply{Text: "Hello from the emulator."}

// Failure is an answer that fails. By default it is an HTTP error whose body
// is in the provider's error format.
type Failure struct {
	// Status is the HTTP status (500 when zero): 429, 500, 503, 529, ...
	Status int
	// Type is the provider's error type or code (OpenAI error.type,
	// Anthropic error.type, Google error.status, Bedrock exception name,
	// Azure error.code); derived from Status when empty.
	Type string
	// Message is the error message; derived from Status when empty.
	Message string
	// RetryAfter is sent as the Retry-After header when set.
	RetryAfter string
	// Header is added to the response head.
	Header http.Header
	// Code is OpenAI's and Azure's error.code (derived from Status when
	// empty: rate_limit_exceeded, invalid_api_key, ...); others ignore it.
	Code string
	// Body, when set, replaces the provider-format error body.
	Body string
	// Reset sends no response: the connection is reset (RST) once the
	// request has been read.
	Reset bool
	// Delay holds back the failure, as Reply.Delay does.
	Delay time.Duration
}

func (Failure) isAnswer() {}

func (f Failure) status() int {
	if f.Status == 0 {
		return http.StatusInternalServerError
	}
	return f.Status
}

// Request is one request an emulator received.
type Request struct {
	Method string
	// Path is the URL path as it was sent (escaped).
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
	// Op names the operation the emulator recognised: "chat.completions",
	// "responses", "embeddings", "models", "messages", "count_tokens",
	// "generateContent", "streamGenerateContent", "countTokens",
	// "rawPredict", "streamRawPredict", "converse", "converse-stream",
	// "token" (Vertex's OAuth endpoint) or "unknown".
	Op string
	// Model is the model the request names (body or path); Deployment is
	// Azure's deployment path segment.
	Model      string
	Deployment string
	// Stream reports a request for a streamed answer.
	Stream bool
	// AuthError says why the emulator refused the request's credentials
	// ("" when they were accepted).
	AuthError string
}

// Decode decodes the request's JSON body into v.
func (r Request) Decode(v any) error { return json.Unmarshal(r.Body, v) }

// JSON is the request's JSON body as a map (nil when it is not an object).
func (r Request) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

// maxBody bounds a request body the emulator reads.
const maxBody = 32 << 20

// Server is the part every emulator shares: the listener, the request log
// and the answers. Its methods are safe for concurrent use.
type Server struct {
	// URL is the emulator's origin, http://127.0.0.1:<port>, without a
	// trailing slash.
	URL string

	tb   testing.TB
	hs   *httptest.Server
	done chan struct{}

	mu       sync.Mutex
	requests []Request
	queue    []Answer
	fallback Answer
	changed  chan struct{} // closed and replaced when a request is recorded
	held     chan struct{} // while non-nil, admitted requests wait for it to close
	seq      int
}

// newServer is an emulator's Server, not serving yet (start).
func newServer(tb testing.TB) *Server {
	return &Server{tb: tb, done: make(chan struct{}), changed: make(chan struct{}), fallback: DefaultReply}
}

// start serves h on a loopback port. An emulator's constructor keeps the
// Server before it starts, so that its handlers, which read the field,
// never race with setting it.
func (s *Server) start(h http.Handler) {
	s.tb.Helper()
	s.hs = httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		s.tb.Fatalf("llmtest: listen: %v", err)
	}
	s.hs.Listener = ln
	s.hs.Config.ErrorLog = nil
	s.hs.Start()
	s.URL = s.hs.URL
	s.tb.Cleanup(s.Close)
}

// Close stops the emulator: waiting requests are released and every
// connection is closed. Cleanup calls it; calling it again does nothing.
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

// Refuse stops accepting connections: the listener is closed (new
// connections are refused) and idle keep-alive connections are closed.
// Requests in flight finish.
func (s *Server) Refuse() {
	s.hs.Config.SetKeepAlivesEnabled(false)
	_ = s.hs.Listener.Close()
}

// Addr is the emulator's host:port.
func (s *Server) Addr() string { return strings.TrimPrefix(s.URL, "http://") }

// Enqueue queues answers: each admitted request (credentials accepted)
// takes the next one; when the queue is empty the default answers.
func (s *Server) Enqueue(answers ...Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, answers...)
}

// SetDefault sets the answer given when the queue is empty (DefaultReply
// until set): a Reply, or a Failure to fail every request.
func (s *Server) SetDefault(a Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = a
}

// Hold makes admitted requests wait, after they are recorded and before
// anything is written, until release is called (or the client goes away,
// or the emulator closes). release may be called more than once.
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

// Requests returns copies of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// Last returns the last request received; the test fails when there is none.
func (s *Server) Last() Request {
	s.tb.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		s.tb.Fatalf("llmtest: %s received no request", s.URL)
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
			out := make([]Request, len(s.requests))
			copy(out, s.requests)
			s.mu.Unlock()
			return out
		}
		changed := s.changed
		got := len(s.requests)
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			s.tb.Fatalf("llmtest: %s received %d requests in %v, want %d", s.URL, got, timeout, n)
			return nil
		}
	}
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) next() Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		a := s.queue[0]
		s.queue = s.queue[1:]
		return a
	}
	return s.fallback
}

// id returns a new id with the given prefix, unique within the emulator.
func (s *Server) id(prefix string) string {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	return fmt.Sprintf("%semu%08d", prefix, n)
}

// errorFormat renders a provider-format error for f (whose Status is set):
// it may set headers on h and returns the body. f's Type, Code and Message
// are "" where the provider's defaults for the status apply.
type errorFormat func(h http.Header, f Failure) []byte

// exchange is one request being answered.
type exchange struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	rec  Request
	body map[string]any // the JSON body when it is an object
}

func (s *Server) begin(w http.ResponseWriter, r *http.Request, op string) *exchange {
	x := &exchange{s: s, w: w, r: r}
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	x.rec = Request{
		Method: r.Method,
		Path:   r.URL.EscapedPath(),
		Query:  r.URL.Query(),
		Header: r.Header.Clone(),
		Body:   body,
		Op:     op,
	}
	if len(bytes.TrimSpace(body)) > 0 {
		_ = json.Unmarshal(body, &x.body)
	}
	return x
}

// str is a string member of the JSON body ("" when absent).
func (x *exchange) str(name string) string {
	s, _ := x.body[name].(string)
	return s
}

// flag is a boolean member of the JSON body.
func (x *exchange) flag(name string) bool {
	b, _ := x.body[name].(bool)
	return b
}

// has reports a member of the JSON body that is present and not null.
func (x *exchange) has(name string) bool {
	v, ok := x.body[name]
	return ok && v != nil
}

// refuse records the request as refused for its credentials and answers
// with the provider's error.
func (x *exchange) refuse(reason string, format errorFormat, f Failure) {
	x.rec.AuthError = reason
	x.s.record(x.rec)
	x.writeError(format, f)
}

// admit records the request as accepted.
func (x *exchange) admit() { x.s.record(x.rec) }

// writeError writes a provider-format error with no Failure behind it
// (validation and routing errors).
func (x *exchange) writeError(format errorFormat, f Failure) {
	f.Status = f.status()
	h := x.w.Header()
	body := format(h, f)
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	x.w.WriteHeader(f.Status)
	_, _ = x.w.Write(body)
}

// answer takes the request's answer from the queue and waits as it says
// (Hold, Delay). ok is false when the exchange ended meanwhile (the client
// went away, the emulator closed, or a Failure was fully handled here).
func (x *exchange) answer(format errorFormat) (Reply, bool) {
	a := x.s.next()
	x.s.mu.Lock()
	held := x.s.held
	x.s.mu.Unlock()
	if held != nil && !x.wait(held) {
		return Reply{}, false
	}
	switch a := a.(type) {
	case Failure:
		if !x.delay(a.Delay) {
			return Reply{}, false
		}
		x.fail(a, format)
		return Reply{}, false
	case Reply:
		if !x.delay(a.Delay) {
			return Reply{}, false
		}
		return a, true
	case nil:
		return DefaultReply, true
	default:
		panic(fmt.Sprintf("llmtest: unknown answer %T", a))
	}
}

func (x *exchange) wait(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-x.r.Context().Done():
	case <-x.s.done:
	}
	return false
}

func (x *exchange) delay(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.r.Context().Done():
	case <-x.s.done:
	}
	return false
}

// fail writes a Failure.
func (x *exchange) fail(f Failure, format errorFormat) {
	if f.Reset {
		x.reset()
		return
	}
	h := x.w.Header()
	for k, v := range f.Header {
		h[k] = append(h[k], v...)
	}
	if f.RetryAfter != "" {
		h.Set("Retry-After", f.RetryAfter)
	}
	f.Status = f.status()
	body := format(h, f)
	if f.Body != "" {
		body = []byte(f.Body)
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	x.w.WriteHeader(f.Status)
	_, _ = x.w.Write(body)
}

// reset closes the connection with a TCP reset and no response.
func (x *exchange) reset() {
	conn, _, err := http.NewResponseController(x.w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// abort ends the handler without finishing the response: the connection
// closes where the response stands.
func (x *exchange) abort() {
	_ = http.NewResponseController(x.w).Flush()
	panic(http.ErrAbortHandler)
}

// writeJSON writes a plain 200 answer; dropAfter > 0 cuts it after half its
// body.
func (x *exchange) writeJSON(v any, dropAfter int) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	x.writeBody("application/json", body, dropAfter)
}

func (x *exchange) writeBody(contentType string, body []byte, dropAfter int) {
	h := x.w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", fmt.Sprint(len(body)))
	x.w.WriteHeader(http.StatusOK)
	if dropAfter > 0 {
		_, _ = x.w.Write(body[:len(body)/2])
		x.abort()
	}
	_, _ = x.w.Write(body)
}

// stream writes a streamed answer one event at a time, each flushed at once.
type stream struct {
	x         *exchange
	rc        *http.ResponseController
	n         int
	dropAfter int
	// last marks the stream's last event, whose line end and blank line
	// are left out when unterminated is set (Reply.NoLastBlankLine).
	last, unterminated bool
}

func (x *exchange) startStream(contentType string, dropAfter int) *stream {
	h := x.w.Header()
	h.Set("Content-Type", contentType)
	if strings.HasPrefix(contentType, "text/event-stream") {
		h.Set("Cache-Control", "no-cache")
	}
	x.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(x.w)
	_ = rc.Flush()
	return &stream{x: x, rc: rc, dropAfter: dropAfter}
}

// send writes one event; it cuts the connection once dropAfter events were
// sent.
func (st *stream) send(event []byte) {
	if st.last && st.unterminated {
		event = bytes.TrimRight(event, "\r\n")
	}
	_, _ = st.x.w.Write(event)
	_ = st.rc.Flush()
	st.n++
	if st.dropAfter > 0 && st.n >= st.dropAfter {
		st.x.abort()
	}
}

// sse writes one Server-Sent Event: "event: name" (when name is set) and
// "data: json", ended by sep ("\n\n", or "\r\n\r\n" as Gemini does).
func (st *stream) sse(name string, v any, sep string) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: ")
		b.WriteString(name)
		b.WriteString(sep[:len(sep)/2])
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString(sep)
	st.send(b.Bytes())
}

// obj is a JSON object whose members are written in the order given, so
// answers read like the providers' (and stay stable for golden files).
type obj []kv

type kv struct {
	k string
	v any
}

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

// rawJSON is arguments text as a JSON value ({} when empty or invalid).
func rawJSON(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

// args is a tool call's arguments text ("{}" when empty).
func (c ToolCall) args() string {
	if c.Arguments == "" {
		return "{}"
	}
	return c.Arguments
}

// RefusedURL returns an http://127.0.0.1:<port> URL where nothing listens:
// a connection to it is refused.
func RefusedURL(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("llmtest: listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
