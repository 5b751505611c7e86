package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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
