// Package extproctest runs a real Envoy external processing service (gRPC,
// envoy.service.ext_proc.v3) for tests of the extProc policy. Its behaviour
// is a function from each message received to the answers to send, so a
// test can answer at once, hold answers back (a service that waits for a
// whole body before it answers the headers), or answer immediately.
package extproctest

import (
	"bytes"
	"io"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/relaygate/gateway/policy/policytest"
)

// Server is an external processing service.
type Server struct {
	procv3.UnimplementedExternalProcessorServer
	// Answer returns the answers to one message, in order; st is the
	// stream's own state, for answers that depend on earlier messages.
	// Nil answers every message with an empty answer of its kind (no
	// change; in full-duplex mode, each body chunk sent back unchanged).
	Answer func(st *Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse

	mu      sync.Mutex
	streams []*Stream
}

// Stream is what one stream (one request) sent the service.
type Stream struct {
	Metadata metadata.MD
	mu       sync.Mutex
	messages []*procv3.ProcessingRequest
	// Held is the test's own state across a stream's messages.
	Held []*procv3.ProcessingResponse
	body bytes.Buffer // the body chunks received so far, either direction

	sendMu sync.Mutex
	stream procv3.ExternalProcessor_ProcessServer
	done   chan struct{}
}

// Send sends m on the stream now, out of the answer function's turn: a
// service that sends what it was not asked for. It fails with io.EOF once
// the stream has ended.
func (st *Stream) Send(m *procv3.ProcessingResponse) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	select {
	case <-st.done:
		return io.EOF
	default:
	}
	return st.stream.Send(m)
}

// Done is closed when the stream has ended (the gateway closed or
// cancelled it, or the service ended it).
func (st *Stream) Done() <-chan struct{} { return st.done }

// Received returns the body bytes received so far (Reply records them).
func (st *Stream) Received() []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	return bytes.Clone(st.body.Bytes())
}

func (st *Stream) record(b []byte) {
	st.mu.Lock()
	st.body.Write(b)
	st.mu.Unlock()
}

// Messages returns the messages received so far.
func (st *Stream) Messages() []*procv3.ProcessingRequest {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]*procv3.ProcessingRequest(nil), st.messages...)
}

// Process implements the service.
func (s *Server) Process(stream procv3.ExternalProcessor_ProcessServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	st := &Stream{Metadata: md, stream: stream, done: make(chan struct{})}
	defer func() {
		st.sendMu.Lock() // no Send after the handler returns
		close(st.done)
		st.sendMu.Unlock()
	}()
	s.mu.Lock()
	s.streams = append(s.streams, st)
	s.mu.Unlock()
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		st.mu.Lock()
		st.messages = append(st.messages, m)
		st.mu.Unlock()
		answer := s.Answer
		if answer == nil {
			answer = Passthrough
		}
		for _, a := range answer(st, m) {
			if a == End {
				return nil
			}
			if err := st.Send(a); err != nil {
				return err
			}
		}
	}
}

// Streams returns the streams opened so far.
func (s *Server) Streams() []*Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Stream(nil), s.streams...)
}

// Last returns the last stream opened; the test fails without one.
func (s *Server) Last(t testing.TB) *Stream {
	t.Helper()
	all := s.Streams()
	if len(all) == 0 {
		t.Fatal("the external processing service got no stream")
	}
	return all[len(all)-1]
}

// Start serves s on 127.0.0.1 (an OS-chosen port) until the test ends and
// returns its "host:port".
func Start(t testing.TB, s *Server) string {
	t.Helper()
	return policytest.ServeGRPC(t, func(srv *grpc.Server) { procv3.RegisterExternalProcessorServer(srv, s) })
}

// End, among an answer function's answers, ends the stream there (the
// service closes it, status OK) instead of being sent: a service that
// stops answering in the middle of an exchange.
var End = &procv3.ProcessingResponse{}

// Passthrough answers m changing nothing: an empty answer of its kind, and
// in full-duplex mode each body chunk sent back as it came.
func Passthrough(st *Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
	return []*procv3.ProcessingResponse{Reply(st, m, nil, nil)}
}

// Reply is the answer to m: the header mutation hm, and the body mutation
// bm; for a body chunk in full-duplex mode with bm nil, the chunk sent back
// unchanged. It records body chunks (Stream.Received).
func Reply(st *Stream, m *procv3.ProcessingRequest, hm *procv3.HeaderMutation, bm *procv3.BodyMutation) *procv3.ProcessingResponse {
	cr := &procv3.CommonResponse{HeaderMutation: hm, BodyMutation: bm}
	switch r := m.Request.(type) {
	case *procv3.ProcessingRequest_RequestHeaders:
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestHeaders{RequestHeaders: &procv3.HeadersResponse{Response: cr}}}
	case *procv3.ProcessingRequest_ResponseHeaders:
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &procv3.HeadersResponse{Response: cr}}}
	case *procv3.ProcessingRequest_RequestBody:
		st.record(r.RequestBody.GetBody())
		if bm == nil {
			cr.BodyMutation = Chunk(r.RequestBody.GetBody(), r.RequestBody.GetEndOfStream())
		}
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestBody{RequestBody: &procv3.BodyResponse{Response: cr}}}
	case *procv3.ProcessingRequest_ResponseBody:
		st.record(r.ResponseBody.GetBody())
		if bm == nil {
			cr.BodyMutation = Chunk(r.ResponseBody.GetBody(), r.ResponseBody.GetEndOfStream())
		}
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseBody{ResponseBody: &procv3.BodyResponse{Response: cr}}}
	}
	return &procv3.ProcessingResponse{}
}

// Chunk is a full-duplex body mutation: this chunk goes on.
func Chunk(b []byte, eos bool) *procv3.BodyMutation {
	return &procv3.BodyMutation{Mutation: &procv3.BodyMutation_StreamedResponse{StreamedResponse: &procv3.StreamedBodyResponse{Body: b, EndOfStream: eos}}}
}

// Body is a buffered body mutation: the body is replaced by b.
func Body(b []byte) *procv3.BodyMutation {
	return &procv3.BodyMutation{Mutation: &procv3.BodyMutation_Body{Body: b}}
}

// Set is a header mutation setting (overwriting) each name to its value,
// then removing the names in remove.
func Set(kv map[string]string, remove ...string) *procv3.HeaderMutation {
	hm := &procv3.HeaderMutation{RemoveHeaders: remove}
	for k, v := range kv {
		hm.SetHeaders = append(hm.SetHeaders, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	return hm
}

// Header returns the value the header map gives name ("" when none).
func Header(h *corev3.HeaderMap, name string) string {
	for _, v := range h.GetHeaders() {
		if v.GetKey() == name {
			if len(v.GetRawValue()) > 0 {
				return string(v.GetRawValue())
			}
			return v.GetValue()
		}
	}
	return ""
}
