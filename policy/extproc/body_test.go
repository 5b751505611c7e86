package extproc

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/valyala/fasthttp"
)

// says is a body stream that tells whether its end writes the header.
type says struct {
	io.Reader
	end bool
}

func (s says) EndWritesHeader(*fasthttp.RequestHeader) bool { return s.end }

// Which request bodies gate their pump: those whose last read may write
// the request's header, and those that do not say.
func TestWritesHeader(t *testing.T) {
	var h fasthttp.RequestHeader
	for _, tc := range []struct {
		name string
		src  io.Reader
		want bool
	}{
		{"a buffered body", bytes.NewReader([]byte("x")), false},
		{"a stream whose end writes the header", says{end: true}, true},
		{"a stream whose end does not", says{end: false}, false},
		{"another policy's processed body, its pump gated", &duplexBody{pm: &pump{gated: true}}, true},
		{"another policy's processed body, its pump not gated", &duplexBody{pm: &pump{}}, false},
		{"a stream that does not say", strings.NewReader("x"), true},
	} {
		if got := writesHeader(tc.src, &h); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// sendRecorder is a stream to the service that keeps what is sent.
type sendRecorder struct {
	procv3.ExternalProcessor_ProcessClient
	mu   sync.Mutex
	sent []*procv3.ProcessingRequest
}

func (r *sendRecorder) Send(m *procv3.ProcessingRequest) error {
	r.mu.Lock()
	r.sent = append(r.sent, m)
	r.mu.Unlock()
	return nil
}

// lastRead is a body of no bytes whose one read waits for release and
// then, as fasthttp does with a chunked body's trailer section, writes
// what the request shares (ended) before it returns io.EOF.
type lastRead struct {
	started chan struct{}
	release chan struct{}
	ended   bool
}

func (b *lastRead) Read([]byte) (int, error) {
	b.started <- struct{}{}
	<-b.release
	b.ended = true
	return 0, io.EOF
}

func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A gated pump reads its source only while the request's header is lent
// to it; taking the header back waits for the read in progress, so what
// that read wrote is the request's once reclaim returns (-race checks the
// order). A pump stopped while the header is held never reads.
func TestGatedPumpReadsOnlyWhileLent(t *testing.T) {
	newGated := func(src io.Reader) *pump {
		s := &session{p: &ExtProc{}, stream: &sendRecorder{}, dead: make(chan struct{})}
		pm := newPump(s, src, false, -1, 1<<10, nil)
		pm.gated = true
		pm.start()
		return pm
	}

	src := &lastRead{started: make(chan struct{}, 1), release: make(chan struct{})}
	pm := newGated(src)
	pm.stop()
	within(t, pm.done, "a held pump to stop")
	if len(src.started) != 0 {
		t.Fatal("a pump read while the header was held")
	}

	src = &lastRead{started: make(chan struct{}, 1), release: make(chan struct{})}
	pm = newGated(src)
	pm.lend()
	within(t, src.started, "the lent pump's read")
	go close(src.release)
	pm.reclaim()
	if !src.ended {
		t.Fatal("reclaim returned before the read in progress did")
	}
	within(t, pm.done, "the pump to end with its body")
	rec := pm.s.stream.(*sendRecorder)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.sent) != 1 || !rec.sent[0].GetRequestBody().GetEndOfStream() {
		t.Fatalf("sent %v, want the body's end", rec.sent)
	}
}
