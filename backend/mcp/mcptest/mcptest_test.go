package mcptest

//lint:file-ignore SA1019 the client answers sampling and roots, deprecated from protocol 2026-07-28 on, which the gateway relays for the versions before

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	RunStdioIfRequested()
	os.Exit(m.Run())
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// authTransport sends an Authorization header with every request.
type authTransport struct{ value string }

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a.value)
	return http.DefaultTransport.RoundTrip(r)
}

func authClient(value string) *http.Client {
	return &http.Client{Transport: authTransport{value}}
}

// client is an SDK client session that answers sampling with
// "model says: <prompt>", has two roots and collects progress.
type client struct {
	cs *mcp.ClientSession

	mu       sync.Mutex
	progress []float64
}

func (c *client) progressSeen() []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.progress)
}

func connect(t *testing.T, transport mcp.Transport, version string) *client {
	t.Helper()
	c := &client{}
	cl := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := ""
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt = tc.Text
				}
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "model says: " + prompt}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params.Progress)
			c.mu.Unlock()
		},
	})
	cl.AddRoots(&mcp.Root{URI: "file:///workspace/a", Name: "a"}, &mcp.Root{URI: "file:///workspace/b"})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := cl.Connect(testContext(t), transport, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	c.cs = cs
	return c
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

func (c *client) callWith(ctx context.Context, name string, args any, progressToken any) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	return c.cs.CallTool(ctx, p)
}

// call calls a tool that must succeed and returns its text.
func (c *client) call(t *testing.T, name string, args any) string {
	t.Helper()
	res, err := c.callWith(testContext(t), name, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: error result %q", name, resultText(res))
	}
	return resultText(res)
}

type mode struct {
	stateful bool   // count counts up
	progress bool   // progress notifications reach the client
	requests bool   // sample and roots work
	stdio    bool   // crash exits
	auth     string // what whoami answers
}

// exercise runs every tool, the prompt and the resources.
func exercise(t *testing.T, c *client, m mode) {
	ctx := testContext(t)
	tools, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, ToolNames()) {
		t.Fatalf("tools %v, want %v", names, ToolNames())
	}

	calls := []struct {
		name string
		args any
		want string
	}{
		{"echo", map[string]any{"message": "hi there"}, "hi there"},
		{"add", map[string]any{"a": 1, "b": 2}, "3"},
		{"add", map[string]any{"a": 0.5, "b": -0.25}, "0.25"},
		{"get-env", map[string]any{"name": "MCPTEST_PROBE"}, "probe-value"},
		{"printEnv", map[string]any{"name": "MCPTEST_PROBE"}, "probe-value"},
		{"get-env", map[string]any{"name": "MCPTEST_UNSET_VARIABLE"}, ""},
		{"whoami", nil, m.auth},
		{"tool-0", nil, "tool-0"},
		{"tool-7", nil, "tool-7"},
	}
	for _, tc := range calls {
		if got := c.call(t, tc.name, tc.args); got != tc.want {
			t.Errorf("%s(%v) = %q, want %q", tc.name, tc.args, got, tc.want)
		}
	}

	res, err := c.callWith(ctx, "get-sum", map[string]any{"a": 2, "b": 3}, nil)
	if err != nil || res.IsError {
		t.Fatalf("get-sum: %v %v", err, res)
	}
	if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"sum":5}` || resultText(res) != `{"sum":5}` {
		t.Errorf("get-sum: structured %s, text %q", sc, resultText(res))
	}

	want := []string{"1", "2", "3"}
	if !m.stateful {
		want = []string{"1", "1", "1"}
	}
	for i, w := range want {
		if got := c.call(t, "count", nil); got != w {
			t.Fatalf("count call %d = %q, want %q", i+1, got, w)
		}
	}

	res, err = c.callWith(ctx, "slow", map[string]any{"steps": 3, "delayMs": 1}, "tok-1")
	if err != nil || resultText(res) != "done after 3 steps" {
		t.Fatalf("slow: %v %v", err, res)
	}
	if m.progress {
		WaitFor(t, func() bool { return len(c.progressSeen()) == 3 })
		if got := c.progressSeen(); !slices.Equal(got, []float64{1, 2, 3}) {
			t.Fatalf("progress %v", got)
		}
	}

	if m.requests {
		if got := c.call(t, "sample", map[string]any{"prompt": "2+2?"}); got != "model says: 2+2?" {
			t.Errorf("sample = %q", got)
		}
		if got := c.call(t, "roots", nil); got != "file:///workspace/a,file:///workspace/b" {
			t.Errorf("roots = %q", got)
		}
	}

	if !m.stdio {
		res, err := c.callWith(ctx, "crash", nil, nil)
		if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), "crash:") {
			t.Errorf("crash over HTTP: %v %+v", err, res)
		}
	}

	prompts, err := c.cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "greeting" {
		t.Fatalf("prompts: %v %+v", err, prompts)
	}
	pr, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greeting", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "Hello, Ada!" {
		t.Fatalf("greeting: %v %+v", err, pr)
	}
	resources, err := c.cs.ListResources(ctx, nil)
	if err != nil || len(resources.Resources) != 1 || resources.Resources[0].URI != "mem://hello" {
		t.Fatalf("resources: %v %+v", err, resources)
	}
	templates, err := c.cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "mem://items/{id}" {
		t.Fatalf("templates: %v %+v", err, templates)
	}
	for uri, want := range map[string]string{"mem://hello": "hello", "mem://items/42": "item 42"} {
		rr, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != want {
			t.Fatalf("read %s: %v %+v", uri, err, rr)
		}
	}
}

// checkRecorded checks what exercise left in a recorder.
func checkRecorded(t *testing.T, rec *Recorder, session string) {
	t.Helper()
	var echo *ToolCall
	for _, c := range rec.ToolCalls() {
		if c.Name == "echo" {
			echo = &c
			break
		}
	}
	if echo == nil || string(echo.Args) != `{"message":"hi there"}` || echo.Session != session {
		t.Errorf("echo call recorded as %+v, want session %q", echo, session)
	}
	if n := rec.CallCount("count"); n != 3 {
		t.Errorf("count called %d times", n)
	}
	if n := rec.MethodCount("prompts/get"); n != 1 {
		t.Errorf("prompts/get received %d times", n)
	}
}

func TestTransports(t *testing.T) {
	t.Setenv("MCPTEST_PROBE", "probe-value")
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"streamable", func(t *testing.T) {
			s := StartHTTP(t, "alpha", HTTPOptions{})
			if !strings.HasSuffix(s.URL, "/mcp") || !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
				t.Fatalf("URL %s", s.URL)
			}
			// The default (newest) protocol version: the stateful server
			// refuses it and the client falls back to the initialize
			// handshake.
			c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: authClient("Bearer alpha-token")}, "")
			exercise(t, c, mode{stateful: true, progress: true, requests: true, auth: "Bearer alpha-token"})
			checkRecorded(t, s.Recorder, c.cs.ID())
			if got := s.Recorder.Sessions(); !slices.Equal(got, []string{c.cs.ID()}) {
				t.Errorf("sessions %v, want [%s]", got, c.cs.ID())
			}
			for _, a := range s.Recorder.Authorizations() {
				if a != "Bearer alpha-token" {
					t.Fatalf("a request had Authorization %q", a)
				}
			}
		}},
		{"streamable JSON responses", func(t *testing.T) {
			s := StartHTTP(t, "beta", HTTPOptions{JSONResponse: true})
			c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL}, "2025-06-18")
			exercise(t, c, mode{stateful: true, requests: true, auth: ""})
			checkRecorded(t, s.Recorder, c.cs.ID())
		}},
		{"stateless", func(t *testing.T) {
			s := StartHTTP(t, "gamma", HTTPOptions{Stateless: true})
			// The newest protocol: sample and roots are input-required
			// results the client answers.
			c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: authClient("Bearer g")}, "")
			exercise(t, c, mode{progress: true, requests: true, auth: "Bearer g"})
			checkRecorded(t, s.Recorder, "")
			if n := s.Recorder.CallCount("sample"); n != 2 {
				t.Errorf("sample called %d times, want 2 (the call and its retry with the answer)", n)
			}
		}},
		{"stateless old protocol", func(t *testing.T) {
			s := StartHTTP(t, "delta", HTTPOptions{Stateless: true})
			c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL}, "2025-06-18")
			exercise(t, c, mode{progress: true})
			res, err := c.callWith(testContext(t), "sample", nil, nil)
			if err == nil && !res.IsError {
				t.Fatalf("sample on a stateless server answered %q", resultText(res))
			}
		}},
		{"sse", func(t *testing.T) {
			s := StartSSE(t, "epsilon", HTTPOptions{})
			if !strings.HasSuffix(s.URL, "/sse") {
				t.Fatalf("URL %s", s.URL)
			}
			c := connect(t, &mcp.SSEClientTransport{Endpoint: s.URL, HTTPClient: authClient("Bearer e")}, "")
			exercise(t, c, mode{stateful: true, progress: true, requests: true, auth: "Bearer e"})
			checkRecorded(t, s.Recorder, "")
			posts := 0
			for _, r := range s.Recorder.HTTPRequests() {
				if r.Method == http.MethodPost {
					posts++
					if r.Session == "" || r.Auth != "Bearer e" {
						t.Fatalf("POST recorded as %+v", r)
					}
				}
			}
			if posts == 0 {
				t.Fatal("no POST recorded")
			}
		}},
		{"stdio", func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "record.jsonl")
			cmd := stdioCmd(t, "zeta", map[string]string{EnvRecord: record})
			c := connect(t, &mcp.CommandTransport{Command: cmd}, "2025-06-18")
			exercise(t, c, mode{stateful: true, progress: true, requests: true, stdio: true})
			if err := c.cs.Close(); err != nil {
				t.Fatal(err)
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("exit status %d", code)
			}
			rec := ReadStdioRecord(t, record)
			session := "pid-" + strconv.Itoa(cmd.Process.Pid)
			checkRecorded(t, rec, session)
			if got := rec.Sessions(); !slices.Equal(got, []string{session}) {
				t.Errorf("sessions %v", got)
			}
			if got := rec.Closed(); !slices.Equal(got, []string{session}) {
				t.Errorf("closed %v", got)
			}
		}},
		{"stdio newest protocol", func(t *testing.T) {
			c := connect(t, &mcp.CommandTransport{Command: stdioCmd(t, "eta", nil)}, "")
			exercise(t, c, mode{stateful: true, progress: true, requests: true, stdio: true})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// stdioCmd is the command StdioCommand describes, with extra environment.
func stdioCmd(t *testing.T, name string, extra map[string]string) *exec.Cmd {
	t.Helper()
	path, args, env := StdioCommand(name)
	if !filepath.IsAbs(path) {
		t.Fatalf("command %q is not absolute", path)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	return cmd
}

func TestCountPerSessionAndForgetSessions(t *testing.T) {
	s := StartHTTP(t, "counter", HTTPOptions{})
	a := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL}, "2025-06-18")
	b := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL}, "2025-06-18")
	for _, want := range []string{"1", "2"} {
		if got := a.call(t, "count", nil); got != want {
			t.Fatalf("a: count = %q, want %q", got, want)
		}
	}
	if got := b.call(t, "count", nil); got != "1" {
		t.Fatalf("b: count = %q, want 1", got)
	}

	old := a.cs.ID()
	s.ForgetSessions()
	WaitFor(t, func() bool { return slices.Contains(s.Recorder.Closed(), old) })

	// A request with the old session id is not found.
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", old)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("old session: status %d, want 404", resp.StatusCode)
	}
	if _, err := a.callWith(testContext(t), "count", nil, nil); err == nil {
		t.Fatal("a call in a forgotten session succeeded")
	}

	c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL}, "2025-06-18")
	if got := c.call(t, "count", nil); got != "1" {
		t.Fatalf("new session: count = %q, want 1", got)
	}
	if got := s.Recorder.Sessions(); len(got) != 3 || got[2] != c.cs.ID() {
		t.Fatalf("sessions %v", got)
	}
}

func TestDeleteAndTimeout(t *testing.T) {
	t.Run("delete", func(t *testing.T) {
		s := StartHTTP(t, "deleted", HTTPOptions{})
		c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL}, "2025-06-18")
		id := c.cs.ID()
		if err := c.cs.Close(); err != nil {
			t.Fatal(err)
		}
		WaitFor(t, func() bool { return slices.Contains(s.Recorder.Closed(), id) })
		if got := s.Recorder.Deletes(); !slices.Equal(got, []string{id}) {
			t.Fatalf("deletes %v, want [%s]", got, id)
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		s := StartHTTP(t, "idle", HTTPOptions{SessionTimeout: 50 * time.Millisecond})
		c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL, DisableStandaloneSSE: true}, "2025-06-18")
		WaitFor(t, func() bool { return slices.Contains(s.Recorder.Closed(), c.cs.ID()) })
		if len(s.Recorder.Deletes()) != 0 {
			t.Fatal("a DELETE was recorded")
		}
	})
}

func TestCancel(t *testing.T) {
	check := func(t *testing.T, c *client, rec func() *Recorder) {
		ctx, cancel := context.WithCancel(testContext(t))
		errc := make(chan error, 1)
		go func() {
			_, err := c.callWith(ctx, "slow", map[string]any{"steps": 100, "delayMs": 5000}, nil)
			errc <- err
		}()
		WaitFor(t, func() bool { return rec().CallCount("slow") == 1 })
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v", err)
		}
		WaitFor(t, func() bool { return slices.Contains(rec().Cancelled(), "slow") })
		// The SDK cancels the call's context as the notification arrives,
		// before the recording middleware sees it: the tool may record its
		// end first.
		WaitFor(t, func() bool {
			return slices.ContainsFunc(rec().Notifications(), func(n Event) bool { return n.Method == "notifications/cancelled" })
		})
	}
	t.Run("streamable", func(t *testing.T) {
		s := StartHTTP(t, "cancel", HTTPOptions{})
		c := connect(t, &mcp.StreamableClientTransport{Endpoint: s.URL}, "2025-06-18")
		check(t, c, func() *Recorder { return s.Recorder })
	})
	t.Run("stdio", func(t *testing.T) {
		record := filepath.Join(t.TempDir(), "record.jsonl")
		c := connect(t, &mcp.CommandTransport{Command: stdioCmd(t, "cancel", map[string]string{EnvRecord: record})}, "2025-06-18")
		check(t, c, func() *Recorder { return ReadStdioRecord(t, record) })
	})
}

func TestStdioCrash(t *testing.T) {
	record := filepath.Join(t.TempDir(), "record.jsonl")
	cmd := stdioCmd(t, "crasher", map[string]string{EnvRecord: record})
	c := connect(t, &mcp.CommandTransport{Command: cmd}, "2025-06-18")
	if got := c.call(t, "echo", map[string]any{"message": "before"}); got != "before" {
		t.Fatalf("echo = %q", got)
	}
	if res, err := c.callWith(testContext(t), "crash", nil, nil); err == nil {
		t.Fatalf("crash answered %+v", res)
	}
	_ = c.cs.Close()
	if cmd.ProcessState == nil {
		t.Fatal("the process was not waited for")
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
	rec := ReadStdioRecord(t, record)
	var names []string
	for _, call := range rec.ToolCalls() {
		names = append(names, call.Name)
	}
	if !slices.Equal(names, []string{"echo", "crash"}) {
		t.Fatalf("calls recorded %v", names)
	}
	if len(rec.Closed()) != 0 {
		t.Fatal("a crashed server recorded a clean close")
	}
}

func TestToolsOption(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		c := connect(t, &mcp.CommandTransport{Command: stdioCmd(t, "few", map[string]string{EnvTools: "echo,count"})}, "2025-06-18")
		tools, err := c.cs.ListTools(testContext(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"count", "echo"}) {
			t.Fatalf("tools %v", names)
		}
		if res, err := c.callWith(testContext(t), "add", map[string]any{"a": 1, "b": 2}, nil); err == nil && !res.IsError {
			t.Fatal("a tool outside the set answered")
		}
	})
	t.Run("in memory", func(t *testing.T) {
		rec := NewRecorder()
		srv := NewServer("mem", Options{Tools: []string{"whoami", "tool-3"}, Recorder: rec})
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(testContext(t), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		c := connect(t, ct, "2025-06-18")
		tools, err := c.cs.ListTools(testContext(t), nil)
		if err != nil || len(tools.Tools) != 2 {
			t.Fatalf("tools %v %+v", err, tools)
		}
		if got := c.call(t, "whoami", nil); got != "" {
			t.Fatalf("whoami without HTTP = %q", got)
		}
		if got := rec.Methods(); !slices.Contains(got, "initialize") || !slices.Contains(got, "notifications/initialized") {
			t.Fatalf("methods %v", got)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), `"nope"`) {
				t.Fatalf("recovered %v", r)
			}
		}()
		NewServer("x", Options{Tools: []string{"echo", "nope"}})
	})
}

func TestReadStdioRecord(t *testing.T) {
	dir := t.TempDir()
	if rec := ReadStdioRecord(t, filepath.Join(dir, "missing")); len(rec.Events()) != 0 {
		t.Fatal("events from a missing file")
	}
	path := filepath.Join(dir, "r.jsonl")
	data := `{"kind":"message","session":"pid-1","method":"tools/call","tool":"echo","params":{"message":"x"}}` + "\n" +
		`{"kind":"closed","session":"pid-1"}` + "\n" + `{"kind":"mess`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := ReadStdioRecord(t, path)
	if calls := rec.ToolCalls(); len(calls) != 1 || calls[0].Name != "echo" || string(calls[0].Args) != `{"message":"x"}` {
		t.Fatalf("calls %+v", calls)
	}
	if got := rec.Closed(); !slices.Equal(got, []string{"pid-1"}) {
		t.Fatalf("closed %v", got)
	}
	if len(rec.Events()) != 2 {
		t.Fatalf("events %+v (the partial last line must be ignored)", rec.Events())
	}
}

func TestRecorderReset(t *testing.T) {
	rec := NewRecorder()
	rec.add(Event{Kind: KindHTTP, Method: "DELETE", Session: "s1", Auth: "Bearer x"})
	rec.add(Event{Kind: KindCancelled, Tool: "slow"})
	if got := rec.Deletes(); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("deletes %v", got)
	}
	if got := rec.Authorizations(); !slices.Equal(got, []string{"Bearer x"}) {
		t.Fatalf("authorizations %v", got)
	}
	rec.Reset()
	if len(rec.Events()) != 0 || len(rec.Cancelled()) != 0 {
		t.Fatal("events after Reset")
	}
	var nilRec *Recorder
	nilRec.add(Event{Kind: KindClosed}) // a server without a Recorder records nothing
}
