package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestH2StreamLimitKeptExactly: a client that keeps exactly
// SETTINGS_MAX_CONCURRENT_STREAMS streams open, opening the next one only
// once one ended (its END_STREAM came), is never refused a stream, and
// keeps its connection, whatever the backend speaks. A stream stops
// counting once its last frame went out (RFC 9113 5.1.2), not once its
// handler has tidied up after it: an HTTP/2 upstream exchange, which every
// gRPC backend has, gives its upstream stream up after the answer's end,
// and the client's next stream came meanwhile (REFUSED_STREAM, each
// counted against the error budget until GOAWAY ENHANCE_YOUR_CALM).
func TestH2StreamLimitKeptExactly(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	for _, tc := range []struct {
		name, version string
		total         int
	}{
		{"HTTP2 upstream", "HTTP2", 30 * h2MaxStreams},
		{"HTTP1 upstream", "HTTP1", 10 * h2MaxStreams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startGateway(t, oneRouteVersion(up, tc.version), nil)
			h := dialH2Raw(t, tg.addr(3000))
			// The server's settings, acknowledged: the limit is known.
			if _, err := h.readUntil(5*time.Second, nil, func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok }); err != nil {
				t.Fatal(err)
			}
			limit := int(h.settings[http2.SettingMaxConcurrentStreams])
			if limit != h2MaxStreams {
				t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d; want %d", limit, h2MaxStreams)
			}
			answers := map[uint32]*h2Answer{}
			next, opened, open, finished := uint32(1), 0, 0, 0
			openOne := func() {
				if err := h.request(next, "GET", "/x", true); err != nil {
					t.Fatalf("stream %d: %v", next, err)
				}
				next += 2
				opened++
				open++
			}
			for range limit {
				openOne()
			}
			refused, failed := 0, 0
			_, err := h.readUntil(60*time.Second, answers, func(f http2.Frame) bool {
				switch f := f.(type) {
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY %v after %d streams (%d refused)", f.ErrCode, finished, refused)
				case *http2.RSTStreamFrame, *http2.MetaHeadersFrame, *http2.DataFrame:
					id := f.Header().StreamID
					a := answers[id]
					if a == nil || !a.done {
						return false
					}
					delete(answers, id)
					open--
					finished++
					switch {
					case a.wasReset && a.reset == http2.ErrCodeRefusedStream:
						refused++
					case a.wasReset || a.status != "200" || string(a.body) != "ok":
						failed++
					}
					if opened < tc.total {
						openOne()
					}
				}
				return finished == tc.total
			})
			if err != nil {
				t.Fatalf("after %d streams (%d refused, %d failed): %v", finished, refused, failed, err)
			}
			if refused != 0 || failed != 0 {
				t.Fatalf("%d streams kept within the limit of %d: %d refused, %d failed", tc.total, limit, refused, failed)
			}
		})
	}
}

// TestH2StreamLimitGRPCLoad: grpc-go's client keeps within the stream
// limit the gateway advertises (calls past it wait for a stream), so 150
// goroutines of unary calls on one connection all succeed: none gets
// REFUSED_STREAM, and the connection is not closed for them (UNAVAILABLE).
func TestH2StreamLimitGRPCLoad(t *testing.T) {
	up, _ := grpcUpstream(t, nil)
	tg := startGateway(t, oneRoute(up), nil)
	tc := testgrpc.NewTestServiceClient(grpcClient(t, tg.addr(3000), nil))
	const workers, calls = 150, 40
	var failed atomic.Int32
	var first atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := tc.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("x")}})
				cancel()
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, status.Code(err).String()+": "+err.Error())
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed; first: %v", n, workers*calls, first.Load())
	}
}

// TestH2BudgetRefusalsAreNoErrors: a stream refused for the gateway's own
// reasons (the header lists of the open streams fill the connection's
// budget, which the client cannot know) is no protocol error of the
// client's: refused again and again, within the stream limit, the client
// keeps its connection (h2ErrorBudget counts only its own faults).
func TestH2BudgetRefusalsAreNoErrors(t *testing.T) {
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRoute(up), nil)
	h := dialH2Raw(t, tg.addr(3000))
	big := strings.Repeat("a", 4000)
	var fields []string
	for range 15 {
		fields = append(fields, "x-big", big)
	}
	answers := map[uint32]*h2Answer{}
	// POSTs whose body never comes hold their header lists: 1 MiB holds
	// 17 of 60 KB (TestH2HeaderListBudget), the rest are refused.
	const streams = 30
	refused := func() int {
		n := 0
		for _, a := range answers {
			if a.wasReset && a.reset == http2.ErrCodeRefusedStream {
				n++
			}
		}
		return n
	}
	for i := range uint32(streams) {
		if err := h.request(1+2*i, "POST", "/hold", false, fields...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return refused() >= streams-17 }); err != nil {
		t.Fatalf("refused %d of %d streams: %v", refused(), streams, err)
	}
	id := uint32(2*streams - 1)
	for i := range h2ErrorBudget + 10 {
		id += 2
		if err := h.request(id, "GET", "/again", true, fields...); err != nil {
			t.Fatalf("after %d refusals: %v", i+1, err)
		}
		f, err := h.readUntil(10*time.Second, answers, func(f http2.Frame) bool {
			_, goAway := f.(*http2.GoAwayFrame)
			return goAway || answers[id] != nil && answers[id].done
		})
		if err != nil {
			t.Fatalf("after %d refusals: %v", i+1, err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY %v after %d refusals", ga.ErrCode, i)
		}
		if a := answers[id]; !a.wasReset || a.reset != http2.ErrCodeRefusedStream {
			t.Fatalf("stream %d: %+v; want REFUSED_STREAM", id, a)
		}
	}
	for i := range uint32(streams) {
		if a := answers[1+2*i]; a == nil || !a.wasReset {
			_ = h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(1+2*i, http2.ErrCodeCancel) })
		}
	}
	id += 2
	if err := h.request(id, "GET", "/after", true, fields...); err != nil {
		t.Fatal(err)
	}
	if a := h.answer(t, answers, id); a.status != "200" || string(a.body) != "GET /after " {
		t.Fatalf("after the held streams closed: %+v", a)
	}
}
