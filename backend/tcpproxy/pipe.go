// Package tcpproxy owns the bytes of an L4 connection once the gateway has
// both ends: it forwards them between an accepted client connection and its
// upstream connection (a `protocol: TCP` listener, a TLS passthrough listener
// after the ClientHello was peeked, a TCP route over terminated TLS), in both
// directions at once, until both are done. It honours half-closes, ends idle
// and overlong pipes, turns a reset on one side into a reset on the other,
// and reports the bytes each way and how the pipe ended, for access logs and
// metrics.
//
// How the bytes move depends on what the two connections are (Method): two
// TCP sockets of Go's net package (sock.Conn included) are copied through a
// small buffer while the reads are small and spliced, with splice(2) through
// a pipe, without the bytes entering user space, while a stream comes in
// bulk (Hybrid); two netpoll connections are forwarded through netpoll's
// nocopy reader and writer; anything else (terminated TLS, a netpoll
// connection facing a Go one) is copied through a pooled buffer.
// docs/ARCHITECTURE.md, "TCP forwarding", has the measurements behind the
// choice.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Method is how a pipe moves bytes.
type Method uint8

// Methods. A method that the two connections cannot use falls back to Copy,
// which every pair can; Result.Method says which ran.
const (
	// Auto picks by what the two connections are: Hybrid for two TCP
	// sockets, Netpoll for two netpoll connections, Copy otherwise.
	Auto Method = iota
	// Copy reads into a pooled buffer and writes it out, through the
	// connections' own Read and Write.
	Copy
	// Splice moves bytes with splice(2) through a pipe, in the kernel
	// (net.TCPConn.ReadFrom between two TCP sockets). Both connections must
	// be TCP sockets of Go's net package: *net.TCPConn or *sock.Conn.
	Splice
	// Netpoll forwards through netpoll's nocopy API (Reader Next, Writer
	// WriteBinary and Flush). Both connections must be
	// netpoll.Connections.
	Netpoll
	// Hybrid copies through a small buffer while reads are small and
	// splices while a read fills it. Both connections must be what Splice
	// needs.
	Hybrid
)

var methodNames = [...]string{Auto: "auto", Copy: "copy", Splice: "splice", Netpoll: "netpoll", Hybrid: "hybrid"}

func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return "method(" + strconv.Itoa(int(m)) + ")"
}

// ParseMethod reads a method's name (as String writes it).
func ParseMethod(s string) (Method, error) {
	for m, n := range methodNames {
		if n == s {
			return Method(m), nil
		}
	}
	return Auto, errors.New("tcpproxy: unknown method " + s)
}

// Options configure a pipe. The zero value forwards until both sides are done,
// by the default method, with no time limits.
type Options struct {
	// Method is how bytes move (Auto: by what the connections are).
	Method Method
	// Idle ends the pipe once no byte moved either way for this long (0:
	// never). It is checked a few times per period, not per read: a pipe
	// ends between Idle and Idle·5/4 after its last byte.
	Idle time.Duration
	// MaxDuration ends the pipe this long after it started (0: never).
	MaxDuration time.Duration
	// ClientPrefix is what was already read from the client (a peeked
	// ClientHello): it is written upstream first and counted in
	// Result.ClientBytes.
	ClientPrefix []byte
}

// Side names one of the pipe's two connections.
type Side uint8

// Sides. SideNone is the proxy itself (an idle or overlong pipe).
const (
	SideNone Side = iota
	SideClient
	SideUpstream
)

func (s Side) String() string {
	switch s {
	case SideClient:
		return "client"
	case SideUpstream:
		return "upstream"
	}
	return "proxy"
}

// Reason says why a side's part of the pipe ended.
type Reason uint8

// Reasons.
const (
	// ReasonNone: nothing ended (an End not reached).
	ReasonNone Reason = iota
	// ReasonEOF: the side closed its sending direction in order (FIN).
	ReasonEOF
	// ReasonReset: the side reset the connection (RST), or refused what was
	// written to it (EPIPE).
	ReasonReset
	// ReasonError: another failure of the side's connection.
	ReasonError
	// ReasonIdle: no byte moved for Options.Idle.
	ReasonIdle
	// ReasonMaxDuration: the pipe lasted Options.MaxDuration.
	ReasonMaxDuration
)

var reasonNames = [...]string{"none", "eof", "reset", "error", "idle", "max_duration"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason?"
}

// End is how a part of the pipe ended: which side, why, and the error behind
// a reset or a failure.
type End struct {
	Side   Side
	Reason Reason
	Err    error
}

// Result is what a pipe did.
type Result struct {
	// Method is the method that ran.
	Method Method
	// ClientBytes went from the client to the upstream (ClientPrefix
	// included); UpstreamBytes from the upstream to the client.
	ClientBytes, UpstreamBytes int64
	// First is the first end: the side that stopped sending first (in
	// order or not), or the proxy's idle or duration limit. Last is the end
	// that finished the pipe: the other side's FIN after an orderly
	// half-close, or the failure or limit that cut it; it is First when one
	// end finished both directions.
	First, Last End
	// Duration is how long the pipe lasted.
	Duration time.Duration
}

// Pipe forwards bytes between client and upstream in both directions until
// both are done, then closes both connections: Pipe owns them from the call
// on. When one side ends its sending in order (FIN), the other side's
// sending direction is closed (CloseWrite) and the reverse direction goes on
// until it ends too (a connection that cannot half-close ends both
// directions at its end). When one side fails (a reset, a refused write), the
// other side is reset (RST, through SO_LINGER 0), so that an abort looks
// like one at both ends. Options.Idle and Options.MaxDuration close both
// sides in order.
//
// Pipe runs one direction on the calling goroutine and the other on a
// goroutine of its own. It clears both connections' deadlines.
func Pipe(client, upstream net.Conn, opts Options) Result {
	p := &pipe{start: time.Now()}
	p.ends[SideClient].init(client, SideClient)
	p.ends[SideUpstream].init(upstream, SideUpstream)
	p.res.Method = choose(opts.Method, &p.ends[SideClient], &p.ends[SideUpstream])
	p.dirs[0] = dir{p: p, src: &p.ends[SideClient], dst: &p.ends[SideUpstream]}
	p.dirs[1] = dir{p: p, src: &p.ends[SideUpstream], dst: &p.ends[SideClient]}
	for _, e := range []*end{&p.ends[SideClient], &p.ends[SideUpstream]} {
		_ = e.conn.SetDeadline(time.Time{})
		if e.tcp != nil {
			// A sock.Conn's lazy deadline may leave the socket's own set.
			_ = e.tcp.SetDeadline(time.Time{})
		}
	}
	prefixes := [2][]byte{opts.ClientPrefix}
	if pc, ok := client.(interface{ TakePeeked() []byte }); ok {
		// Bytes a look at the connection's start read into the
		// connection's buffer (a netpoll connection's peek: a ClientHello,
		// what followed a PROXY header): the pipe reads under that buffer,
		// so they go first, or they would be lost.
		prefixes[1] = pc.TakePeeked()
	}
	for _, prefix := range prefixes {
		if len(prefix) == 0 {
			continue
		}
		n, err := p.dirs[0].dst.write(prefix)
		p.dirs[0].n.Add(int64(n))
		if err != nil {
			p.fail(SideUpstream, err)
			return p.finish()
		}
	}
	p.startLimits(opts.Idle, opts.MaxDuration)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.dirs[0].run(p.res.Method)
	}()
	p.dirs[1].run(p.res.Method)
	wg.Wait()
	return p.finish()
}

// choose returns the method that runs for the pair.
func choose(m Method, a, b *end) Method {
	spliceable := a.tcp != nil && b.tcp != nil && a.tls == nil && b.tls == nil && a.np == nil && b.np == nil
	netpolled := a.np != nil && b.np != nil && a.tls == nil && b.tls == nil
	switch m {
	case Splice, Hybrid:
		if spliceable {
			return m
		}
	case Netpoll:
		if netpolled {
			return Netpoll
		}
	case Auto:
		switch {
		case spliceable:
			return Hybrid
		case netpolled:
			return Netpoll
		}
	}
	return Copy
}

// pipe is one Pipe call's state.
type pipe struct {
	ends  [3]end // indexed by Side; ends[SideNone] is unused
	dirs  [2]dir // client to upstream, upstream to client
	start time.Time

	// mu guards res's ends, closed and the limit timer's state.
	mu     sync.Mutex
	res    Result
	closed bool
	// cut is set once the proxy closes the connections (an error, a
	// limit): failures that follow are its own doing, not the sides'.
	cut atomic.Bool

	limits limits
}

// dir is one direction of a pipe.
type dir struct {
	p        *pipe
	src, dst *end
	n        atomic.Int64 // bytes written to dst
}

func (d *dir) run(m Method) {
	switch m {
	case Splice:
		d.splice()
	case Hybrid:
		d.hybrid()
	case Netpoll:
		d.netpoll()
	default:
		d.copy()
	}
}

// ended handles the end of d's source: in order (io.EOF), the destination's
// sending direction is closed; otherwise the pipe is cut.
func (d *dir) ended(err error) {
	p := d.p
	if p.cut.Load() {
		return
	}
	if err != io.EOF {
		p.fail(d.src.side, err)
		return
	}
	p.record(End{Side: d.src.side, Reason: ReasonEOF})
	d.src.eof.Store(true)
	err = d.dst.closeWrite()
	switch {
	case err == errNoHalfClose:
		// The end of one direction is the end of both.
		p.cut.Store(true)
		p.close(SideNone)
	case err != nil && d.dst.eof.Load() && gone(err):
		// The destination ended its sending in order before, and has
		// closed its whole connection since (its reset answering a late
		// byte: a TLS close_notify, sent as a client closes): both
		// directions ended in order, and nothing was left to half-close.
	case err != nil && !p.cut.Load():
		p.fail(d.dst.side, err)
	}
}

// gone reports whether a connection's error says its peer closed it
// whole: a reset, or a socket a reset has closed already.
func gone(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// writeFailed handles a failed write to d's destination.
func (d *dir) writeFailed(err error) {
	if !d.p.cut.Load() {
		d.p.fail(d.dst.side, err)
	}
}

// record notes an end: the first one is First, every one is Last.
func (p *pipe) record(e End) {
	p.mu.Lock()
	if p.res.First.Reason == ReasonNone {
		p.res.First = e
	}
	if !p.closed {
		p.res.Last = e
	}
	p.mu.Unlock()
}

// fail cuts the pipe after side failed with err: the other side is reset.
func (p *pipe) fail(side Side, err error) {
	p.cut.Store(true)
	p.record(End{Side: side, Reason: classify(err), Err: err})
	other := SideClient
	if side == SideClient {
		other = SideUpstream
	}
	p.close(other)
}

// limit cuts the pipe for an idle or duration limit; both sides are closed
// in order.
func (p *pipe) limit(r Reason) {
	p.cut.Store(true)
	p.record(End{Reason: r})
	p.close(SideNone)
}

// close closes both connections once, resetting the side reset (if any).
func (p *pipe) close(reset Side) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.limits.stop()
	p.mu.Unlock()
	if reset != SideNone {
		p.ends[reset].abort()
	}
	p.ends[SideClient].close()
	p.ends[SideUpstream].close()
}

// finish closes what is left and returns the result.
func (p *pipe) finish() Result {
	p.close(SideNone)
	p.res.ClientBytes = p.dirs[0].n.Load()
	p.res.UpstreamBytes = p.dirs[1].n.Load()
	p.res.Duration = time.Since(p.start)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}

// classify says what an error of a side's connection was.
func classify(err error) Reason {
	switch {
	case err == io.EOF:
		return ReasonEOF
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return ReasonReset
	}
	return ReasonError
}
