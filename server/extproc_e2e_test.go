package server

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// echoUpstream answers every request with "echo:" and its body, keeping
// the last request it got. /stream answers n bytes of 'x' (query n),
// chunked, without a declared length.
type echoUpstream struct {
	mu     sync.Mutex
	calls  int
	path   string
	header http.Header
	body   []byte
	length int64
}

func (e *echoUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	e.mu.Lock()
	e.calls++
	e.path, e.header, e.body, e.length = r.URL.RequestURI(), r.Header.Clone(), body, r.ContentLength
	e.mu.Unlock()
	if err != nil {
		w.WriteHeader(400)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/stream") {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		chunk := bytes.Repeat([]byte("x"), 4096)
		for n > 0 {
			k := min(n, len(chunk))
			_, _ = w.Write(chunk[:k])
			w.(http.Flusher).Flush()
			n -= k
		}
		return
	}
	_, _ = w.Write(append([]byte("echo:"), body...))
}

func (e *echoUpstream) last() (calls int, path string, h http.Header, body []byte, length int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls, e.path, e.header, e.body, e.length
}

// upper answers a body message with its chunk upper-cased: whole
// (buffered) or as a full-duplex chunk.
func upper(st *extproctest.Stream, m *procv3.ProcessingRequest, duplex bool) *procv3.ProcessingResponse {
	var b *procv3.HttpBody
	switch r := m.Request.(type) {
	case *procv3.ProcessingRequest_RequestBody:
		b = r.RequestBody
	case *procv3.ProcessingRequest_ResponseBody:
		b = r.ResponseBody
	default:
		return extproctest.Reply(st, m, nil, nil)
	}
	out := bytes.ToUpper(b.GetBody())
	if duplex {
		return extproctest.Reply(st, m, nil, extproctest.Chunk(out, b.GetEndOfStream()))
	}
	return extproctest.Reply(st, m, nil, extproctest.Body(out))
}

// TestExtProcE2E drives extProc through the gateway against real gRPC
// external processing services: header mutations both ways (pseudo-headers
// included), attributes, metadata and gRPC metadata from CEL, buffered,
// partial and full-duplex bodies both ways (a service that takes the whole
// body before it answers the headers included), immediate responses, mode
// overrides, an invalid mutation, a body too large, and both failure modes
// with the service down.
func TestExtProcE2E(t *testing.T) {
	up := &echoUpstream{}
	upAddr := upstream(t, up)

	headers := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		switch m.Request.(type) {
		case *procv3.ProcessingRequest_RequestHeaders:
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{
				"x-processed": "yes", ":path": "/rewritten?q=1",
			}, "x-secret"), nil)}
		case *procv3.ProcessingRequest_ResponseHeaders:
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{
				"x-resp": "1", ":status": "201",
			}), nil)}
		}
		return extproctest.Passthrough(st, m)
	}}
	buffered := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{upper(st, m, false)}
	}}
	// duplex holds its answer to the request headers until the whole
	// request body is in, as a full-duplex service may.
	duplex := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		switch r := m.Request.(type) {
		case *procv3.ProcessingRequest_RequestHeaders:
			if r.RequestHeaders.GetEndOfStream() {
				return extproctest.Passthrough(st, m)
			}
			st.Held = append(st.Held, extproctest.Reply(st, m, extproctest.Set(map[string]string{"x-duplex": "held"}), nil))
			return nil
		case *procv3.ProcessingRequest_RequestBody:
			out := append(st.Held, upper(st, m, true))
			st.Held = nil
			return out
		}
		return []*procv3.ProcessingResponse{upper(st, m, true)}
	}}
	immediate := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
			Headers: extproctest.Set(map[string]string{"x-why": "policy"}),
			Body:    []byte("denied by the processor"),
		}}}}
	}}
	invalid := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{"x-bad": "a\nb"}), nil)}
	}}
	partial := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestBody); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, extproctest.Body([]byte("P")))}
		}
		return extproctest.Passthrough(st, m)
	}}
	override := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		switch m.Request.(type) {
		case *procv3.ProcessingRequest_ResponseHeaders:
			a := extproctest.Reply(st, m, nil, nil)
			a.ModeOverride = &filterv3.ProcessingMode{ResponseBodyMode: filterv3.ProcessingMode_BUFFERED}
			return []*procv3.ProcessingResponse{a}
		case *procv3.ProcessingRequest_ResponseBody:
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, extproctest.Body([]byte("overridden")))}
		}
		return extproctest.Passthrough(st, m)
	}}
	vars := map[string]string{"UP": upAddr, "DOWN": closedAddr(t)}
	for name, s := range map[string]*extproctest.Server{"HEADERS": headers, "BUFFERED": buffered, "DUPLEX": duplex,
		"IMMEDIATE": immediate, "INVALID": invalid, "PARTIAL": partial, "OVERRIDE": override} {
		vars[name] = extproctest.Start(t, s)
	}
	tg := startGateway(t, `
frontendPolicies:
  http: {maxBufferSize: 65536}
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /headers}}]
      policies:
        extProc:
          host: '${HEADERS}'
          processingOptions: {requestBodyMode: none, responseBodyMode: none}
          requestAttributes: {path: 'request.path'}
          responseAttributes: {code: 'response.code'}
          metadataContext:
            caller: {user: 'request.headers["x-user"]'}
            agentgateway.dev.grpc_initial_metadata: {x-tenant: '"acme"'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /buffered}}]
      policies:
        extProc:
          host: '${BUFFERED}'
          processingOptions: {requestBodyMode: buffered, responseBodyMode: buffered}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /partial}}]
      policies:
        extProc:
          host: '${PARTIAL}'
          processingOptions: {requestBodyMode: bufferedPartial, responseBodyMode: none}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /duplex}}, {path: {pathPrefix: /stream}}]
      policies:
        extProc: {host: '${DUPLEX}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /immediate}}]
      policies:
        extProc: {host: '${IMMEDIATE}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /invalid}}]
      policies:
        extProc: {host: '${INVALID}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /override}}]
      policies:
        extProc:
          host: '${OVERRIDE}'
          processingOptions: {requestBodyMode: none, responseBodyMode: none, allowModeOverride: true}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /down-closed}}]
      policies:
        extProc: {host: '${DOWN}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /down-open}}]
      policies:
        extProc: {host: '${DOWN}', failureMode: failOpen}
      backends: [{host: '${UP}'}]
`, vars)
	base := tg.url(3000)
	post := func(t *testing.T, path string, body io.Reader, length int64) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		return do(t, req)
	}

	t.Run("header mutations, attributes and metadata", func(t *testing.T) {
		resp, _ := get(t, base+"/headers/x", "X-Secret", "s3cret", "X-User", "alice")
		// (201 with its own reason phrase, not the upstream's "OK")
		if resp.Status != "201 Created" || resp.Header.Get("X-Resp") != "1" {
			t.Fatalf("client got %q, x-resp %q; want 201 Created and the service's header", resp.Status, resp.Header.Get("X-Resp"))
		}
		_, path, h, _, _ := up.last()
		if path != "/rewritten?q=1" || h.Get("X-Processed") != "yes" || h.Get("X-Secret") != "" {
			t.Fatalf("upstream got %s with x-processed %q, x-secret %q", path, h.Get("X-Processed"), h.Get("X-Secret"))
		}
		st := headers.Last(t)
		if got := st.Metadata.Get("x-tenant"); len(got) != 1 || got[0] != "acme" {
			t.Errorf("gRPC metadata x-tenant = %v", got)
		}
		msgs := st.Messages()
		if len(msgs) != 2 {
			t.Fatalf("the service got %d messages, want 2 (request and response headers)", len(msgs))
		}
		first := msgs[0]
		rh := first.GetRequestHeaders()
		if extproctest.Header(rh.GetHeaders(), ":path") != "/headers/x" || extproctest.Header(rh.GetHeaders(), ":method") != "GET" ||
			extproctest.Header(rh.GetHeaders(), "x-user") != "alice" || !rh.GetEndOfStream() {
			t.Errorf("request headers message: %v", rh)
		}
		if pc := first.GetProtocolConfig(); pc.GetRequestBodyMode() != filterv3.ProcessingMode_NONE || pc.GetResponseBodyMode() != filterv3.ProcessingMode_NONE {
			t.Errorf("protocol config %v, want both body modes NONE", pc)
		}
		if msgs[1].GetProtocolConfig() != nil {
			t.Error("the protocol config went with a later message too")
		}
		if v := first.GetAttributes()["envoy.filters.http.ext_proc"].GetFields()["path"].GetStringValue(); v != "/headers/x" {
			t.Errorf("request attribute path = %q", v)
		}
		if v := first.GetMetadataContext().GetFilterMetadata()["caller"].GetFields()["user"].GetStringValue(); v != "alice" {
			t.Errorf("metadata caller.user = %q", v)
		}
		if _, leaked := first.GetMetadataContext().GetFilterMetadata()["agentgateway.dev.grpc_initial_metadata"]; leaked {
			t.Error("the gRPC metadata namespace was sent as metadata context too")
		}
		second := msgs[1]
		if extproctest.Header(second.GetResponseHeaders().GetHeaders(), ":status") != "200" {
			t.Errorf("response headers message: %v", second.GetResponseHeaders())
		}
		if v := second.GetAttributes()["envoy.filters.http.ext_proc"].GetFields()["code"].GetNumberValue(); v != 200 {
			t.Errorf("response attribute code = %v", v)
		}
	})

	t.Run("buffered bodies both ways", func(t *testing.T) {
		resp, body := post(t, "/buffered", strings.NewReader("hello"), 5)
		if resp.StatusCode != 200 || body != "ECHO:HELLO" {
			t.Fatalf("client got %d %q, want 200 ECHO:HELLO", resp.StatusCode, body)
		}
		_, _, _, got, length := up.last()
		if string(got) != "HELLO" || length != 5 {
			t.Fatalf("upstream got %q (length %d)", got, length)
		}
	})

	t.Run("a buffered body over maxBufferSize is refused", func(t *testing.T) {
		calls, _, _, _, _ := up.last()
		resp, body := post(t, "/buffered", bytes.NewReader(make([]byte, 100<<10)), 100<<10)
		if resp.StatusCode != 413 || !strings.Contains(body, "too large") {
			t.Fatalf("client got %d %q, want 413", resp.StatusCode, body)
		}
		if now, _, _, _, _ := up.last(); now != calls {
			t.Fatal("the upstream was called")
		}
	})

	t.Run("bufferedPartial processes the first maxBufferSize bytes", func(t *testing.T) {
		in := append(bytes.Repeat([]byte("a"), 65536), bytes.Repeat([]byte("b"), 1000)...)
		resp, _ := post(t, "/partial", bytes.NewReader(in), int64(len(in)))
		if resp.StatusCode != 200 {
			t.Fatalf("client got %d", resp.StatusCode)
		}
		_, _, _, got, _ := up.last()
		if want := "P" + strings.Repeat("b", 1000); string(got) != want {
			t.Fatalf("upstream got %d bytes starting %q, want the processed prefix then the rest", len(got), got[:min(len(got), 8)])
		}
		if n := len(partial.Last(t).Received()); n != 65536 {
			t.Fatalf("the service got %d bytes, want 65536", n)
		}
	})

	t.Run("full duplex request body, service answers headers after the body", func(t *testing.T) {
		const size = 1 << 20 // far over maxBufferSize: streamed, never buffered
		pr, pw := io.Pipe()
		go func() {
			chunk := bytes.Repeat([]byte("a"), 8192)
			for i := 0; i < size/len(chunk); i++ {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			pw.Close()
		}()
		resp, body := post(t, "/duplex", pr, -1)
		if resp.StatusCode != 200 || len(body) != size+5 || body[:5] != "ECHO:" || strings.Trim(body[5:], "A") != "" {
			t.Fatalf("client got %d, %d bytes", resp.StatusCode, len(body))
		}
		_, _, h, got, _ := up.last()
		if len(got) != size || len(bytes.Trim(got, "A")) != 0 || h.Get("X-Duplex") != "held" {
			t.Fatalf("upstream got %d bytes, x-duplex %q", len(got), h.Get("X-Duplex"))
		}
	})

	t.Run("full duplex response body from a streaming upstream", func(t *testing.T) {
		resp, body := get(t, base+"/stream?n=300000")
		if resp.StatusCode != 200 || len(body) != 300000 || strings.Trim(body, "X") != "" {
			t.Fatalf("client got %d, %d bytes", resp.StatusCode, len(body))
		}
	})

	t.Run("immediate response", func(t *testing.T) {
		calls, _, _, _, _ := up.last()
		resp, body := get(t, base+"/immediate")
		if resp.StatusCode != 403 || body != "denied by the processor" || resp.Header.Get("X-Why") != "policy" {
			t.Fatalf("client got %d %q x-why %q", resp.StatusCode, body, resp.Header.Get("X-Why"))
		}
		if now, _, _, _, _ := up.last(); now != calls {
			t.Fatal("the upstream was called")
		}
	})

	t.Run("an invalid header mutation fails the request", func(t *testing.T) {
		resp, body := get(t, base+"/invalid")
		if resp.StatusCode != 500 || body != "external processing failed\n" {
			t.Fatalf("client got %d %q", resp.StatusCode, body)
		}
	})

	t.Run("mode override asks for the response body", func(t *testing.T) {
		resp, body := get(t, base+"/override")
		if resp.StatusCode != 200 || body != "overridden" {
			t.Fatalf("client got %d %q", resp.StatusCode, body)
		}
	})

	t.Run("service down, failClosed", func(t *testing.T) {
		calls, _, _, _, _ := up.last()
		resp, body := post(t, "/down-closed", strings.NewReader("payload"), 7)
		if resp.StatusCode != 500 || body != "external processing failed\n" {
			t.Fatalf("client got %d %q", resp.StatusCode, body)
		}
		if now, _, _, _, _ := up.last(); now != calls {
			t.Fatal("the upstream was called")
		}
	})

	t.Run("service down, failOpen keeps the body whole", func(t *testing.T) {
		resp, body := post(t, "/down-open", strings.NewReader("payload"), 7)
		if resp.StatusCode != 200 || body != "echo:payload" {
			t.Fatalf("client got %d %q", resp.StatusCode, body)
		}
	})
}

// TestExtProcLLMAndMCPStreams: extProc in its default full-duplex mode on
// an LLM route and on an MCP route, with a service passing every chunk on.
// The official SDKs' answers, streams included, come through whole, and
// the LLM route's token accounting still sees its stream end (through the
// processed body).
func TestExtProcLLMAndMCPStreams(t *testing.T) {
	proc := &extproctest.Server{}
	procAddr := extproctest.Start(t, proc)
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "Paris.", Usage: llmtest.Usage{InputTokens: 7, OutputTokens: 3}})
	mcpURL, calls := mcpTarget(t, "tools", "echo")
	cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", "extProc: {host: '"+procAddr+"'}") + `
- port: 3000
  listeners:
  - routes:
    - policies:
        extProc: {host: '` + procAddr + `'}
      backends:
      - mcp:
          targets:
          - name: tools
            mcp: {host: '` + mcpURL + `'}
`
	tg := startGateway(t, cfg, nil)
	openaiChat(t, openaiVia(tg), "gpt-4o-mini", "Paris.")
	eventually(t, 5*time.Second, "token usage from the processed streams", func() bool {
		var m bytes.Buffer
		tg.metrics().WritePrometheus(&m)
		for _, line := range strings.Split(m.String(), "\n") {
			// Two answers (plain and streamed), 3 output tokens each.
			if strings.HasPrefix(line, "agentgateway_gen_ai_client_token_usage_sum{") && strings.Contains(line, `gen_ai_token_type="output"`) && strings.HasSuffix(line, " 6") {
				return true
			}
		}
		return false
	})
	if len(proc.Streams()) < 2 {
		t.Fatalf("the service saw %d streams, want one per LLM request", len(proc.Streams()))
	}

	cs, err := mcpConnect(t, tg.url(3000)+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(llmCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	if err != nil || res.IsError || calls.Load() != 1 {
		t.Fatalf("tool call through extProc: %v %+v, %d calls", err, res, calls.Load())
	}
	if got := res.Content[0].(*sdk.TextContent).Text; got != "tools:echo" {
		t.Fatalf("tool answered %q", got)
	}
}

// TestExtProcClientBodies: the client's body reaches the service through
// the server's guard, as it reaches a backend. A chunked body the client
// stops before its last chunk is never completed upstream (400), a whole
// one goes through processed, and a client that waits for 100 Continue
// gets its body processed too: the policies that read bodies run once the
// body is there, never before it with none to see (extAuthz's
// includeRequestBody the same).
func TestExtProcClientBodies(t *testing.T) {
	upper := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{upper(st, m, true)}
	}}
	procAddr := extproctest.Start(t, upper)
	authz := &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		if r.GetAttributes().GetRequest().GetHttp().GetBody() == "let me in" {
			return extauthztest.Allow(nil, nil)
		}
		return extauthztest.Deny(codes.PermissionDenied)
	}}
	authzAddr := extauthztest.Start(t, authz)
	head := "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	cutHead := "POST /cut HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			// Bodies cut short go to an upstream of their own: whether the
			// gateway got as far as connecting to it depends on timing, so
			// what it records may come after the client's answer, and must
			// not be taken for another request's.
			addr, out := outcomeUpstream(t)
			cutAddr, cutOut := outcomeUpstream(t)
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /cut}}]
      policies:
        extProc: {host: '`+procAddr+`'}
      backends: [{host: '`+cutAddr+`'}]
    - matches: [{path: {pathPrefix: /p}}]
      policies:
        extProc: {host: '`+procAddr+`'}
      backends: [{host: '`+addr+`'}]
    - matches: [{path: {pathPrefix: /authz}}]
      policies:
        extAuthz: {host: '`+authzAddr+`', includeRequestBody: {}}
      backends: [{host: '`+addr+`'}]
`, nil, tr)
			for _, tc := range []struct {
				name, sent string
				wantStatus int
				wantBody   string // "": the upstream must not get a whole request
			}{
				{"half-closed after a chunk", cutHead + "5\r\nhello\r\n", 400, ""},
				{"half-closed inside a chunk", cutHead + "5\r\nhello\r\n3\r\nabc", 400, ""},
				{"complete, then half-closed", head + "5\r\nhello\r\n0\r\n\r\n", 200, "HELLO"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					sendAndHalfClose(t, c, tc.sent)
					if tc.wantBody != "" {
						o := nextOutcome(t, out)
						if o.err != nil || string(o.req.body) != tc.wantBody {
							t.Fatalf("the upstream got %q (error %v), want %q", o.req.body, o.err, tc.wantBody)
						}
					}
					m, err := readReply(br, "POST")
					if err != nil {
						t.Fatalf("reading the answer: %v", err)
					}
					if m.status() != tc.wantStatus {
						t.Fatalf("status %d (%q), want %d", m.status(), m.body, tc.wantStatus)
					}
					if tc.wantBody == "" {
						// What the cut-off upstream got so far (it may get
						// the rest later, or never be connected to).
						for {
							select {
							case o := <-cutOut:
								if o.err == nil {
									t.Fatalf("the upstream received a whole request with body %q", o.req.body)
								}
								continue
							default:
							}
							break
						}
					}
				})
			}
			for _, tc := range []struct {
				name, path, body string
				wantStatus       int
				wantUpstream     string
			}{
				{"extProc sees a body sent after 100 Continue", "/p", "hello", 200, "HELLO"},
				{"extAuthz sees a body sent after 100 Continue", "/authz", "let me in", 200, "let me in"},
				{"extAuthz refuses on a body sent after 100 Continue", "/authz", "let me out", 403, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					if _, err := io.WriteString(c, "POST "+tc.path+" HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(tc.body))+"\r\nExpect: 100-continue\r\n\r\n"); err != nil {
						t.Fatal(err)
					}
					m, err := readReply(br, "POST")
					if err != nil || m.status() != 100 {
						t.Fatalf("want 100 Continue before the body, got %d (%v)", m.status(), err)
					}
					if _, err := io.WriteString(c, tc.body); err != nil {
						t.Fatal(err)
					}
					if m, err = readReply(br, "POST"); err != nil || m.status() != tc.wantStatus {
						t.Fatalf("status %d (%v), want %d", m.status(), err, tc.wantStatus)
					}
					if tc.wantUpstream != "" {
						if o := nextOutcome(t, out); o.err != nil || string(o.req.body) != tc.wantUpstream {
							t.Fatalf("the upstream got %q (error %v), want %q", o.req.body, o.err, tc.wantUpstream)
						}
					}
				})
			}
		})
	}
}

// TestLLMAnswerReadWholeStillCounts: a response policy that reads an LLM
// answer whole (a transformation of response.body, here on a streamed
// answer) takes the stream off before the server observes it; the
// exchange's tokens still reach the metrics.
func TestLLMAnswerReadWholeStillCounts(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "Paris.", Usage: llmtest.Usage{InputTokens: 7, OutputTokens: 3}})
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "",
		`transformations: {response: {set: {x-body-bytes: 'string(size(response.body))'}}}`), nil)
	openaiChat(t, openaiVia(tg), "gpt-4o-mini", "Paris.")
	eventually(t, 5*time.Second, "token usage of the answers read whole", func() bool {
		var m bytes.Buffer
		tg.metrics().WritePrometheus(&m)
		for _, line := range strings.Split(m.String(), "\n") {
			if strings.HasPrefix(line, "agentgateway_gen_ai_client_token_usage_sum{") && strings.Contains(line, `gen_ai_token_type="output"`) && strings.HasSuffix(line, " 6") {
				return true
			}
		}
		return false
	})
}

// TestExtProcAnswerOutOfTurn: through the gateway, a service that answers
// out of turn fails the exchange at once, as the failure mode says. One
// that answers the request's headers and, unasked, sends an answer for the
// response's: the client never gets the early edit (500, or the response
// unprocessed). One that answers the request's headers with an answer for
// the response's body: 500 at once, not after the 10 s timeout, or the
// request unprocessed with its body.
func TestExtProcAnswerOutOfTurn(t *testing.T) {
	early := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
			return []*procv3.ProcessingResponse{
				extproctest.Reply(st, m, nil, nil),
				{Response: &procv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &procv3.HeadersResponse{Response: &procv3.CommonResponse{
					HeaderMutation: extproctest.Set(map[string]string{"x-early": "unsolicited"}),
				}}}},
			}
		}
		if _, ok := m.Request.(*procv3.ProcessingRequest_ResponseHeaders); ok {
			return nil // answered already, unasked
		}
		return extproctest.Passthrough(st, m)
	}}
	wrong := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
			return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ResponseBody{ResponseBody: &procv3.BodyResponse{}}}}
		}
		return extproctest.Passthrough(st, m)
	}}
	// The upstream answers the early service's requests once the gateway
	// has ended that stream, so that the early answer is in before the
	// response is processed (without the check it would never end: the
	// bound lets the response go on, and the test see what it became).
	up := &echoUpstream{}
	upAddr := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/early") {
			if all := early.Streams(); len(all) > 0 {
				select {
				case <-all[len(all)-1].Done():
				case <-time.After(5 * time.Second):
				}
			}
		}
		up.ServeHTTP(w, r)
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /early-closed}}]
      policies:
        extProc: {host: '${EARLY}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /early-open}}]
      policies:
        extProc: {host: '${EARLY}', failureMode: failOpen}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /wrong-closed}}]
      policies:
        extProc: {host: '${WRONG}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /wrong-open}}]
      policies:
        extProc: {host: '${WRONG}', failureMode: failOpen}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": upAddr, "EARLY": extproctest.Start(t, early), "WRONG": extproctest.Start(t, wrong)})
	base := tg.url(3000)
	tests := []struct {
		path, body string
		status     int
		want       string
	}{
		{"/early-closed", "", 500, "external processing failed\n"},
		{"/early-open", "", 200, "echo:"},
		{"/wrong-closed", "", 500, "external processing failed\n"},
		{"/wrong-open", "", 200, "echo:"},
		{"/wrong-closed/body", "payload", 500, "external processing failed\n"},
		{"/wrong-open/body", "payload", 200, "echo:payload"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, body := do(t, req)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("answered after %v: the answer out of turn was waited on, not failed at once", took)
			}
			if resp.StatusCode != tc.status || body != tc.want || resp.Header.Get("X-Early") != "" {
				t.Errorf("client got %d %q, x-early %q; want %d %q and no early edit", resp.StatusCode, body, resp.Header.Get("X-Early"), tc.status, tc.want)
			}
		})
	}
}

// TestExtProcSetReplacesEveryValueE2E: a header mutation's set_headers
// entry acts on every value of its name, as Envoy's append_action says:
// an overwrite replaces all the lines a client (or an upstream) sent,
// twice here, so that no second copy reaches the backend (or the client)
// beside the service's value; an append adds a line; add-if-absent and
// overwrite-if-exists look at the name as the message has it. The
// deprecated append flag is read when append_action is left unset. An
// immediate response's gRPC status replaces the grpc-status its headers
// gave. Over HTTP/1.1 and HTTP/2 alike.
func TestExtProcSetReplacesEveryValueE2E(t *testing.T) {
	opt := func(name, value string, action corev3.HeaderValueOption_HeaderAppendAction, appendFlag *bool) *corev3.HeaderValueOption {
		o := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, RawValue: []byte(value)}, AppendAction: action}
		if appendFlag != nil {
			o.Append = wrapperspb.Bool(*appendFlag) //lint:ignore SA1019 services still send it
		}
		return o
	}
	no, yes := false, true
	proc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		switch m.Request.(type) {
		case *procv3.ProcessingRequest_RequestHeaders:
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, &procv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				opt("x-user", "svc", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, nil),
				opt("x-tier", "svc", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS, nil),
				opt("x-none", "svc", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS, nil),
				opt("x-legacy", "svc", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, &no),
				opt("x-kept", "svc", corev3.HeaderValueOption_ADD_IF_ABSENT, nil),
				opt("x-list", "svc", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, &yes),
				opt("x-new", "svc", corev3.HeaderValueOption_ADD_IF_ABSENT, nil),
			}}, nil)}
		case *procv3.ProcessingRequest_ResponseHeaders:
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{"x-cache": "svc"}), nil)}
		}
		return extproctest.Passthrough(st, m)
	}}
	// immediate answers with grpc-status twice in its headers, and 7 as
	// its gRPC status, which replaces them.
	immediate := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
			Headers: &procv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				opt("grpc-status", "0", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, &yes),
				opt("grpc-status", "0", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, &yes),
			}},
			GrpcStatus: &procv3.GrpcStatus{Status: 7},
		}}}}
	}}
	// unknown sets a header with an append_action Envoy's enum does not
	// define: the answer is invalid (failure mode: closed, a 500).
	unknown := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, &procv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				opt("x-user", "svc", corev3.HeaderValueOption_HeaderAppendAction(9), nil),
			}}, nil)}
		}
		return extproctest.Passthrough(st, m)
	}}
	up := &echoUpstream{}
	upAddr := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Cache", "hit")
		w.Header().Add("X-Cache", "forged")
		up.ServeHTTP(w, r)
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /immediate}}]
      policies:
        extProc: {host: '${IMMEDIATE}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /unknown}}]
      policies:
        extProc: {host: '${UNKNOWN}'}
      backends: [{host: '${UP}'}]
    - policies:
        extProc:
          host: '${PROC}'
          processingOptions: {requestBodyMode: none, responseBodyMode: none}
      backends: [{host: '${UP}'}]
`, map[string]string{"PROC": extproctest.Start(t, proc), "IMMEDIATE": extproctest.Start(t, immediate), "UNKNOWN": extproctest.Start(t, unknown), "UP": upAddr})
	for _, tc := range bothClients() {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tg.url(3000)+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"X-User", "X-Tier", "X-List", "X-Kept", "X-Legacy"} {
				req.Header.Add(name, "c1")
				req.Header.Add(name, "c2")
			}
			resp, _ := doWith(t, tc.client, req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			_, _, h, _, _ := up.last()
			for _, want := range []struct {
				name   string
				values []string
			}{
				{"X-User", []string{"svc"}},
				{"X-Tier", []string{"svc"}},
				{"X-None", nil},
				{"X-List", []string{"c1", "c2", "svc"}},
				{"X-Kept", []string{"c1", "c2"}},
				{"X-New", []string{"svc"}},
				{"X-Legacy", []string{"svc"}},
			} {
				// In order: a name deleted or replaced moves no other
				// name's lines (policy.DelRequestHeader).
				got := h.Values(want.name)
				if !slices.Equal(got, want.values) {
					t.Errorf("the backend saw %s %q, want %q", want.name, got, want.values)
				}
			}
			if got := resp.Header.Values("X-Cache"); !slices.Equal(got, []string{"svc"}) {
				t.Errorf("the client saw X-Cache %q, want [svc]", got)
			}

			req, _ = http.NewRequest(http.MethodGet, tg.url(3000)+"/immediate", nil)
			resp, _ = doWith(t, tc.client, req)
			if got := resp.Header.Values("Grpc-Status"); resp.StatusCode != 403 || !slices.Equal(got, []string{"7"}) {
				t.Errorf("the immediate response: %d, grpc-status %q, want 403 and [7]", resp.StatusCode, got)
			}

			req, _ = http.NewRequest(http.MethodGet, tg.url(3000)+"/unknown", nil)
			req.Header.Set("X-User", "client")
			if resp, body := doWith(t, tc.client, req); resp.StatusCode != 500 || !strings.Contains(body, "external processing") {
				t.Errorf("an unknown append_action: %d %q, want 500 (the answer is invalid)", resp.StatusCode, body)
			}
		})
	}
}
