package extproc

import (
	"context"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
)

// blockedStream is a stream whose Send waits on flow control until its
// context ends, as a service that does not read (because it waits for the
// gateway to read its answers) leaves it.
type blockedStream struct {
	grpc.ClientStream
	ctx     context.Context
	sending chan struct{}
}

func (b *blockedStream) Send(*procv3.ProcessingRequest) error {
	close(b.sending)
	<-b.ctx.Done()
	return b.ctx.Err()
}

func (b *blockedStream) Recv() (*procv3.ProcessingResponse, error) {
	<-b.ctx.Done()
	return nil, b.ctx.Err()
}

func (b *blockedStream) CloseSend() error { return nil }

// TestEndDoesNotWaitForABlockedSend: ending a session while a send (the
// body's pump) waits on flow control ends that send; it used to wait for
// the send's lock first, which the blocked send never gave back (a
// deadlock seen under load in TestExtProcAbandonedExchangesLeaveNothing).
func TestEndDoesNotWaitForABlockedSend(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSession(&ExtProc{})
	fs := &blockedStream{ctx: ctx, sending: make(chan struct{})}
	s.ctx, s.cancel, s.stream = ctx, cancel, fs
	s.dead = make(chan struct{})
	go func() { _ = s.send(&procv3.ProcessingRequest{}) }()
	<-fs.sending
	done := make(chan struct{})
	go func() {
		s.end()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("end waited for a send blocked on flow control")
	}
}
