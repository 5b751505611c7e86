package extproc

import (
	"io"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestDuplexBodyIdleIsNotTheServiceTimeout: a full-duplex body whose
// source goes quiet for longer than the service's timeout (an SSE stream
// between events, a client sending slowly) goes on when more comes: the
// service, having answered every chunk, owes nothing, so its silence is
// not a timeout. It used to fail the body once the service's timeout had
// passed since the last chunk was sent. A service that holds a chunk
// unanswered (the second) still times out.
func TestDuplexBodyIdleIsNotTheServiceTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	echo := &extproctest.Server{Answer: extproctest.Passthrough}
	holds := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_ResponseBody); ok {
			if st.Held = append(st.Held, nil); len(st.Held) > 1 {
				return nil // held, never answered
			}
		}
		return extproctest.Passthrough(st, m)
	}}
	for _, tc := range []struct {
		desc     string
		srv      *extproctest.Server
		wantFail bool
	}{
		{"answered every chunk", echo, false},
		{"holds a chunk", holds, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := compile(t, extproctest.Start(t, tc.srv), false, timeout)
			c := newCtx("GET", "/x", "")
			if res := p.OnRequest(c); res != policy.Continue {
				t.Fatalf("OnRequest = %v, status %d", res, c.Fast.Response.StatusCode())
			}
			// The upstream's answer streams: the body's source.
			pr, pw := io.Pipe()
			c.Fast.Response.SetStatusCode(200)
			c.Fast.Response.SetBodyStream(detachable{pr}, -1)
			go func() {
				_, _ = pw.Write([]byte("first"))
				// The source is quiet for three of the service's timeouts.
				<-time.After(3 * timeout)
				_, _ = pw.Write([]byte("second"))
				pw.Close()
			}()
			p.OnResponse(c)
			if c.Fast.Response.StatusCode() != 200 || !c.Fast.Response.IsBodyStream() {
				t.Fatalf("OnResponse: status %d, streamed %v", c.Fast.Response.StatusCode(), c.Fast.Response.IsBodyStream())
			}
			got, err := io.ReadAll(c.Fast.Response.BodyStream())
			if tc.wantFail {
				if err == nil {
					t.Fatalf("read %q without an error; want the service's timeout", got)
				}
				return
			}
			if err != nil || string(got) != "firstsecond" {
				t.Fatalf("read %q, %v; want firstsecond and the body's end", got, err)
			}
		})
	}
}

// detachable is an upstream body stream the policy may take
// (policy.Detacher), as the server's are.
type detachable struct{ io.Reader }

func (detachable) Detach() {}
