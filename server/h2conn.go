package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
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

	// The reader's own (the goroutine in serve). br and fr are the
	// reading turn's: a parked connection gives them up (h2park.go).
	br *bufio.Reader
	fr *http2.Framer
	// atFrame: the reader waits for the next frame's first byte, with
	// nothing read of it (parking may happen only there).
	atFrame     bool
	hdec        *hpack.Decoder
	block       h2Block // the header block being read
	sawSettings bool
	maxClientID uint32 // the highest stream the client opened
	empty       int    // frames in a row that carried nothing
	errors      int    // protocol errors so far (h2ErrorBudget)
	earlyResets int    // streams the client reset before their answer (h2EarlyResetBudget)
	priorities  int    // PRIORITY frames so far (h2PriorityPerStream)
	// windowUpdates counts the client's WINDOW_UPDATE frames, dataSent the
	// DATA frames sent to it (h2WindowUpdatesPerData; both under mu).
	windowUpdates, dataSent int
	// lastRead is when the socket last gave bytes (monoNow), for the
	// keepalive pings.
	lastRead atomic.Int64
	timer    *time.Timer // idle, keepalive and maxConnectionDuration checks

	mu sync.Mutex
	// Guarded by mu: the streams and everything written.
	streams map[uint32]*h2Exchange // open and half-closed streams
	// active counts the streams of the table that count toward
	// h2MaxStreams (h2Exchange.counted): a stream whose last frame went
	// out and whose client side is over is closed (RFC 9113 5.1.2), even
	// while its handler still tidies up after it (an HTTP/2 upstream
	// exchange gives its upstream stream up after the answer's end). The
	// handlers those hold are bounded by h2MaxStreams on their own
	// (startHandler).
	active int
	// headerBytes is what the header lists of those streams hold
	// (h2Settings.headerBudget).
	headerBytes int
	queue       []*h2Exchange // streams waiting for a handler
	handlers    int           // handlers running
	// recentReset are the last streams the gateway reset, on which the
	// client may still have frames in flight: those are dropped quietly
	// (RFC 9113 5.1). Twice the stream limit covers every stream the
	// client can have had open meanwhile. Made at the first reset: most
	// connections never reset a stream, and an idle one should not carry
	// the ring.
	recentReset *[2 * h2MaxStreams]uint32
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
	// closing: a goroutine other than the reader closes the connection
	// (closeConn), so it must not be parked.
	closing bool
}

// Stream states (RFC 9113 5.1) of a stream in the table; a closed stream
// is not in it.
const (
	h2Open             = iota
	h2HalfClosedRemote // the client ended its side
	h2Closed           // out of the table
)

var errH2Preface = errors.New("http2: bad connection preface")

func newH2Conn(b *bind, c net.Conn, tc *tlsConn, fs *frontendSettings) *h2Conn {
	hc := &h2Conn{b: b, conn: c, tls: tc, set: fs.h2.withDefaults(), idle: fs.idle(), life: fs.maxConnLife}
	hc.acquireReader()
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
		r.hc.atFrame = false
		r.hc.lastRead.Store(int64(monoNow()))
	}
	return n, err
}

// serve serves the connection until it closes or parks (it reports
// whether it parked: its end is then accounted for by whoever ends it,
// h2park.go).
func (hc *h2Conn) serve(upgrade *h2Exchange, settings []byte) (parked bool) {
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
			hc.addStream(upgrade)
			hc.startHandler(upgrade)
		} else {
			releaseH2Exchange(upgrade)
		}
	}
	hc.mu.Unlock()
	hc.startTimer()
	if err == nil {
		err = hc.readPreface()
	}
	if err == nil {
		err = hc.readFrames()
	}
	return hc.endReading(err)
}

// readPreface reads the client's connection preface, within a bound.
func (hc *h2Conn) readPreface() error {
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
	return nil
}

// readFrames reads and processes frames until the connection fails, ends,
// must be closed or parks (the error says which: sock.ErrParked).
func (hc *h2Conn) readFrames() error {
	for {
		if hc.br.Buffered() == 0 {
			// All that arrived is processed: out with what it produced
			// before waiting for more.
			hc.flush(false)
			hc.atFrame = true
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
		// Priorities are not acted on, but each costs a frame's parse:
		// a client may send a few per stream it opens, not millions.
		hc.priorities++
		if opened := int(hc.maxClientID+1) / 2; hc.priorities > h2PriorityPerStream*(1+opened) {
			hc.debug("http2: connection closed after too many PRIORITY frames")
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
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

// refuseStream refuses stream id (REFUSED_STREAM: not processed, the
// client may open it again). Only a refusal the client could have avoided
// (fault: it opened more streams than it knew it may) counts as an error;
// one for the gateway's own reasons does not.
func (hc *h2Conn) refuseStream(id uint32, fault bool) error {
	hc.mu.Lock()
	hc.writeReset(id, http2.ErrCodeRefusedStream)
	hc.mu.Unlock()
	if !fault {
		return nil
	}
	return hc.countError()
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

// addStream puts x, just opened, in the table (mu held).
func (hc *h2Conn) addStream(x *h2Exchange) {
	hc.streams[x.id] = x
	x.counted = true
	hc.active++
}

// uncount takes x out of the streams that count toward h2MaxStreams (mu
// held): it is closed, or about to be.
func (hc *h2Conn) uncount(x *h2Exchange) {
	if x.counted {
		x.counted = false
		hc.active--
	}
}

// closeStream takes x out of the table (mu held): either side reset it,
// the gateway ended it, or the connection is ending. Its handler, if it
// runs, sees the stream reset; one that never ran is dropped.
func (hc *h2Conn) closeStream(x *h2Exchange) {
	if hc.streams[x.id] == x {
		hc.headerBytes -= x.headerBytes
		x.headerBytes = 0
	}
	hc.uncount(x)
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
	if hc.recentReset == nil {
		hc.recentReset = new([2 * h2MaxStreams]uint32)
	}
	hc.recentReset[hc.resetNext] = id
	hc.resetNext = (hc.resetNext + 1) % len(hc.recentReset)
}

func (hc *h2Conn) wasReset(id uint32) bool {
	if hc.recentReset == nil {
		return false
	}
	for _, r := range hc.recentReset {
		if r == id {
			return true
		}
	}
	return false
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
	hc.releaseReader()
}

// closeConn closes the connection from a goroutine other than the
// reader's: the reader sees it fail (or, parked, the parker closes it).
func (hc *h2Conn) closeConn() {
	hc.mu.Lock()
	hc.closing = true
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
		hc.closeConn()
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
