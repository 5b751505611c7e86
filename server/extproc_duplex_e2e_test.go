package server

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

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
