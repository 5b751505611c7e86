package backend

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/codec/logline"
)

// Exchange sends req to the upstream and fills resp. A response body of known
// length up to ResponseStreamThreshold is read whole; larger and chunked bodies
// stream, and their connection returns to the pool when the stream is closed
// (fasthttp's server closes it after writing). Unlike fasthttp's own streamed
// responses this allocates nothing per request. deadline, when not zero,
// bounds sending the request and receiving the response head and small body.
//
// A request on a reused keep-alive connection that the upstream had already
// closed is sent once more on a new connection when it is idempotent and its
// body can be replayed.
func (u *Upstream) Exchange(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	return u.ExchangeWatched(nil, req, resp, deadline)
}

// ClientWatch tells an exchange that its client went away (an HTTP/2
// stream reset). While the exchange waits for the response head, Watch
// holds the upstream connection: when the client goes, the watch moves its
// deadline to the past (SetDeadline with a time long gone), so that the
// write or read in progress returns. Unwatch lets the connection go and
// reports whether the client went, in which case the connection is closed,
// never pooled. Gone reports it before anything is sent.
type ClientWatch interface {
	Watch(c net.Conn)
	Unwatch() (gone bool)
	Gone() bool
}

// ErrClientGone is the error of an exchange whose client went away
// (ClientWatch).
var ErrClientGone = errors.New("the client went away")

// ReadInterrupter is a request body stream (the server's reader of a
// client's body) whose read in progress InterruptRead ends, from any
// goroutine, without blocking; reads fail from then on. An exchange sending
// such a body to an HTTP/1.1 upstream interrupts it when the upstream hangs
// up meanwhile, if MayWait says a read of it may wait for the client (the
// rest of it is not in memory already).
type ReadInterrupter interface {
	sock.Interrupter
	MayWait() bool
}

// ErrUpstreamHungUp is the error of an exchange whose upstream closed or
// reset its connection while the request's streamed body was being sent,
// without an answer.
var ErrUpstreamHungUp = errors.New("the upstream closed the connection while the request body was sent")

// ExchangeWatched is Exchange that gives up, with ErrClientGone, when w
// (nil: none) says the client went away while the response head is
// awaited: the upstream stops working on an answer nobody will read, as an
// LLM provider stops generating (and billing) when its connection closes.
// Once the head is in, a streamed body ends when its reader stops reading.
func (u *Upstream) ExchangeWatched(w ClientWatch, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	if w != nil && w.Gone() {
		return ErrClientGone
	}
	u.PrepareRequest(req)
	// Decided before the first attempt: writing a streamed body consumes
	// it, and fasthttp then drops the stream, leaving only the bytes it had
	// read ahead (none of a chunked body) to be sent again.
	streamed := req.IsBodyStream()
	// A request that cannot be sent again is sent only on a connection that
	// looks alive: the upstream may have closed an idle pooled one.
	once := streamed || !Idempotent(req.Header.Method())
	for attempt := 0; ; attempt++ {
		resp.Reset()
		stale, err := u.roundTrip(w, req, resp, deadline, once)
		if err == nil {
			return nil
		}
		if !stale || attempt > 0 || once {
			return err
		}
	}
}

// PrepareRequest readies req to be written to u; Exchange calls it, and a
// tunnel writing req itself must. The request target goes upstream exactly as
// the request header holds it (as received, or as a policy rewrote it):
// fasthttp would otherwise rebuild it from its parsed URI, re-encoding a query
// the router parsed ("%20" becomes "+") and dropping an empty one. A target in
// absolute form becomes origin form. A request without Host (HTTP/1.0) gets
// u's address, as HTTP/1.1 requires one. A body without Content-Type goes
// without one (fasthttp would add application/octet-stream).
//
// The request goes as HTTP/1.1 whatever version the client spoke: an
// intermediary sends its own version (RFC 9110 6.2), and an HTTP/1.0
// request line would have the upstream close the connection after it.
func (u *Upstream) PrepareRequest(req *fasthttp.Request) {
	req.Header.SetNoDefaultContentType(true)
	if !req.Header.IsHTTP11() {
		req.Header.SetProtocolBytes(protoHTTP11)
	}
	if len(req.Header.Host()) == 0 {
		req.Header.SetHost(u.Addr)
	}
	target := req.Header.RequestURI()
	req.SetRequestURIBytes(target) // copies onto itself; clears the parsed URI
	if len(target) > 0 && target[0] != '/' && target[0] != '*' {
		// Absolute form: fasthttp writes the path and query of the URI
		// parsed afresh from the target, without normalizing the path.
		req.URI().DisablePathNormalizing = true
	}
}

var protoHTTP11 = []byte("HTTP/1.1")

// awaitIdleLimit is how long a pooled connection may have been idle and still
// have its response awaited inside the request's write.
const awaitIdleLimit = time.Second

// maxInterimResponses bounds 1xx responses skipped before the final one.
const maxInterimResponses = 8

// staleCheckIdle is how long a pooled connection may have been idle before
// a request that could be sent again goes on it unchecked. One idle longer
// is looked at first (connStale): a server that ends an idle keep-alive
// connection may write a response first (a 408, as Go's net/http client
// expects, golang/go#32310), and anything an upstream wrote unasked would be
// read as the next request's response, a response for another client. A
// connection reused sooner skips the look's system call: it is how a busy
// pool runs, and an upstream's idle timeout is seconds, not this.
const staleCheckIdle = time.Millisecond

// maxStaleSkipped is how many pooled connections in a row found stale
// and closed have the rest of the pool's idle ones closed unlooked-at. An
// upstream ends its idle connections together (its idle timeout after a
// burst, a restart), and a pool left with dozens would otherwise have each
// request look at them one by one. The attempt fails with
// ErrStaleConnections only when as many more are found stale after that:
// connections given back meanwhile by other requests, so an upstream that
// closes each connection after answering on it unannounced.
const maxStaleSkipped = 8

// ErrStaleConnections is the error of an attempt that found every pooled
// connection it took closed by the upstream (maxStaleSkipped): it was not
// sent.
var ErrStaleConnections = errors.New("the upstream closed every pooled connection tried")

// roundTrip makes one attempt. stale reports a failure on a reused connection
// before any response byte arrived. checkLive has a reused connection
// checked (sock.Conn.Stale) before the request goes on it, however briefly
// it was idle (staleCheckIdle). w, when not
// nil, ends the attempt if the client goes before the response head is in
// (ExchangeWatched).
func (u *Upstream) roundTrip(w ClientWatch, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time, checkLive bool) (stale bool, err error) {
	hc := u.client
	var timeout time.Duration
	if !deadline.IsZero() {
		if timeout = time.Until(deadline); timeout <= 0 {
			return false, fasthttp.ErrTimeout
		}
	}
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	if err != nil {
		return false, poolErr(err)
	}
	reused := !cc.LastUseTime().IsZero()
	conn := cc.Conn()
	// A connection that is to be looked at is looked at before the
	// request goes on it, however many stale ones came before it
	// (maxStaleSkipped).
	for skipped := 0; reused && (checkLive || time.Since(cc.LastUseTime()) >= staleCheckIdle); skipped++ {
		if !connStale(conn) {
			break
		}
		hc.CloseConn(cc)
		switch skipped {
		case maxStaleSkipped - 1:
			// The pool's other idle connections most likely went
			// stale with these: a new connection carries the request.
			hc.CloseIdleConnections()
		case 2*maxStaleSkipped - 1:
			return true, ErrStaleConnections
		}
		if cc, err = hc.AcquireConn(timeout, req.ConnectionClose()); err != nil {
			return false, poolErr(err)
		}
		reused = !cc.LastUseTime().IsZero()
		conn = cc.Conn()
	}
	// Pooled connections carry no deadline: one is set only for this
	// exchange and cleared before the connection goes back to the pool.
	if !deadline.IsZero() {
		if err := conn.SetDeadline(deadline); err != nil {
			hc.CloseConn(cc)
			return reused, err
		}
	}
	if w != nil {
		w.Watch(conn)
	}
	bw := hc.AcquireWriter(conn)
	// An upstream may answer before the request's end (a 413 or a 401 to
	// a large upload) and stop reading: the write stops there, the answer
	// is read and relayed, and the connection is closed after it.
	plain, _ := conn.(*sock.Conn)
	hangupWatched := false
	if plain != nil {
		plain.WatchAnswer(true)
		if bi, ok := req.BodyStream().(ReadInterrupter); ok && req.IsBodyStream() && bi.MayWait() {
			// The body comes from the client as it is sent: an upstream
			// that goes meanwhile ends the wait for the client's next
			// bytes.
			hangupWatched = plain.WatchPeerHangup(bi)
		}
	}
	err = req.Write(bw)
	if err == nil {
		if plain != nil && (!reused || time.Since(cc.LastUseTime()) < awaitIdleLimit) {
			// The flush is the request's last write and its response is
			// read next: wait for it inside the write (see sock). Not on
			// a connection idle for long, which may have been closed or
			// sent something unasked meanwhile.
			plain.AwaitAfterWrite(true)
			err = bw.Flush()
			plain.AwaitAfterWrite(false)
		} else {
			err = bw.Flush()
		}
	}
	hc.ReleaseWriter(bw)
	answered := false
	if plain != nil {
		answered = err != nil && plain.Answered()
		plain.WatchAnswer(false)
		if hangupWatched && plain.UnwatchPeerHangup() && err != nil && !answered {
			// The upstream hung up while the body was sent: an answer it
			// gave first is relayed, else the failure is the upstream's,
			// not the client's whose read it cut.
			if answered = plain.HasBytes(); !answered {
				err = ErrUpstreamHungUp
			}
		}
	}
	if err != nil && !answered {
		if w != nil && w.Unwatch() {
			hc.CloseConn(cc)
			return false, ErrClientGone
		}
		hc.CloseConn(cc)
		return reused, timeoutErr(err)
	}
	rr := respReader{br: hc.AcquireReader(conn)}
	if req.Header.IsHead() {
		resp.SkipBody = true
	}
	err = rr.readHead(&resp.Header)
	for n := 0; err == nil && isInterim(resp.Header.StatusCode()); n++ {
		if n >= maxInterimResponses {
			err = errors.New("too many interim responses")
			break
		}
		err = rr.readHead(&resp.Header)
	}
	if w != nil && w.Unwatch() {
		rr.release(hc)
		hc.CloseConn(cc)
		return false, ErrClientGone
	}
	if err != nil {
		rr.release(hc)
		hc.CloseConn(cc)
		var nothing fasthttp.ErrNothingRead
		return reused && (errors.As(err, &nothing) || errors.Is(err, io.EOF)), timeoutErr(logline.WithoutPeerBytes(err))
	}
	if resp.Header.StatusCode() == fasthttp.StatusSwitchingProtocols && !asksUpgrade(&req.Header) {
		// RFC 9110 15.2.2: a server switches only to a protocol the
		// request asked for. Relayed, the 101 would leave the client
		// waiting on a connection nothing is spliced to.
		rr.release(hc)
		hc.CloseConn(cc)
		return false, ErrUnsolicitedSwitch
	}
	closeConn := answered || req.ConnectionClose() || resp.Header.ConnectionClose()
	n := resp.Header.ContentLength()
	status := resp.Header.StatusCode()
	if resp.SkipBody || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified || status == fasthttp.StatusSwitchingProtocols {
		resp.SkipBody = true
		rr.release(hc)
		clearDeadline(conn, deadline)
		finishConn(u, cc, closeConn || status == fasthttp.StatusSwitchingProtocols)
		return false, nil
	}
	if n >= 0 && n <= ResponseStreamThreshold {
		err = resp.ReadBody(rr.br, ResponseStreamThreshold)
		rr.release(hc)
		if err != nil {
			hc.CloseConn(cc)
			return false, timeoutErr(logline.WithoutPeerBytes(err))
		}
		clearDeadline(conn, deadline)
		finishConn(u, cc, closeConn)
		return false, nil
	}
	// Stream: the body is read from br as the client is written to. The
	// exchange deadline stays until the body has been read (a request
	// timeout bounds the whole response); the stream clears it when it
	// gives the connection back.
	attachStream(u, cc, rr, resp, n, closeConn, !deadline.IsZero())
	return false, nil
}

// ErrBareLFHead is the error of an exchange (and AwaitHead) whose response
// head ends with a blank line in bare-LF form: "X\n\n", "X\r\n\n" or
// "X\n\r\n", X not CR (the forms sock.ErrBareLFHead refuses in request
// heads). fasthttp's parser takes such a head only once CRLF CRLF follows
// somewhere after it, so it would wait for bytes that may never come (the
// upstream keeping its connection open), and frame the response by where
// they happened to fall if they did. RFC 9112 2.2 lets a recipient refuse
// bare LF; the client gets 502.
var ErrBareLFHead = errors.New("upstream response head ends with a bare LF blank line")

// ErrUnsolicitedSwitch is the error of an exchange answered 101 Switching
// Protocols although the request asked for no upgrade; the client gets 502.
var ErrUnsolicitedSwitch = errors.New("upstream switched protocols unasked")

// MaxResponseHeadBytes is the largest response head (status line and
// header fields) the gateway takes from an upstream, in HTTP/1.1 and, as
// its header list (SETTINGS_MAX_HEADER_LIST_SIZE), in HTTP/2: the limit of
// a client's HTTP/2 header list (the server's http2MaxHeaderSize default),
// and near Envoy's 60 KiB. A larger head is a 502.
const MaxResponseHeadBytes = 64 << 10

// ErrResponseHeadTooLarge is the error of an HTTP/1.1 exchange whose
// response head is larger than MaxResponseHeadBytes.
var ErrResponseHeadTooLarge = fmt.Errorf("upstream response head larger than %d KiB", MaxResponseHeadBytes>>10)

// respReader is what an exchange reads its response from: the pool's
// reader, whose 8 KiB buffer holds nearly every response head, or, once a
// head did not fit it, a reader of MaxResponseHeadBytes reading through it
// (grow). A pooled reader that size for every exchange would be held as
// long as each response body streams: 64 KiB where 8 KiB does.
type respReader struct {
	br    *bufio.Reader // the response is read from it
	under *bufio.Reader // the pool's reader that br reads through, if br grew
}

// headReaders are the readers respReader grows into.
var headReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, MaxResponseHeadBytes) }}

// readHead reads a response head (awaitHead, then fasthttp's parser, which
// needs the head whole in the buffer), growing the reader when the head
// does not fit the pool's.
func (r *respReader) readHead(h *fasthttp.ResponseHeader) error {
	full, err := awaitHead(r.br)
	if err == nil && full {
		if r.under != nil {
			return ErrResponseHeadTooLarge
		}
		r.grow()
		if full, err = awaitHead(r.br); err == nil && full {
			return ErrResponseHeadTooLarge
		}
	}
	if err != nil {
		return err
	}
	return h.Read(r.br)
}

// grow moves r to a reader of MaxResponseHeadBytes that reads through the
// pool's: it takes the bytes the pool's holds first, then reads the
// connection (straight into its own buffer when the pool's is empty).
func (r *respReader) grow() {
	big := headReaders.Get().(*bufio.Reader)
	big.Reset(r.br)
	r.br, r.under = big, r.br
}

// release gives the readers back: the pool's to the pool.
func (r *respReader) release(hc *fasthttp.HostClient) {
	if r.under != nil {
		r.br.Reset(nil)
		headReaders.Put(r.br)
		r.br, r.under = r.under, nil
	}
	hc.ReleaseReader(r.br)
}

// AwaitHead reads from br until it holds the blank line that ends a response
// head, so that fasthttp's parser, which reads br next, finds the head whole.
// A head whose blank line is in bare-LF form is refused with ErrBareLFHead at
// once, whatever follows it. A head that fills br's buffer is left to the
// parser to refuse. Read errors come as the parser would give them: before
// any byte, io.EOF (fasthttp.ErrTimeout for a timeout); after some, the
// read's error wrapped.
//
// It costs a look at each line break of the head; after a further read the
// search resumes where it stopped.
func AwaitHead(br *bufio.Reader) error {
	_, err := awaitHead(br)
	return err
}

// AwaitHeadGrowing is AwaitHead for a reader the caller keeps (an upgrade's
// handshake, whose reader the tunnel goes on reading), with the
// exchange's limit: a head that does not fit br's buffer is read on into
// a reader of MaxResponseHeadBytes that reads through br, which it
// returns, and one larger than that is refused (ErrResponseHeadTooLarge).
// The response is to be read from the reader returned.
func AwaitHeadGrowing(br *bufio.Reader) (*bufio.Reader, error) {
	full, err := awaitHead(br)
	if err != nil || !full {
		return br, err
	}
	big := bufio.NewReaderSize(br, MaxResponseHeadBytes)
	if full, err = awaitHead(big); err == nil && full {
		err = ErrResponseHeadTooLarge
	}
	return big, err
}

// awaitHead is AwaitHead that reports whether it stopped at a full buffer
// without the head's end.
func awaitHead(br *bufio.Reader) (full bool, err error) {
	next := 0
	for {
		b, _ := br.Peek(br.Buffered()) // what it holds: no read
		var found, bare bool
		if found, bare, next = headEnd(b, next); found {
			if bare {
				return false, ErrBareLFHead
			}
			return false, nil
		}
		if len(b) >= br.Size() {
			return true, nil
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			if len(b) == 0 {
				if sock.IsTimeout(err) {
					return false, fasthttp.ErrTimeout
				}
				return false, io.EOF
			}
			return false, fmt.Errorf("error when reading response headers: %w", err)
		}
	}
}

// headEnd searches b from index from for the blank line that ends a head. It
// reports whether b holds it and whether it is in bare-LF form; when b does
// not hold it yet, next is where to search again once b holds more.
func headEnd(b []byte, from int) (found, bare bool, next int) {
	for i := from; ; i++ {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return false, false, len(b)
		}
		i += j // b[i] ends a line; a blank line is "\n" or "\r\n" after it
		if i+1 >= len(b) {
			return false, false, i
		}
		switch b[i+1] {
		case '\n':
			return true, true, 0
		case '\r':
			if i+2 >= len(b) {
				return false, false, i
			}
			if b[i+2] == '\n' {
				return true, i == 0 || b[i-1] != '\r', 0
			}
		}
	}
}

// asksUpgrade reports whether a request asks to switch protocols: Connection
// names upgrade and Upgrade is not empty.
func asksUpgrade(h *fasthttp.RequestHeader) bool {
	return h.ConnectionUpgrade() && len(h.Peek(fasthttp.HeaderUpgrade)) > 0
}

// clearDeadline removes the exchange deadline, if one was set, before the
// connection is shared again.
func clearDeadline(c net.Conn, deadline time.Time) {
	if !deadline.IsZero() {
		_ = c.SetDeadline(time.Time{})
	}
}

func isInterim(status int) bool {
	return status >= 100 && status < 200 && status != fasthttp.StatusSwitchingProtocols
}

// finishConn gives a connection back to its pool, or closes it. A pool no
// snapshot uses any more (closed: Upstream.Close) closes the connections
// of the requests that were in flight at its close as they come back: its
// own close reached only the idle ones, and the rest would have stayed
// open, unused, until the idle timeout (a reload flipping a backend under
// load left hundreds). The flag is read after the release, and Close sets
// it before closing the idle connections, so a connection released at
// any moment of a close is closed.
//
// A connection that would be one idle connection more than the pool keeps
// (PoolSettings.MaxIdle, poolMaxSize) closes too. The count is looked at
// before the release, so requests giving connections back at once may
// leave a few more.
func finishConn[C any](u *Upstream, cc C, closeConn bool) {
	hc := u.client
	if !closeConn && u.maxIdle != 0 && hc.IdleConnsCount() >= max(u.maxIdle, 0) {
		closeConn = true
	}
	// The type of cc is fasthttp's unexported connection type; the method
	// expressions keep this free of closures.
	releaseOrClose(hc, cc, closeConn, any((*fasthttp.HostClient).ReleaseConn), any((*fasthttp.HostClient).CloseConn))
	if !closeConn && u.closed.Load() {
		hc.CloseIdleConnections()
	}
}

func releaseOrClose[C any](hc *fasthttp.HostClient, cc C, closeConn bool, release, closer any) {
	if closeConn {
		closer.(func(*fasthttp.HostClient, C))(hc, cc)
		return
	}
	release.(func(*fasthttp.HostClient, C))(hc, cc)
}

// poolErr is the error of a failed AcquireConn: ErrPoolFull for fasthttp's
// "no free connections" (every connection busy through the wait).
func poolErr(err error) error {
	if err == fasthttp.ErrNoFreeConns {
		return ErrPoolFull
	}
	return err
}

func timeoutErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fasthttp.ErrTimeout
	}
	return err
}

// streamBody is a response body streaming from a pooled upstream connection.
type streamBody[C any] struct {
	u         *Upstream // the pool cc goes back to
	cc        C
	rr        respReader
	up        *fasthttp.Response // holds fasthttp's pooled body decoder
	body      io.Reader
	closeConn bool
	eof       bool
	want, got int   // declared length (-1 unknown) and bytes read
	deadline  bool  // the connection carries the exchange deadline
	err       error // the read error that ended the body early, if one did
	obs       StreamObserver
	// dst is the header of the response the body is for, which takes the
	// trailer fields it announces once the last chunk has been read.
	dst *fasthttp.ResponseHeader

	// A chunked body is decoded from chunks, which reads the connection
	// through src: fasthttp's decoder takes a connection that ends where a
	// chunk header should start for the end of the body, and src tells the
	// two apart. chunks stays with the pooled streamBody.
	chunked bool
	src     eofReader
	chunks  *bufio.Reader
	// keepOnce makes the next Close do nothing (Detach).
	keepOnce bool
	// conn is cc's connection (nil if cc has none to give): the one a
	// watch cuts, and whose deadline Close clears. watch, set by
	// WatchStream, ends the body's wait for the upstream when the client
	// goes away.
	watch ClientWatch
	conn  net.Conn
}

// eofReader records whether its reader reached io.EOF.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

var streamBodies sync.Pool

func attachStream[C any](u *Upstream, cc C, rr respReader, resp *fasthttp.Response, n int, closeConn, deadline bool) {
	sb, _ := streamBodies.Get().(*streamBody[C])
	if sb == nil {
		sb = new(streamBody[C])
	}
	up := fasthttp.AcquireResponse()
	*sb = streamBody[C]{u: u, cc: cc, rr: rr, up: up, closeConn: closeConn, want: n, deadline: deadline, dst: &resp.Header, chunks: sb.chunks}
	if c, ok := any(cc).(interface{ Conn() net.Conn }); ok {
		sb.conn = c.Conn()
	}
	resp.Header.CopyTo(&up.Header)
	up.StreamBody = true
	src := rr.br
	if n == -1 {
		sb.chunked = true
		sb.src = eofReader{r: rr.br}
		if sb.chunks == nil {
			sb.chunks = bufio.NewReaderSize(&sb.src, chunkedReadBuffer)
		} else {
			sb.chunks.Reset(&sb.src)
		}
		src = sb.chunks
	}
	_ = up.ReadBody(src, 0) // with StreamBody this only attaches a decoder
	sb.body = up.BodyStream()
	if n == -2 {
		// Identity body ended by the connection closing.
		sb.closeConn = true
		sb.want = -1
		n = -1
	}
	resp.SetBodyStream(sb, n)
}

// chunkedReadBuffer is the read buffer of a chunked body's decoder.
const chunkedReadBuffer = 4 << 10

func (s *streamBody[C]) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	s.got += n
	if err == io.EOF && s.chunked && s.src.eof {
		// The upstream closed before the last chunk: the body is cut short,
		// and the client must not get it as complete.
		err = io.ErrUnexpectedEOF
	}
	if err == io.EOF && s.chunked && !s.eof {
		s.copyTrailer()
	}
	if err == io.EOF || s.want >= 0 && s.got >= s.want {
		s.eof = true
	} else if err != nil {
		if s.watch != nil && s.watch.Gone() {
			err = ErrClientGone // the watch cut the wait, not the upstream
		}
		if s.err == nil {
			s.err = timeoutErr(err)
		}
	}
	return n, err
}

// copyTrailer gives the response the trailer fields that came after the
// last chunk; the server writes them after the body. Fields the upstream
// did not announce go on too (an announcement helps a recipient prepare;
// it does not limit what may come), except the ones no trailer may hold,
// which AddTrailerBytes refuses.
func (s *streamBody[C]) copyTrailer() {
	for key := range s.up.Header.Trailers() {
		vs := s.up.Header.PeekAll(string(key))
		if len(vs) == 0 {
			continue
		}
		if !announced(s.dst, key) && s.dst.AddTrailerBytes(key) != nil {
			continue
		}
		// Every line of the field, in order (PeekAll's views are copied
		// as they are added).
		s.dst.DelBytes(key)
		for _, v := range vs {
			s.dst.AddBytesKV(key, v)
		}
	}
}

// announced reports whether h announces key as a trailer field.
func announced(h *fasthttp.ResponseHeader, key []byte) bool {
	for k := range h.Trailers() {
		if bytes.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// StreamObserver learns how a streamed response body ended, when its
// stream is closed: the bytes read, and nil when the body was read to its
// end, or why it was not (ErrStreamAbandoned, a timeout, a cut-off body).
type StreamObserver interface {
	StreamClosed(bytes int, err error)
}

// ErrStreamAbandoned is reported for a body closed before its end without a
// read error: the client went away, or the response was replaced.
var ErrStreamAbandoned = errors.New("response body not read to its end: the client went away, or the response was replaced")

// ObserveStream has o told when the streamed body Exchange left in resp is
// closed, looking through streams that wrap it (policy.Unwrapper). It
// reports false, telling o nothing, when resp holds no such body.
func ObserveStream(resp *fasthttp.Response, o StreamObserver) bool {
	r := resp.BodyStream()
	for {
		if s, ok := r.(interface{ observe(StreamObserver) }); ok {
			s.observe(o)
			return true
		}
		u, ok := r.(interface{ Unwrap() io.Reader })
		if !ok {
			return false
		}
		r = u.Unwrap()
	}
}

// WatchStream has w end the wait of the streamed body Exchange left in
// resp for the upstream's next bytes when the client goes away (an LLM
// provider pausing to think before its first token, say), as
// ExchangeWatched ends the wait for the head: the connection's deadline
// moves into the past and the body's read fails with ErrClientGone. The
// watch ends when the body is closed. It reports false, watching nothing,
// when resp holds no such body.
func WatchStream(resp *fasthttp.Response, w ClientWatch) bool {
	if w == nil {
		return false
	}
	r := resp.BodyStream()
	for {
		if s, ok := r.(interface{ watchWith(ClientWatch) bool }); ok {
			return s.watchWith(w)
		}
		u, ok := r.(interface{ Unwrap() io.Reader })
		if !ok {
			return false
		}
		r = u.Unwrap()
	}
}

func (s *streamBody[C]) watchWith(w ClientWatch) bool {
	if s.conn == nil || s.watch != nil {
		return false
	}
	s.watch = w
	w.Watch(s.conn)
	return true
}

// Detach makes the next Close do nothing, so that a response policy can
// take the stream off its response (policy.TakeBodyStream) and close it
// itself.
func (s *streamBody[C]) Detach() { s.keepOnce = true }

func (s *streamBody[C]) observe(o StreamObserver) { s.obs = o }

// Close returns the connection to the pool when the body was read to its
// end, and closes it otherwise.
func (s *streamBody[C]) Close() error {
	if s.keepOnce {
		s.keepOnce = false
		return nil
	}
	_ = s.up.CloseBodyStream()
	fasthttp.ReleaseResponse(s.up)
	s.rr.release(s.u.client)
	keep := !s.closeConn && s.eof
	if s.watch != nil && s.watch.Unwatch() {
		// A hang-up may have moved the connection's deadline into the
		// past: it does not go back to the pool.
		keep = false
		if !s.eof && s.err == nil {
			s.err = ErrClientGone
		}
	}
	if keep && s.deadline {
		// The exchange deadline must not follow the connection into the pool.
		if s.conn != nil {
			_ = s.conn.SetDeadline(time.Time{})
		} else {
			keep = false
		}
	}
	finishConn(s.u, s.cc, !keep)
	if s.chunks != nil {
		s.chunks.Reset(nil)
	}
	obs, got, err := s.obs, s.got, s.err
	if !s.eof && err == nil {
		err = ErrStreamAbandoned
	} else if s.eof {
		err = nil
	}
	*s = streamBody[C]{chunks: s.chunks}
	streamBodies.Put(s)
	if obs != nil {
		obs.StreamClosed(got, err)
	}
	return nil
}
