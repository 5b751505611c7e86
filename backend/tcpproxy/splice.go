package tcpproxy

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// splice moves bytes with splice(2): net.TCPConn.ReadFrom from another
// TCPConn splices through a pipe (on Linux), in the kernel. The TCPConns are
// the ones under the given connections (a sock.Conn's ReadFrom is its own
// copy, so the embedded TCPConn's is called).
//
// ReadFrom returns only at the end, so the bytes moved are counted then;
// the idle check reads the sockets' own counts (limits).
func (d *dir) splice() {
	n, err := d.dst.tcp.ReadFrom(d.src.tcp)
	d.n.Add(n)
	if err != nil {
		d.spliceFailed(err)
		return
	}
	d.ended(io.EOF)
}

// spliceFailed handles a failed splice. ReadFrom's error does not say which
// socket failed; the one that was reset says. Failing that, a write error
// would be EPIPE or ECONNRESET on the destination after its RST, which
// wasReset sees, so the rest is the source's.
func (d *dir) spliceFailed(err error) {
	if !d.src.wasReset() && d.dst.wasReset() {
		d.writeFailed(err)
		return
	}
	d.ended(err)
}

// Hybrid's sizes. A read that fills the small buffer is a stream in bulk,
// which is spliced spliceSpan bytes at a time before small reads are tried
// again; a span also ends when nothing came for spanWait, so that a
// connection that turns interactive or idle comes back to copying, and an
// idle pipe holds no kernel pipe.
const (
	hybridBuffer = 16 << 10
	spliceSpan   = 1 << 20
)

var spanWait = time.Second // a variable for the tests

var hybridBuffers = sync.Pool{New: func() any {
	b := make([]byte, hybridBuffer)
	return &b
}}

// hybrid copies through a small buffer while reads are small, and splices
// while they fill it. Small exchanges cost less copied (recv and send, which
// a sock.Conn makes without entering the scheduler's system call state) than
// spliced (two splice calls, into a pipe and out of it, each dearer than a
// small recv or send); bulk costs half as much spliced. An idle pipe holds
// two small buffers and no kernel pipe. A span moves the source's read
// deadline twice (set, then cleared), once per spliceSpan bytes.
func (d *dir) hybrid() {
	bp := hybridBuffers.Get().(*[]byte)
	defer func() { hybridBuffers.Put(bp) }()
	lr := io.LimitedReader{R: d.src.tcp}
	for {
		n, done := d.copyOnce(*bp)
		if done {
			return
		}
		if n < len(*bp) {
			continue
		}
		// The buffer is not needed while splicing.
		hybridBuffers.Put(bp)
		lr.N = spliceSpan
		_ = d.src.tcp.SetReadDeadline(time.Now().Add(spanWait))
		m, err := d.dst.tcp.ReadFrom(&lr)
		d.n.Add(m)
		_ = d.src.tcp.SetReadDeadline(time.Time{})
		bp = hybridBuffers.Get().(*[]byte)
		switch {
		case err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !d.p.cut.Load():
			// Quiet: back to copying. (A splice stopped by its read
			// deadline has nothing left in its pipe.)
		case err != nil:
			d.spliceFailed(err)
			return
		case lr.N > 0: // the end of the stream came first
			d.ended(io.EOF)
			return
		}
	}
}
