// Package mcptest owns the MCP servers the gateway's tests talk to: real
// servers built with the official Go SDK, with a fixed tool set, a prompt
// and resources, served over streamable HTTP (StartHTTP), legacy SSE
// (StartSSE) or stdio (the test binary re-executed, see
// RunStdioIfRequested), each recording what it receives in a Recorder. It is
// test support: import it from _test files only.
//
// The tools (ToolNames lists them):
//
//	echo {message}          the message, as text
//	add {a, b}              a+b, as text ("3")
//	get-sum {a, b}          {"sum": a+b} as structured content (and its JSON as text)
//	get-env {name}          the server process's environment variable name ("" when unset)
//	printEnv {name}         the same as get-env
//	count {}                1, 2, 3, ... per upstream session: tells a stateful server from a
//	                        stateless one (always 1) or a new session
//	slow {steps, delayMs}   waits delayMs (default 10, at most 5000) steps times (default 3, at
//	                        most 100), sending progress i/steps after each wait when the call has a
//	                        progress token; returns "done after <steps> steps"; a cancelled call
//	                        returns early and is recorded (Recorder.Cancelled)
//	sample {prompt}         asks the client for a sampling/createMessage (prompt defaults to
//	                        "hello") and returns the text of its answer
//	roots {}                asks the client for roots/list and returns the root URIs, joined by ","
//	crash {}                stdio: exits the process with status 3 mid-call; otherwise an error
//	                        result ("crash: ...")
//	whoami {}               the Authorization header the server got with the call (streamable
//	                        HTTP: the POST's; SSE: the GET that opened the session's; stdio: "")
//	tool-0 ... tool-7 {}    their own name, as text
//
// sample and roots use the SDK's multi round-trip results: a session
// negotiated before 2026-07-28 gets a plain server-to-client request inside
// the call; a newer one gets an input-required result and the call again
// with the answer (so the Recorder sees the call twice). Both need a session
// (a stateless server cannot ask an older client anything).
//
// The prompt greeting {name} returns "Hello, <name>!"; the resource
// mem://hello reads "hello" and the template mem://items/{id} reads
// "item <id>".
package mcptest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures NewServer.
type Options struct {
	// Tools restricts the tools to these names (all when empty). A name
	// that is not one of ToolNames panics.
	Tools []string
	// Recorder, when set, records what the server receives.
	Recorder *Recorder
	// ExitOnCrash makes the crash tool exit the process with status 3, as
	// stdio servers do; otherwise crash returns an error result.
	ExitOnCrash bool
}

// Bounds of the slow tool.
const (
	MaxSlowSteps   = 100
	MaxSlowDelayMs = 5000
)

// ToolNames returns the names of every tool, in the order tools/list has
// them.
func ToolNames() []string {
	names := []string{"add", "count", "crash", "echo", "get-env", "get-sum", "printEnv", "roots", "sample", "slow", "whoami"}
	for i := range 8 {
		names = append(names, "tool-"+strconv.Itoa(i))
	}
	slices.Sort(names)
	return names
}

// NewServer returns a server named name with the package's tools, prompt
// and resources.
func NewServer(name string, opts Options) *mcp.Server {
	return newShared(name, opts, opts.Recorder).newServer(context.Background(), "")
}

// shared is the state of the servers of one fixture (the SSE handler builds
// a server per session).
type shared struct {
	name  string
	opts  Options
	rec   *Recorder
	stdio bool // session labels are pid-<pid>; no session watchers

	mu     sync.Mutex
	counts map[*mcp.ServerSession]int

	watchers sync.WaitGroup // one per initialized session, until it ends
}

func newShared(name string, opts Options, rec *Recorder) *shared {
	known := ToolNames()
	for _, t := range opts.Tools {
		if !slices.Contains(known, t) {
			panic(fmt.Sprintf("mcptest: unknown tool %q", t))
		}
	}
	return &shared{name: name, opts: opts, rec: rec, counts: map[*mcp.ServerSession]int{}}
}

// label is the session as recorded.
func (sh *shared) label(ss *mcp.ServerSession) string {
	if sh.stdio {
		return "pid-" + strconv.Itoa(os.Getpid())
	}
	if ss == nil {
		return ""
	}
	return ss.ID()
}

func (sh *shared) enabled(tool string) bool {
	return len(sh.opts.Tools) == 0 || slices.Contains(sh.opts.Tools, tool)
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// newServer builds one server. stop ends its calls in flight (the fixture
// closing or forgetting its sessions); connAuth is the Authorization of the
// request that opened the connection, for whoami where calls carry no
// headers (SSE).
func (sh *shared) newServer(stop context.Context, connAuth string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: sh.name, Version: "1.0.0"}, nil)

	type messageIn struct {
		Message string `json:"message" jsonschema:"the text to return"`
	}
	type pairIn struct {
		A float64 `json:"a" jsonschema:"the first addend"`
		B float64 `json:"b" jsonschema:"the second addend"`
	}
	type sumOut struct {
		Sum float64 `json:"sum"`
	}
	type nameIn struct {
		Name string `json:"name" jsonschema:"an environment variable"`
	}
	type slowIn struct {
		Steps   int `json:"steps,omitempty" jsonschema:"how many steps (default 3)"`
		DelayMs int `json:"delayMs,omitempty" jsonschema:"milliseconds per step (default 10)"`
	}
	type none struct{}

	env := func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
		return text(os.Getenv(in.Name)), nil, nil
	}
	add := func(t *mcp.Tool, register func(*mcp.Tool)) {
		if sh.enabled(t.Name) {
			register(t)
		}
	}
	add(&mcp.Tool{Name: "echo", Description: "Returns the message."}, func(t *mcp.Tool) {
		mcp.AddTool(s, t, func(_ context.Context, _ *mcp.CallToolRequest, in messageIn) (*mcp.CallToolResult, any, error) {
			return text(in.Message), nil, nil
		})
	})
	add(&mcp.Tool{Name: "add", Description: "Adds two numbers."}, func(t *mcp.Tool) {
		mcp.AddTool(s, t, func(_ context.Context, _ *mcp.CallToolRequest, in pairIn) (*mcp.CallToolResult, any, error) {
			return text(formatNumber(in.A + in.B)), nil, nil
		})
	})
	add(&mcp.Tool{Name: "get-sum", Description: "Adds two numbers, as structured content."}, func(t *mcp.Tool) {
		mcp.AddTool(s, t, func(_ context.Context, _ *mcp.CallToolRequest, in pairIn) (*mcp.CallToolResult, sumOut, error) {
			return nil, sumOut{Sum: in.A + in.B}, nil
		})
	})
	add(&mcp.Tool{Name: "get-env", Description: "Returns an environment variable of the server."}, func(t *mcp.Tool) { mcp.AddTool(s, t, env) })
	add(&mcp.Tool{Name: "printEnv", Description: "Returns an environment variable of the server."}, func(t *mcp.Tool) { mcp.AddTool(s, t, env) })
	add(&mcp.Tool{Name: "count", Description: "Counts its calls in this session."}, func(t *mcp.Tool) {
		mcp.AddTool(s, t, func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			sh.mu.Lock()
			sh.counts[req.Session]++
			n := sh.counts[req.Session]
			sh.mu.Unlock()
			return text(strconv.Itoa(n)), nil, nil
		})
	})
	add(&mcp.Tool{Name: "slow", Description: "Takes its time, reporting progress."}, func(t *mcp.Tool) {
		mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			steps := min(max(in.Steps, 0), MaxSlowSteps)
			if in.Steps == 0 {
				steps = 3
			}
			delay := time.Duration(min(max(in.DelayMs, 0), MaxSlowDelayMs)) * time.Millisecond
			if in.DelayMs == 0 {
				delay = 10 * time.Millisecond
			}
			token := req.Params.GetProgressToken()
			timer := time.NewTimer(delay)
			defer timer.Stop()
			for i := 1; i <= steps; i++ {
				timer.Reset(delay)
				select {
				case <-ctx.Done():
					sh.rec.add(Event{Kind: KindCancelled, Session: sh.label(req.Session), Tool: "slow"})
					return nil, nil, ctx.Err()
				case <-timer.C:
				}
				if token != nil {
					p := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: float64(steps), Message: "step " + strconv.Itoa(i)}
					if err := req.Session.NotifyProgress(ctx, p); err != nil {
						return nil, nil, err
					}
				}
			}
			return text("done after " + strconv.Itoa(steps) + " steps"), nil, nil
		})
	})
	add(&mcp.Tool{Name: "sample", Description: "Asks the client's model."}, func(t *mcp.Tool) { mcp.AddTool(s, t, sample) })
	add(&mcp.Tool{Name: "roots", Description: "Lists the client's roots."}, func(t *mcp.Tool) { mcp.AddTool(s, t, roots) })
	add(&mcp.Tool{Name: "crash", Description: "Exits the server process (stdio) or fails."}, func(t *mcp.Tool) {
		mcp.AddTool(s, t, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			if sh.opts.ExitOnCrash {
				fmt.Fprintln(os.Stderr, "mcptest: crash tool called, exiting with status 3")
				os.Exit(3)
			}
			res := text("crash: this server does not exit (not stdio)")
			res.IsError = true
			return res, nil, nil
		})
	})
	add(&mcp.Tool{Name: "whoami", Description: "Returns the Authorization header the server received."}, func(t *mcp.Tool) {
		mcp.AddTool(s, t, func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			if req.Extra != nil && req.Extra.Header != nil {
				return text(req.Extra.Header.Get("Authorization")), nil, nil
			}
			return text(connAuth), nil, nil
		})
	})
	for i := range 8 {
		name := "tool-" + strconv.Itoa(i)
		add(&mcp.Tool{Name: name, Description: "Filler tool " + strconv.Itoa(i) + "."}, func(t *mcp.Tool) {
			mcp.AddTool(s, t, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
				return text(name), nil, nil
			})
		})
	}

	s.AddPrompt(&mcp.Prompt{Name: "greeting", Description: "Greets someone.", Arguments: []*mcp.PromptArgument{{Name: "name", Description: "who to greet", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Hello, " + req.Params.Arguments["name"] + "!"}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "mem://hello", Name: "hello", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://items/{id}", Name: "item", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id, ok := strings.CutPrefix(req.Params.URI, "mem://items/")
			if !ok || id == "" {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "item " + id}}}, nil
		})

	s.AddReceivingMiddleware(sh.middleware(stop))
	return s
}

// middleware records what the server receives and ends the calls in
// flight when stop is done.
func (sh *shared) middleware(stop context.Context) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			label := sh.label(ss)
			e := Event{Kind: KindMessage, Session: label, Method: method}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				e.Tool, e.Params = p.Name, p.Arguments
			} else if p := req.GetParams(); p != nil {
				e.Params = marshal(p)
			}
			sh.rec.add(e)

			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(stop, cancel)()
			res, err := next(ctx, method, req)
			if method == "initialize" && err == nil && ss != nil {
				sh.rec.add(Event{Kind: KindInitialized, Session: label})
				if !sh.stdio {
					sh.watch(ss, label)
				}
			}
			return res, err
		}
	}
}

// watch records the end of an initialized session.
func (sh *shared) watch(ss *mcp.ServerSession, label string) {
	sh.watchers.Add(1)
	go func() {
		defer sh.watchers.Done()
		_ = ss.Wait()
		sh.mu.Lock()
		delete(sh.counts, ss)
		sh.mu.Unlock()
		sh.rec.add(Event{Kind: KindClosed, Session: label})
	}()
}
