package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Conn is one client connection served in HTTP/2. One goroutine reads
// and processes its frames (serve); each stream's request runs on a
// goroutine of its own (run), which writes the stream's response frames
// into the connection's pending output; whoever finds no write in progress
// writes everything pending in one go (flush, h2write.go).
type h2Conn struct {
	b *bind
	// conn is what the streams see as their connection: the addresses,
	// and for TLS the peer's certificates.
	conn net.Conn
	tls  *tlsConn // nil in cleartext (h2c)
	set  h2Settings
	idle time.Duration
	life time.Duration // maxConnectionDuration, 0 for none

	// The reader's own (the goroutine in serve).
	br          *bufio.Reader
	fr          *http2.Framer
	hdec        *hpack.Decoder
	block       h2Block // the header block being read
	sawSettings bool
	maxClientID uint32 // the highest stream the client opened
	empty       int    // frames in a row that carried nothing
	errors      int    // protocol errors so far (h2ErrorBudget)
	// lastRead is when the socket last gave bytes (monoNow), for the
	// keepalive pings.
	lastRead atomic.Int64
	timer    *time.Timer // idle, keepalive and maxConnectionDuration checks

	mu sync.Mutex
	// Guarded by mu: the streams and everything written.
	streams  map[uint32]*h2Exchange // open and half-closed streams
	queue    []*h2Exchange          // streams waiting for a handler
	handlers int                    // handlers running
	// recentReset are the last streams the gateway reset, on which the
	// client may still have frames in flight: those are dropped quietly
	// (RFC 9113 5.1). Twice the stream limit covers every stream the
	// client can have had open meanwhile.
	recentReset [2 * h2MaxStreams]uint32
	resetNext   int
	h2Output
	// The receive windows the gateway gave the client for the connection:
	// what it may still send, and what was taken since the last
	// WINDOW_UPDATE.
	recvWindow, recvTaken int64
	// sendWindow is the connection's window for the gateway's DATA.
	sendWindow int64
	// The client's settings for what the gateway sends.
	peerWindow   int64  // SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame uint32 // SETTINGS_MAX_FRAME_SIZE
	// unackedSettings counts the SETTINGS frames the client has yet to
	// acknowledge.
	unackedSettings int
	// ping is the keepalive ping in flight: when it was sent (0: none).
	ping     time.Duration
	pingData [8]byte
	// lastActive is when the connection last had a stream (monoNow), for
	// the idle timeout.
	lastActive time.Duration
	// goingAway: GOAWAY was sent; streams above goAwayID are not served
	// and the connection closes once its streams are done.
	goingAway bool
	goAwayID  uint32
	// dead: the connection failed or is closing; nothing more is written.
	dead bool
}

// h2Block is the header block being read: a request's head, a request's
// trailer section, or a block decoded only to keep HPACK's table in step.
type h2Block struct {
	id uint32
	// x is the new stream's exchange; trailers says the block is an open
	// stream's trailer section. Neither: the block is only decoded.
	x         *h2Exchange
	trailers  bool
	endStream bool
	// reset is the stream error to send once the block is decoded.
	reset  http2.ErrCode
	resets bool
	// remain is what the header list may still take (SETTINGS_MAX_HEADER_LIST_SIZE).
	remain    int
	tooLarge  bool
	malformed bool
	frames    int
	// The request's pseudo-header fields and the fields the front-end
	// reads itself.
	method, path, scheme, authority, host string
	pseudo                                uint8 // which pseudo-fields came (pseudo* bits)
	sawRegular                            bool
	contentLength                         int64 // -1: none
	expect100                             bool
	// fields are a trailer section's fields, name then value.
	fields []string
}

const (
	pseudoMethod = 1 << iota
	pseudoPath
	pseudoScheme
	pseudoAuthority
)

// Stream states (RFC 9113 5.1) of a stream in the table; a closed stream
// is not in it.
const (
	h2Open             = iota
	h2HalfClosedRemote // the client ended its side
)

var errH2Preface = errors.New("http2: bad connection preface")

func newH2Conn(b *bind, c net.Conn, tc *tlsConn, fs *frontendSettings) *h2Conn {
	hc := &h2Conn{b: b, conn: c, tls: tc, set: fs.h2.withDefaults(), idle: fs.idle(), life: fs.maxConnLife}
	hc.br = bufio.NewReaderSize(h2Reader{hc}, 16<<10)
	hc.fr = http2.NewFramer(nil, hc.br)
	hc.fr.SetMaxReadFrameSize(hc.set.frameSize)
	hc.fr.SetReuseFrames()
	hc.hdec = hpack.NewDecoder(h2HeaderTable, hc.onField)
	// A string past the header list limit is taken (and the head
	// answered 431) as long as the block stays within twice the limit
	// (processFragment); only a longer one breaks the connection.
	hc.hdec.SetMaxStringLength(2 * hc.set.maxHeaderBytes)
	hc.initOutput()
	hc.streams = make(map[uint32]*h2Exchange)
	hc.recvWindow = 65535
	hc.sendWindow = 65535
	hc.peerWindow = 65535
	hc.peerMaxFrame = h2MinFrameSize
	hc.lastActive = monoNow()
	hc.lastRead.Store(int64(hc.lastActive))
	return hc
}

// h2Reader reads the connection, noting when bytes came.
type h2Reader struct{ hc *h2Conn }

func (r h2Reader) Read(p []byte) (int, error) {
	n, err := r.hc.conn.Read(p)
	if n > 0 {
		r.hc.lastRead.Store(int64(monoNow()))
	}
	return n, err
}

// serve serves the connection until it closes.
func (hc *h2Conn) serve(upgrade *h2Exchange, settings []byte) {
	hc.mu.Lock()
	hc.writeServerSettings()
	var err error
	if upgrade != nil {
		// The upgrade's HTTP2-Settings are the client's first settings
		// (RFC 7540 3.2.1), acknowledged by nothing; its request is
		// stream 1, whose client side is over.
		var ch h2SettingsChange // no stream is open yet
		for i := 0; i+6 <= len(settings) && err == nil; i += 6 {
			s := http2.Setting{ID: http2.SettingID(uint16(settings[i])<<8 | uint16(settings[i+1])),
				Val: uint32(settings[i+2])<<24 | uint32(settings[i+3])<<16 | uint32(settings[i+4])<<8 | uint32(settings[i+5])}
			err = hc.applySetting(s, &ch)
		}
		if err == nil {
			hc.maxClientID = 1
			upgrade.open(hc, 1, h2HalfClosedRemote)
			hc.streams[1] = upgrade
			hc.startHandler(upgrade)
		} else {
			releaseH2Exchange(upgrade)
		}
	}
	hc.mu.Unlock()
	hc.startTimer()
	if err == nil {
		err = hc.readFrames()
	}
	hc.teardown(err)
}

// readFrames reads and processes frames until the connection fails, ends
// or must be closed (the error says why).
func (hc *h2Conn) readFrames() error {
	// The client's preface, within a bound.
	_ = hc.conn.SetReadDeadline(time.Now().Add(h2PrefaceTimeout))
	hc.flush(false) // the server's settings
	var pre [24]byte
	if _, err := io.ReadFull(hc.br, pre[:]); err != nil {
		return err
	}
	if !bytes.Equal(pre[:], h2Preface) {
		return errH2Preface
	}
	_ = hc.conn.SetReadDeadline(time.Time{})
	for {
		if hc.br.Buffered() == 0 {
			// All that arrived is processed: out with what it produced
			// before waiting for more.
			hc.flush(false)
		}
		fh, err := hc.fr.ReadFrameHeader()
		var f http2.Frame
		if err == nil {
			f, err = hc.fr.ReadFrameForHeader(fh)
		}
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				if fh.Type == http2.FrameHeaders || fh.Type == http2.FrameContinuation {
					// A header block lost would put HPACK out of step.
					return http2.ConnectionError(http2.ErrCodeProtocol)
				}
				// A frame of one stream that could not be parsed.
				if err := hc.streamError(se.StreamID, se.Code); err != nil {
					return err
				}
				continue
			}
			if errors.Is(err, http2.ErrFrameTooLarge) {
				return http2.ConnectionError(http2.ErrCodeFrameSize)
			}
			return err
		}
		if err := hc.processFrame(f); err != nil {
			return err
		}
	}
}

// processFrame acts on one frame.
func (hc *h2Conn) processFrame(f http2.Frame) error {
	if !hc.sawSettings {
		// The client's preface ends with a SETTINGS frame.
		if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		hc.sawSettings = true
	}
	switch f := f.(type) {
	case *http2.HeadersFrame:
		hc.empty = 0
		return hc.processHeaders(f)
	case *http2.ContinuationFrame:
		if len(f.HeaderBlockFragment()) == 0 && !f.HeadersEnded() {
			if err := hc.emptyFrame(); err != nil {
				return err
			}
		}
		return hc.processFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return hc.processData(f)
	case *http2.WindowUpdateFrame:
		return hc.processWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return hc.processReset(f)
	case *http2.SettingsFrame:
		return hc.processSettings(f)
	case *http2.PingFrame:
		return hc.processPing(f)
	case *http2.GoAwayFrame:
		// The client is leaving: no new streams; those in flight finish.
		hc.goAway()
		return nil
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			// A stream cannot depend on itself (RFC 9113 5.3.1).
			return hc.streamError(f.StreamID, http2.ErrCodeProtocol)
		}
		return nil
	case *http2.PushPromiseFrame:
		// Clients cannot push (RFC 9113 8.4).
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// Other frame types (unknown ones, PRIORITY_UPDATE) are ignored.
	return nil
}

// emptyFrame counts a frame that carried nothing; too many in a row end
// the connection.
func (hc *h2Conn) emptyFrame() error {
	hc.empty++
	if hc.empty > h2EmptyFrameBudget {
		hc.debug("http2: connection closed after too many empty frames")
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// countError counts a protocol error the client caused; past the budget
// the connection is closed.
func (hc *h2Conn) countError() error {
	hc.errors++
	if hc.errors >= h2ErrorBudget {
		hc.debug("http2: connection closed after too many protocol errors")
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

func (hc *h2Conn) debug(msg string) {
	hc.b.gw.log.Debug(msg, zap.Stringer("client", hc.conn.RemoteAddr()))
}

// streamError resets stream id for the client's fault (RFC 9113 5.4.2)
// and counts the error.
func (hc *h2Conn) streamError(id uint32, code http2.ErrCode) error {
	hc.mu.Lock()
	if x := hc.streams[id]; x != nil {
		hc.closeStream(x)
	}
	hc.writeReset(id, code)
	hc.mu.Unlock()
	return hc.countError()
}

// processHeaders starts a header block: a new stream's request, or the
// trailer section of an open one.
func (hc *h2Conn) processHeaders(f *http2.HeadersFrame) error {
	id := f.StreamID
	if id%2 != 1 {
		// Client streams are odd (RFC 9113 5.1.1).
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	b := &hc.block
	*b = h2Block{id: id, endStream: f.StreamEnded(), remain: hc.set.maxHeaderBytes, contentLength: -1, fields: b.fields[:0]}
	hc.hdec.SetEmitEnabled(true)
	hc.mu.Lock()
	x := hc.streams[id]
	switch {
	case x != nil:
		// A trailer section ends the stream (RFC 9113 8.1).
		switch {
		case x.state == h2HalfClosedRemote:
			b.reset, b.resets = http2.ErrCodeStreamClosed, true
		case !f.StreamEnded():
			b.reset, b.resets = http2.ErrCodeProtocol, true
		default:
			b.trailers = true
		}
	case id <= hc.maxClientID:
		// A stream closed already, or one below those opened.
		hc.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case hc.goingAway && id > hc.goAwayID:
		// After GOAWAY: not served, decoded only.
		hc.maxClientID = id
	case len(hc.streams) >= h2MaxStreams:
		hc.maxClientID = id
		b.reset, b.resets = http2.ErrCodeRefusedStream, true
	default:
		hc.maxClientID = id
		b.x = acquireH2Exchange()
	}
	hc.mu.Unlock()
	if f.HasPriority() && f.Priority.StreamDep == id {
		b.reset, b.resets = http2.ErrCodeProtocol, true
	}
	if b.x == nil && !b.trailers {
		hc.hdec.SetEmitEnabled(false)
	}
	return hc.processFragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// processFragment decodes a piece of the header block, and at its end acts
// on it.
func (hc *h2Conn) processFragment(frag []byte, end bool) error {
	b := &hc.block
	b.frames++
	// A block far past the header list limit (or one that goes on once
	// past it) is not decoded any further: the client is flooding
	// (CVE-2024-27316). One within twice the limit is read to its end
	// and answered 431.
	if len(frag) > 2*b.remain && (len(frag) > 0 || b.tooLarge) || b.frames > 2*hc.set.maxHeaderBytes/1024+16 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if _, err := hc.hdec.Write(frag); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if !end {
		return nil
	}
	if err := hc.hdec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	id := b.id
	b.id = 0
	switch {
	case b.resets:
		if b.x != nil {
			releaseH2Exchange(b.x)
		}
		return hc.streamError(id, b.reset)
	case b.trailers:
		return hc.endTrailers(id)
	case b.x != nil:
		return hc.endRequestHead(b.x, id)
	}
	return nil
}

// onField takes one decoded field of the block being read (hpack's emit
// function; it runs inside hdec.Write).
func (hc *h2Conn) onField(f hpack.HeaderField) {
	b := &hc.block
	if b.malformed || b.tooLarge {
		return
	}
	if size := int(f.Size()); size > b.remain {
		b.tooLarge, b.remain = true, 0
		hc.hdec.SetEmitEnabled(false)
		return
	} else {
		b.remain -= size
	}
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		b.malformed = true
		return
	}
	if len(f.Name) > 0 && f.Name[0] == ':' {
		if b.sawRegular || b.trailers {
			b.malformed = true
			return
		}
		var bit uint8
		switch f.Name {
		case ":method":
			bit, b.method = pseudoMethod, f.Value
		case ":path":
			bit, b.path = pseudoPath, f.Value
		case ":scheme":
			bit, b.scheme = pseudoScheme, f.Value
		case ":authority":
			bit, b.authority = pseudoAuthority, f.Value
		default:
			// :status, :protocol (extended CONNECT is not offered) or
			// one that does not exist.
			b.malformed = true
			return
		}
		if b.pseudo&bit != 0 {
			b.malformed = true
		}
		b.pseudo |= bit
		return
	}
	b.sawRegular = true
	if !validH2FieldName(f.Name) {
		b.malformed = true
		return
	}
	if b.trailers {
		b.fields = append(b.fields, f.Name, f.Value)
		return
	}
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		// Connection-specific fields make a request malformed (RFC 9113
		// 8.2.2).
		b.malformed = true
		return
	case "te":
		if f.Value != "trailers" {
			b.malformed = true
		}
	case "content-length":
		n, ok := parseH2ContentLength(f.Value)
		if !ok || b.contentLength >= 0 && b.contentLength != n {
			b.malformed = true
			return
		}
		b.contentLength = n
		return
	case "host":
		// :authority, when there is one, says it (RFC 9113 8.3.1).
		b.host = f.Value
		return
	case "expect":
		if strings.EqualFold(f.Value, "100-continue") {
			// Answered here, on the body's first read (h2RequestBody).
			b.expect100 = true
			return
		}
	}
	b.x.fctx.Request.Header.Add(f.Name, f.Value)
}

// validH2FieldName reports whether name is a field name as HTTP/2 sends
// it: a token, in lower case.
func validH2FieldName(name string) bool {
	if !httpguts.ValidHeaderFieldName(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// parseH2ContentLength parses a content-length value: digits only.
func parseH2ContentLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// endRequestHead acts on a new stream's decoded request head: a malformed
// one is reset, one over the header list limit answered 431, any other
// given to a handler.
func (hc *h2Conn) endRequestHead(x *h2Exchange, id uint32) error {
	b := &hc.block
	b.x = nil
	state := h2Open
	if b.endStream {
		state = h2HalfClosedRemote
	}
	if b.tooLarge {
		// As net/http answers a head over its limit.
		releaseH2Exchange(x)
		hc.mu.Lock()
		hc.localResponse(id, state, 431, "request header fields too large")
		hc.mu.Unlock()
		return nil
	}
	if b.malformed || !x.request(b) {
		releaseH2Exchange(x)
		return hc.streamError(id, http2.ErrCodeProtocol)
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.dead {
		releaseH2Exchange(x)
		return nil
	}
	x.open(hc, id, state)
	hc.streams[id] = x
	if !hc.startHandler(x) {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// endTrailers acts on a stream's trailer section: its fields wait for the
// body's end (h2RequestBody), and the client's side of the stream is over.
func (hc *h2Conn) endTrailers(id uint32) error {
	b := &hc.block
	if b.malformed || b.tooLarge {
		return hc.streamError(id, http2.ErrCodeProtocol)
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	x := hc.streams[id]
	if x == nil {
		// Reset meanwhile.
		return nil
	}
	if x.declLen >= 0 && x.gotLen != x.declLen {
		hc.closeStream(x)
		hc.writeReset(id, http2.ErrCodeProtocol)
		return nil
	}
	x.trailers = append(x.trailers, b.fields...)
	x.endRemote()
	return nil
}

// startHandler runs x's handler, or queues x when as many handlers run as
// streams may be open; it reports false when the queue is over its bound
// (streams opened and reset faster than they are served).
func (hc *h2Conn) startHandler(x *h2Exchange) bool {
	if hc.handlers >= h2MaxStreams {
		if len(hc.queue) >= 4*h2MaxStreams {
			hc.debug("http2: connection closed: streams reset faster than served")
			return false
		}
		x.queued = true
		hc.queue = append(hc.queue, x)
		return true
	}
	hc.handlers++
	x.running = true
	h2Workers.serve(hc, x)
	return true
}

// handlerDone accounts for a handler's end and starts the next stream
// waiting for one; streams reset while they waited are dropped.
func (hc *h2Conn) handlerDone() {
	hc.handlers--
	for len(hc.queue) > 0 && hc.handlers < h2MaxStreams {
		x := hc.queue[0]
		hc.queue[0] = nil
		hc.queue = hc.queue[1:]
		x.queued = false
		if x.reset {
			releaseH2Exchange(x)
			continue
		}
		hc.handlers++
		x.running = true
		h2Workers.serve(hc, x)
	}
	if len(hc.queue) == 0 {
		hc.queue = hc.queue[:0:cap(hc.queue)]
	}
	hc.maybeClose()
}

// processData takes a DATA frame: the request body's next piece.
func (hc *h2Conn) processData(f *http2.DataFrame) error {
	id := f.StreamID
	data := f.Data()
	n := int64(f.Length)
	if len(data) > 0 || f.StreamEnded() {
		hc.empty = 0
	} else if err := hc.emptyFrame(); err != nil {
		return err
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if id > hc.maxClientID {
		// Idle stream (RFC 9113 5.1).
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	x := hc.streams[id]
	if x != nil && x.state == h2Open && n > x.recvWindow {
		// Past the stream's window: the stream's fault (as x/net has it,
		// even when the connection's is passed too): reset, and what the
		// frame took of the connection's window given back.
		hc.recvWindow -= n
		hc.giveBack(n)
		hc.closeStream(x)
		hc.writeReset(id, http2.ErrCodeFlowControl)
		return hc.countError()
	}
	if n > hc.recvWindow {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	hc.recvWindow -= n
	if x == nil || x.state != h2Open {
		// Closed or half-closed (remote): the data is dropped and its
		// room given back to the connection.
		hc.giveBack(n)
		if x == nil && hc.wasReset(id) {
			return nil
		}
		if x != nil {
			hc.closeStream(x)
		}
		hc.writeReset(id, http2.ErrCodeStreamClosed)
		return hc.countError()
	}
	x.recvWindow -= n
	if x.declLen >= 0 && x.gotLen+int64(len(data)) > x.declLen {
		// More than its content-length said (RFC 9113 8.1.1).
		hc.giveBack(n)
		hc.closeStream(x)
		hc.writeReset(id, http2.ErrCodeProtocol)
		return nil
	}
	x.gotLen += int64(len(data))
	if pad := n - int64(len(data)); pad > 0 {
		// Padding is nobody's to read: its room comes back at once.
		hc.giveBack(pad)
		x.giveBack(pad)
	}
	if len(data) > 0 {
		if x.bodyClosed {
			hc.giveBack(int64(len(data)))
		} else {
			if x.roff > 0 && cap(x.rbuf)-len(x.rbuf) < len(data) {
				x.rbuf = x.rbuf[:copy(x.rbuf, x.rbuf[x.roff:])]
				x.roff = 0
			}
			x.rbuf = append(x.rbuf, data...)
			x.wakeReader()
		}
	}
	if f.StreamEnded() {
		if x.declLen >= 0 && x.gotLen != x.declLen {
			hc.closeStream(x)
			hc.writeReset(id, http2.ErrCodeProtocol)
			return nil
		}
		x.endRemote()
	}
	return nil
}

// processWindowUpdate widens the connection's or a stream's send window.
func (hc *h2Conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if hc.sendWindow+inc > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		hc.sendWindow += inc
		hc.wakeSenders()
		return nil
	}
	if f.StreamID > hc.maxClientID {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	x := hc.streams[f.StreamID]
	if x == nil {
		// A stream already closed: harmless (RFC 9113 6.9).
		return nil
	}
	if x.sendWindow+inc > 1<<31-1 {
		hc.closeStream(x)
		hc.writeReset(f.StreamID, http2.ErrCodeFlowControl)
		return hc.countError()
	}
	x.sendWindow += inc
	x.wakeSender()
	return nil
}

// processReset takes the client's RST_STREAM: the stream is over, its
// handler told (its body and response end, its context is canceled).
func (hc *h2Conn) processReset(f *http2.RSTStreamFrame) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if f.StreamID > hc.maxClientID {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if x := hc.streams[f.StreamID]; x != nil {
		hc.closeStream(x)
	}
	return nil
}

// processSettings applies the client's settings, in order, and
// acknowledges them.
func (hc *h2Conn) processSettings(f *http2.SettingsFrame) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if f.IsAck() {
		if hc.unackedSettings == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		hc.unackedSettings--
		return nil
	}
	var ch h2SettingsChange
	if err := f.ForeachSetting(func(s http2.Setting) error { return hc.applySetting(s, &ch) }); err != nil {
		return err
	}
	hc.applyWindowChange(&ch)
	if !hc.controlRoom() {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	_ = hc.fw.WriteSettingsAck()
	return nil
}

// h2SettingsChange is what a SETTINGS frame does to the streams' send
// windows, applied once at its end (applyWindowChange), so that a frame
// of many settings costs one pass over the streams, not one per setting.
type h2SettingsChange struct {
	delta     int64 // the change of SETTINGS_INITIAL_WINDOW_SIZE
	maxWindow int64 // the largest stream window, once measured
	measured  bool
}

// applySetting applies one of the client's settings, in order (mu held).
func (hc *h2Conn) applySetting(s http2.Setting, ch *h2SettingsChange) error {
	if err := s.Valid(); err != nil {
		return err
	}
	switch s.ID {
	case http2.SettingHeaderTableSize:
		// The table of the gateway's responses follows the client's
		// limit, up to the gateway's own.
		v := min(s.Val, h2HeaderTable)
		hc.henc.SetMaxDynamicTableSizeLimit(v)
		hc.henc.SetMaxDynamicTableSize(v)
	case http2.SettingInitialWindowSize:
		// Every open stream's window moves by the change (RFC 9113
		// 6.9.2); none may pass the largest window at any step.
		if !ch.measured {
			ch.measured = true
			for _, x := range hc.streams {
				ch.maxWindow = max(ch.maxWindow, x.sendWindow)
			}
		}
		ch.delta += int64(s.Val) - hc.peerWindow
		hc.peerWindow = int64(s.Val)
		if len(hc.streams) > 0 && ch.maxWindow+ch.delta > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
	case http2.SettingMaxFrameSize:
		hc.peerMaxFrame = s.Val
	}
	return nil
}

// applyWindowChange moves the open streams' windows by a SETTINGS frame's
// change (mu held).
func (hc *h2Conn) applyWindowChange(ch *h2SettingsChange) {
	if ch.delta == 0 {
		return
	}
	for _, x := range hc.streams {
		x.sendWindow += ch.delta
		if ch.delta > 0 {
			x.wakeSender()
		}
	}
}

// processPing answers the client's PING, or takes the answer to the
// keepalive ping.
func (hc *h2Conn) processPing(f *http2.PingFrame) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if f.IsAck() {
		if hc.ping != 0 && f.Data == hc.pingData {
			hc.ping = 0
		}
		return nil
	}
	if !hc.controlRoom() {
		// The client sends PINGs and does not read their answers.
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	_ = hc.fw.WritePing(true, f.Data)
	return nil
}

// closeStream takes x out of the table (mu held): either side reset it,
// the gateway ended it, or the connection is ending. Its handler, if it
// runs, sees the stream reset; one that never ran is dropped.
func (hc *h2Conn) closeStream(x *h2Exchange) {
	delete(hc.streams, x.id)
	if len(hc.streams) == 0 {
		hc.lastActive = monoNow()
	}
	// The body the handler will not read gives its room back.
	if unread := int64(len(x.rbuf) - x.roff); unread > 0 {
		hc.giveBack(unread)
		x.rbuf, x.roff = x.rbuf[:0], 0
	}
	hc.maybeClose()
	if x.state != h2Closed {
		x.state = h2Closed
		if !x.ended {
			x.reset = true
			x.cancelContext()
		}
		x.wakeReader()
		x.wakeSender()
	}
	if !x.running && !x.queued {
		releaseH2Exchange(x)
	}
}

// noteReset remembers stream id as one the gateway ended while the client
// could still send on it.
func (hc *h2Conn) noteReset(id uint32) {
	hc.recentReset[hc.resetNext] = id
	hc.resetNext = (hc.resetNext + 1) % len(hc.recentReset)
}

func (hc *h2Conn) wasReset(id uint32) bool {
	for _, r := range hc.recentReset {
		if r == id {
			return true
		}
	}
	return false
}

// giveBack returns n bytes of the connection's receive window to the
// client, in a WINDOW_UPDATE once enough have gathered (mu held).
func (hc *h2Conn) giveBack(n int64) {
	hc.recvTaken += n
	if hc.recvTaken > 0 && hc.recvTaken >= int64(hc.set.connWindow)/2 && !hc.dead {
		_ = hc.fw.WriteWindowUpdate(0, uint32(hc.recvTaken))
		hc.recvWindow += hc.recvTaken
		hc.recvTaken = 0
	}
}

// goAway has the connection send GOAWAY and close once its streams are
// done; once. Drain, maxConnectionDuration, the idle timeout and the
// client's own GOAWAY end a connection this way.
func (hc *h2Conn) goAway() {
	hc.mu.Lock()
	if hc.goingAway || hc.dead {
		hc.mu.Unlock()
		return
	}
	hc.goingAway = true
	hc.goAwayID = hc.maxClientID
	_ = hc.fw.WriteGoAway(hc.goAwayID, http2.ErrCodeNo, nil)
	hc.maybeClose()
	hc.mu.Unlock()
	// Not on the caller's goroutine: a client that does not read could
	// hold it.
	go hc.flush(false)
}

// maybeClose marks a connection that went away and has no stream left to
// close once its last frames are written (mu held).
func (hc *h2Conn) maybeClose() {
	if hc.goingAway && len(hc.streams) == 0 && hc.handlers == 0 && len(hc.queue) == 0 {
		hc.closeAfterFlush = true
	}
}

// teardown ends the connection after its reading ended with err: a
// protocol error is told in GOAWAY; the last frames go out, then the
// connection closes once the client has closed its side (or a moment
// passed); streams still running see it gone.
func (hc *h2Conn) teardown(err error) {
	code, tell := http2.ErrCodeNo, false
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		code, tell = http2.ErrCode(ce), true
		hc.debug("http2: connection error: " + code.String())
	case err == errH2Preface:
		hc.debug("http2: bad connection preface")
	}
	hc.mu.Lock()
	if tell && !hc.dead {
		_ = hc.fw.WriteGoAway(hc.maxClientID, code, nil)
	}
	hc.closeAfterFlush = true
	hc.mu.Unlock()
	if tell {
		hc.flush(false)
		hc.closeWrite()
		// Read (and drop) what the client still sends until it closes,
		// so that the GOAWAY is not lost to a reset.
		_ = hc.conn.SetReadDeadline(time.Now().Add(h2CloseLinger))
		_, _ = io.Copy(io.Discard, io.LimitReader(hc.br, 1<<20))
	}
	hc.mu.Lock()
	hc.dead = true
	if hc.timer != nil {
		hc.timer.Stop()
	}
	for _, x := range hc.streams {
		hc.closeStream(x)
	}
	for _, x := range hc.queue {
		x.queued = false
		releaseH2Exchange(x)
	}
	hc.queue = nil
	hc.wakeSenders()
	hc.mu.Unlock()
	hc.conn.Close()
}

// closeWrite ends the gateway's side of the connection: TLS's close_notify
// and TCP's FIN. The client then closes its side, which ends the reading.
func (hc *h2Conn) closeWrite() {
	raw := hc.conn
	if hc.tls != nil {
		_ = hc.tls.CloseWrite()
		raw = hc.tls.raw
	} else if hj, ok := hc.conn.(*hijackedConn); ok {
		raw = hj.raw
	}
	if cw, ok := raw.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// startTimer starts the connection's timer for what it must check over
// time: the idle timeout, keepalive pings, maxConnectionDuration.
func (hc *h2Conn) startTimer() {
	if next := hc.nextCheck(); next > 0 {
		hc.mu.Lock()
		hc.timer = time.AfterFunc(next, hc.tick)
		hc.mu.Unlock()
	}
}

// nextCheck is how long until the timer's next check.
func (hc *h2Conn) nextCheck() time.Duration {
	next := hc.idle
	if hc.set.pingAfter > 0 && (next == 0 || min(hc.set.pingAfter, hc.set.pingTimeout) < next) {
		next = min(hc.set.pingAfter, hc.set.pingTimeout)
	}
	if hc.life > 0 && (next == 0 || hc.life < next) {
		next = hc.life
	}
	if next > 0 {
		// Checks land within a fraction of each period.
		next = max(next/4, 10*time.Millisecond)
	}
	return next
}

// tick checks the connection's time limits (on the timer's goroutine).
func (hc *h2Conn) tick() {
	now := monoNow()
	hc.mu.Lock()
	if hc.dead {
		hc.mu.Unlock()
		return
	}
	idle := len(hc.streams) == 0 && hc.handlers == 0 && hc.idle > 0 && now-hc.lastActive >= hc.idle
	lost := false
	sendPing := false
	if hc.set.pingAfter > 0 {
		switch {
		case hc.ping != 0:
			lost = now-hc.ping >= hc.set.pingTimeout
		case now-time.Duration(hc.lastRead.Load()) >= hc.set.pingAfter:
			hc.ping = max(now, 1)
			hc.pingData = [8]byte{byte(now), byte(now >> 8), byte(now >> 16), byte(now >> 24), 'p', 'i', 'n', 'g'}
			_ = hc.fw.WritePing(false, hc.pingData)
			sendPing = true
		}
	}
	hc.mu.Unlock()
	switch {
	case lost:
		hc.debug("http2: connection closed: keepalive ping unanswered")
		hc.conn.Close()
		return
	case idle || connTooOldNow(hc.b, hc.conn):
		hc.goAway()
	case sendPing:
		hc.flush(false)
	}
	hc.mu.Lock()
	if !hc.dead {
		hc.timer.Reset(hc.nextCheck())
	}
	hc.mu.Unlock()
}
