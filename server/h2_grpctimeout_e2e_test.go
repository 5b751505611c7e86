package server

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestH2GRPCTimeoutMidStream: a route timeout that fires while a gRPC
// answer streams, after its head went out, reaches an HTTP/2 client as
// DEADLINE_EXCEEDED (trailers with grpc-status 4 and END_STREAM) when the
// answer stopped between two messages, as the README has a timeout reach
// gRPC clients; it was a reset (INTERNAL_ERROR), which grpc-go reports as
// code Internal. Cut inside a message, the answer cannot end cleanly: the
// stream is reset, so that the client does not take half a message for a
// whole one.
func TestH2GRPCTimeoutMidStream(t *testing.T) {
	msg, err := proto.Marshal(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte("first")}})
	if err != nil {
		t.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	frame = append(frame, msg...)
	// The upstream answers one message, then (x-cut: half) the first
	// half of another, and waits for the gateway to give the call up.
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(200)
		_, _ = w.Write(frame)
		if r.Header.Get("X-Cut") == "half" {
			_, _ = w.Write(frame[:len(frame)/2])
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {timeout: {requestTimeout: 500ms}}
      backends: [{host: `+up+`, policies: {http: {version: HTTP2}}}]
`, nil)
	tc := testgrpc.NewTestServiceClient(grpcClient(t, tg.addr(3000), nil))
	for _, c := range []struct {
		name, cut string
		want      codes.Code
		message   string
	}{
		{"between messages", "", codes.DeadlineExceeded, "upstream request timeout"},
		{"inside a message", "half", codes.Internal, "RST_STREAM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if c.cut != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-cut", c.cut)
			}
			stream, err := tc.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			first, err := stream.Recv()
			if err != nil || string(first.GetPayload().GetBody()) != "first" {
				t.Fatalf("first message: %v %v", first, err)
			}
			_, err = stream.Recv()
			st := status.Convert(err)
			if st.Code() != c.want || !strings.Contains(st.Message(), c.message) {
				t.Fatalf("after the timeout: %v; want %v, message with %q", err, c.want, c.message)
			}
		})
	}
}

// TestGRPCFraming: the framing follower tells a body that stopped between
// two messages from one that stopped inside a message or its prefix,
// however the body came in pieces.
func TestGRPCFraming(t *testing.T) {
	msg := func(n int) []byte {
		b := binary.BigEndian.AppendUint32([]byte{0}, uint32(n))
		return append(b, strings.Repeat("m", n)...)
	}
	two := append(msg(3), msg(0)...)
	for _, c := range []struct {
		name    string
		body    []byte
		between bool
	}{
		{"nothing", nil, true},
		{"one message", msg(3), true},
		{"an empty message", msg(0), true},
		{"two messages", two, true},
		{"a large message", msg(70000), true},
		{"inside a prefix", msg(3)[:2], false},
		{"after a prefix", msg(3)[:5], false},
		{"inside a message", msg(3)[:6], false},
		{"inside the second prefix", two[:len(two)-1], false},
		{"inside a large message", msg(70000)[:65536], false},
	} {
		for _, piece := range []int{1, 2, 5, 7, 1 << 20} {
			var g grpcFraming
			for p := c.body; len(p) > 0; {
				k := min(piece, len(p))
				g.take(p[:k])
				p = p[k:]
			}
			if g.between() != c.between {
				t.Errorf("%s in pieces of %d: between %v; want %v", c.name, piece, g.between(), c.between)
			}
		}
	}
}
