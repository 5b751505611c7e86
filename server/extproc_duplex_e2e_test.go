package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// accessLineOf waits for the access line of the one request to path (a
// request whose body streams is recorded when its stream closes, a moment
// after the client has read it) and returns it.
func accessLineOf(t *testing.T, tg *testGateway, path string) map[string]any {
	t.Helper()
	var found []map[string]any
	eventually(t, 5*time.Second, "the access line of "+path, func() bool {
		found = found[:0]
		for _, e := range tg.accessLogs().FilterMessage("request").All() {
			if m := e.ContextMap(); m["path"] == path {
				found = append(found, m)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		t.Fatalf("%d access lines for %s, want 1", len(found), path)
	}
	return found[0]
}

// streamingUpstream answers in HTTP/1.1 or HTTP/2 (the gateway speaks
// its client's protocol to it): a request with a query n gets n bytes of
// 'x' in pieces of 4 KiB, each flushed (no declared length); any other
// "echo:" and its body.
func streamingUpstream(t *testing.T) string {
	return upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !r.URL.Query().Has("n") {
			_, _ = w.Write(append([]byte("echo:"), body...))
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		chunk := bytes.Repeat([]byte("x"), 4096)
		for n > 0 {
			k := min(n, len(chunk))
			_, _ = w.Write(chunk[:k])
			w.(http.Flusher).Flush()
			n -= k
		}
	}))
}

// immediateStop is the service's immediate response in these tests.
func immediateStop() *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode(451)},
		Headers: extproctest.Set(map[string]string{"x-imm": "r"}),
		Body:    []byte("stopped\n"),
	}}}
}

// TestExtProcDuplexResponseFailsBeforeItsHead: in full-duplex mode (the
// default), a service that fails on the response's body before any of it
// went on (it closes its stream at the body, answers it with an immediate
// response, or answers the response headers twice) has the client
// answered as in the buffered modes: 500 `external processing failed`
// (failClosed), the body whole and unprocessed (failOpen), or the
// immediate response (either mode), never an empty reply; and the access
// line has the status the client got. A small upstream body (read whole)
// and a streamed one, over HTTP/1.1 and HTTP/2.
func TestExtProcDuplexResponseFailsBeforeItsHead(t *testing.T) {
	upAddr := streamingUpstream(t)
	atBody := func(answer func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse) *extproctest.Server {
		return &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			if _, ok := m.Request.(*procv3.ProcessingRequest_ResponseBody); ok {
				return answer(st, m)
			}
			return extproctest.Passthrough(st, m)
		}}
	}
	closes := atBody(func(*extproctest.Stream, *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{extproctest.End}
	})
	immediate := atBody(func(*extproctest.Stream, *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{immediateStop()}
	})
	twice := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_ResponseHeaders); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, nil), extproctest.Reply(st, m, nil, nil)}
		}
		return extproctest.Passthrough(st, m)
	}}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /closes-closed}}]
      policies: {extProc: {host: '${CLOSES}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /closes-open}}]
      policies: {extProc: {host: '${CLOSES}', failureMode: failOpen}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /immediate-closed}}]
      policies: {extProc: {host: '${IMMEDIATE}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /immediate-open}}]
      policies: {extProc: {host: '${IMMEDIATE}', failureMode: failOpen}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /twice-closed}}]
      policies: {extProc: {host: '${TWICE}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /twice-open}}]
      policies: {extProc: {host: '${TWICE}', failureMode: failOpen}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": upAddr, "CLOSES": extproctest.Start(t, closes), "IMMEDIATE": extproctest.Start(t, immediate), "TWICE": extproctest.Start(t, twice)})
	base := tg.url(3000)
	const streamed = 20000
	whole := map[string]string{"small": "echo:", "streamed": strings.Repeat("x", streamed)}
	for _, c := range bothClients() {
		for _, tc := range []struct {
			service, mode string
			status        int
			body          string // "" for the upstream's body whole
		}{
			{"closes", "closed", 500, "external processing failed\n"},
			{"closes", "open", 200, ""},
			{"immediate", "closed", 451, "stopped\n"},
			{"immediate", "open", 451, "stopped\n"},
			{"twice", "closed", 500, "external processing failed\n"},
			{"twice", "open", 200, ""},
		} {
			for _, size := range []string{"small", "streamed"} {
				name := c.name + "/" + tc.service + "-" + tc.mode + "/" + size
				t.Run(name, func(t *testing.T) {
					path := "/" + tc.service + "-" + tc.mode + "/" + c.name + "/" + size
					query := ""
					if size == "streamed" {
						query = "?n=" + itoa(streamed)
					}
					req, err := http.NewRequest(http.MethodGet, base+path+query, nil)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := c.client.Do(req)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					want := tc.body
					if want == "" {
						want = whole[size]
					}
					if err != nil || resp.StatusCode != tc.status || string(body) != want {
						t.Fatalf("client got %d, %d bytes %.40q (%v); want %d %.40q", resp.StatusCode, len(body), body, err, tc.status, want)
					}
					if tc.service == "immediate" && resp.Header.Get("X-Imm") != "r" {
						t.Errorf("x-imm %q: the immediate response's header was lost", resp.Header.Get("X-Imm"))
					}
					line := accessLineOf(t, tg, path)
					if got := line["status"]; got != int64(tc.status) {
						t.Errorf("access line status %v, want %d (what the client got)", got, tc.status)
					}
				})
			}
		}
	}
}

// TestExtProcDuplexResponseCutAfterItsHead: a service that fails on a
// full-duplex response body after some of it went out to the client (it
// answers the first chunk, then closes its stream or answers with an
// immediate response at the second) can only cut the body short, so the
// client sees it broken: over HTTP/1.1 the connection closes without the
// last chunk, over HTTP/2 the stream is reset. Whatever the failure mode
// (failOpen cannot take back what went out). The access line keeps the
// status that went out and says the body was cut by extProc, with the
// bytes that reached the client; before, it said nothing of it.
func TestExtProcDuplexResponseCutAfterItsHead(t *testing.T) {
	var gate atomic.Pointer[chan struct{}]
	upAddr := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		select {
		case <-*gate.Load():
		case <-time.After(5 * time.Second):
		}
		_, _ = io.WriteString(w, "second")
	}))
	// The service answers the first chunk (upper-cased) and fails at the
	// second, which the upstream sends once the client has the first.
	at2 := func(fail *procv3.ProcessingResponse) *extproctest.Server {
		return &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			b, ok := m.Request.(*procv3.ProcessingRequest_ResponseBody)
			if !ok {
				return extproctest.Passthrough(st, m)
			}
			st.Held = append(st.Held, nil)
			if len(st.Held) == 1 {
				return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, extproctest.Chunk(bytes.ToUpper(b.ResponseBody.GetBody()), false))}
			}
			return []*procv3.ProcessingResponse{fail}
		}}
	}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /closes-closed}}]
      policies: {extProc: {host: '${CLOSES}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /closes-open}}]
      policies: {extProc: {host: '${CLOSES}', failureMode: failOpen}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /immediate-closed}}]
      policies: {extProc: {host: '${IMMEDIATE}'}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": upAddr, "CLOSES": extproctest.Start(t, at2(extproctest.End)), "IMMEDIATE": extproctest.Start(t, at2(immediateStop()))})
	for _, c := range bothClients() {
		for _, route := range []string{"closes-closed", "closes-open", "immediate-closed"} {
			path := "/" + route + "/" + c.name
			t.Run(path[1:], func(t *testing.T) {
				g := make(chan struct{})
				gate.Store(&g)
				resp, err := c.client.Get(tg.url(3000) + path)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				first := make([]byte, 5)
				_, err = io.ReadFull(resp.Body, first)
				close(g)
				rest, errRest := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || err != nil || string(first) != "FIRST" || len(rest) != 0 || errRest == nil {
					t.Fatalf("client got %d %q (%v) then %q, error %v; want 200, FIRST, then the body broken off", resp.StatusCode, first, err, rest, errRest)
				}
				// HTTP/1.1: closed without the last chunk; HTTP/2: reset.
				if !errors.Is(errRest, io.ErrUnexpectedEOF) && !strings.Contains(errRest.Error(), "INTERNAL_ERROR") {
					t.Errorf("the body broke off with %v; want a cut chunked body or a stream reset", errRest)
				}
				line := accessLineOf(t, tg, path)
				if line["status"] != int64(200) || line["bytes_out"] != int64(5) || !strings.Contains(fmt.Sprint(line["upstream_error"]), "extProc:") {
					t.Errorf("access line status %v, bytes_out %v, upstream_error %v; want 200, 5 and the body's cut by extProc", line["status"], line["bytes_out"], line["upstream_error"])
				}
			})
		}
	}
}

// TestExtProcDuplexRequestBodyImmediate: a service that answers the
// request itself (an immediate response) while a full-duplex request body
// streams to it has the client get that answer, its status, headers and
// body, as before the body, whatever the failure mode (an immediate
// response is an answer, not a failure): nothing went to the client yet.
// Before, the client got 500. A body that fits one chunk and one of many
// chunks, over HTTP/1.1 and HTTP/2; the access line has the status the
// client got and says why the upstream request was cut off.
func TestExtProcDuplexRequestBodyImmediate(t *testing.T) {
	upAddr := streamingUpstream(t)
	stops := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if b, ok := m.Request.(*procv3.ProcessingRequest_RequestBody); ok {
			st.Held = append(st.Held, nil) // chunks seen
			if b.RequestBody.GetEndOfStream() || len(st.Held) == 2 {
				return []*procv3.ProcessingResponse{immediateStop()}
			}
		}
		return extproctest.Passthrough(st, m)
	}}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /closed}}]
      policies: {extProc: {host: '${STOPS}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /open}}]
      policies: {extProc: {host: '${STOPS}', failureMode: failOpen}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": upAddr, "STOPS": extproctest.Start(t, stops)})
	base := tg.url(3000)
	for _, c := range bothClients() {
		for _, mode := range []string{"closed", "open"} {
			for _, size := range []int{10, 1 << 20} {
				path := "/" + mode + "/" + c.name + "/" + itoa(size)
				t.Run(path[1:], func(t *testing.T) {
					// A body of unknown length, in pieces: several chunks
					// reach the service when it is large.
					pr, pw := io.Pipe()
					go func() {
						piece := bytes.Repeat([]byte("a"), min(size, 8192))
						for sent := 0; sent < size; sent += len(piece) {
							if _, err := pw.Write(piece); err != nil {
								return
							}
						}
						pw.Close()
					}()
					req, err := http.NewRequest(http.MethodPost, base+path, pr)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := c.client.Do(req)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					pr.CloseWithError(io.ErrClosedPipe)
					if err != nil || resp.StatusCode != 451 || string(body) != "stopped\n" || resp.Header.Get("X-Imm") != "r" {
						t.Fatalf("client got %d %q x-imm %q (%v); want the immediate response: 451 %q x-imm r", resp.StatusCode, body, resp.Header.Get("X-Imm"), err, "stopped\n")
					}
					// (An immediate response that comes before the request
					// phase took the answer to the headers is answered there,
					// the upstream never called.)
					line := accessLineOf(t, tg, path)
					if cut := line["upstream_error"]; line["status"] != int64(451) || cut != nil && !strings.Contains(fmt.Sprint(cut), "immediate response") {
						t.Errorf("access line status %v, upstream_error %v; want 451, and why the upstream request was cut off if it was", line["status"], cut)
					}
				})
			}
		}
	}
}

// TestExtProcDuplexRequestBodyCutClosesConnection: a full-duplex request
// body the service fails in the middle of (it ends its stream at the
// second chunk) is answered 500 `external processing failed`, and since
// the rest of the body is left unread on the client's connection, that
// answer closes it and says so (Connection: close). Before, the pump's
// halt set the connection's read deadline behind the server's guard: the
// answer lost its Connection: close (the client then met a connection
// closed under its next request), and the halted read could be taken for
// the client's own timeout (408).
func TestExtProcDuplexRequestBodyCutClosesConnection(t *testing.T) {
	upAddr := streamingUpstream(t)
	ends := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestBody); ok {
			st.Held = append(st.Held, nil) // chunks seen
			if len(st.Held) == 2 {
				return []*procv3.ProcessingResponse{extproctest.End}
			}
		}
		return extproctest.Passthrough(st, m)
	}}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
      policies: {extProc: {host: '${ENDS}'}}
`, map[string]string{"UP": upAddr, "ENDS": extproctest.Start(t, ends)})
	for i := range 10 {
		const size = 1 << 20
		pr, pw := io.Pipe()
		go func() {
			piece := bytes.Repeat([]byte("a"), 8192)
			for sent := 0; sent < size; sent += len(piece) {
				if _, err := pw.Write(piece); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/x", pr)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pr.CloseWithError(io.ErrClosedPipe)
		if resp.StatusCode != 500 || string(body) != "external processing failed\n" || !resp.Close {
			t.Fatalf("request %d: client got %d %q, connection close %v; want 500 and the connection closed", i, resp.StatusCode, body, resp.Close)
		}
	}
}

// TestExtProcDuplexBareContinueFails: in full-duplex mode an answer to a
// body chunk that carries no body mutation (a bare CONTINUE, as the
// buffered modes take it) does not say which bytes go on, since answers
// are not one per chunk; Envoy refuses it. It fails the body by the
// failure mode: 500 `external processing failed` (failClosed), or the
// body whole and unprocessed (failOpen, before any processed byte went
// on), request and response bodies alike, of one chunk or many. Before,
// it was taken for the end of the body: the upstream got a request body
// cut to nothing, the client a 200.
func TestExtProcDuplexBareContinueFails(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]byte{} // the request bodies the upstream got whole, by path
	upAddr := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		mu.Lock()
		got[r.URL.Path] = body
		mu.Unlock()
		_, _ = w.Write(body) // the response body is the request's
	}))
	bare := func(side string) *extproctest.Server {
		return &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			switch m.Request.(type) {
			case *procv3.ProcessingRequest_RequestBody:
				if side == "req" {
					return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_RequestBody{RequestBody: &procv3.BodyResponse{Response: &procv3.CommonResponse{}}}}}
				}
			case *procv3.ProcessingRequest_ResponseBody:
				if side == "resp" {
					return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ResponseBody{ResponseBody: &procv3.BodyResponse{Response: &procv3.CommonResponse{}}}}}
				}
			}
			return extproctest.Passthrough(st, m)
		}}
	}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /req-closed}}]
      policies: {extProc: {host: '${REQ}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /req-open}}]
      policies: {extProc: {host: '${REQ}', failureMode: failOpen}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /resp-closed}}]
      policies: {extProc: {host: '${RESP}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /resp-open}}]
      policies: {extProc: {host: '${RESP}', failureMode: failOpen}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": upAddr, "REQ": extproctest.Start(t, bare("req")), "RESP": extproctest.Start(t, bare("resp"))})
	for _, c := range bothClients() {
		for _, route := range []string{"req-closed", "req-open", "resp-closed", "resp-open"} {
			for _, size := range []int{6, 300 << 10} {
				path := "/" + route + "/" + c.name + "/" + itoa(size)
				t.Run(path[1:], func(t *testing.T) {
					sent := bytes.Repeat([]byte("b"), size)
					req, err := http.NewRequest(http.MethodPost, tg.url(3000)+path, bytes.NewReader(sent))
					if err != nil {
						t.Fatal(err)
					}
					resp, err := c.client.Do(req)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					mu.Lock()
					upstreamGot, whole := got[path]
					mu.Unlock()
					if strings.HasSuffix(route, "-open") {
						if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, sent) {
							t.Fatalf("client got %d, %d bytes (%v); want 200 and the body whole, unprocessed", resp.StatusCode, len(body), err)
						}
						if !bytes.Equal(upstreamGot, sent) {
							t.Fatalf("the upstream got %d bytes; want the %d sent", len(upstreamGot), size)
						}
						return
					}
					if err != nil || resp.StatusCode != 500 || string(body) != "external processing failed\n" {
						t.Fatalf("client got %d %.40q (%v); want 500 external processing failed", resp.StatusCode, body, err)
					}
					if route == "req-closed" && whole {
						t.Fatalf("the upstream got a whole request body of %d bytes; want the request cut off", len(upstreamGot))
					}
				})
			}
		}
	}
}
