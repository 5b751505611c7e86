package server

import (
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The output side of an HTTP/2 connection. Frames are not written one by
// one: every goroutine that has frames to send (the reader: settings and
// ping answers, resets, window updates; the handlers: their responses)
// appends them to the connection's pending output under its lock, and
// whoever then finds no write in progress writes all that is pending in
// one go, taking what others added meanwhile in its next go (flush). A
// handler that ends a response first lets the other goroutines that are
// ready to run add theirs, so that under load one write (one TLS record,
// one system call) carries many responses.

// h2Output is a connection's output (guarded by h2Conn.mu).
type h2Output struct {
	// wbuf is what waits to be written, in a buffer of h2OutputBufs
	// (wbufp) taken when the first frame comes and given back once
	// written: an idle connection holds none.
	wbuf  []byte
	wbufp *[]byte
	// flushing: a goroutine is writing the output.
	flushing bool
	// closeAfterFlush: once the output is written, the gateway's side of
	// the connection ends (closedWrite once it has).
	closeAfterFlush, closedWrite bool
	// fw writes frames into wbuf; henc encodes header blocks into hbuf.
	fw   *http2.Framer
	henc *hpack.Encoder
	hbuf []byte
	// senders are the streams waiting for the connection's window or for
	// room in the output.
	senders []*h2Exchange
	// names are the field names of this connection's responses as HTTP/2
	// writes them (beyond h2Names); values the last value sent under each
	// name h2Names indexes, kept so that HPACK's table may hold them.
	names, values map[string]string
	scratch       []byte
	// writeDeadline is the socket's write deadline (the flusher's).
	writeDeadline time.Time
}

const (
	// h2OutputLimit is how much output may wait before a response's DATA
	// waits for it to be written.
	h2OutputLimit = 64 << 10
	// h2ControlLimit is how far past h2OutputLimit the gateway's answers
	// to the client's own frames (SETTINGS, PING) may pile up before the
	// connection is closed: a client that sends them and reads nothing.
	h2ControlLimit = 64 << 10
	// h2FieldCache bounds names per connection.
	h2FieldCache = 64
	// h2IndexedValue is the longest value HPACK's table is offered.
	h2IndexedValue = 128
)

func (hc *h2Conn) initOutput() {
	hc.fw = http2.NewFramer(h2Frames{hc}, nil)
	hc.henc = hpack.NewEncoder(h2HeaderBlock{hc})
	hc.names = make(map[string]string)
	hc.values = make(map[string]string)
}

// h2Frames appends the framer's frames to the pending output.
type h2Frames struct{ hc *h2Conn }

func (w h2Frames) Write(p []byte) (int, error) {
	hc := w.hc
	hc.takeOutputBuf()
	hc.wbuf = append(hc.wbuf, p...)
	return len(p), nil
}

// takeOutputBuf gives the output a pooled buffer if it has none (mu held).
func (hc *h2Conn) takeOutputBuf() {
	if hc.wbufp == nil {
		hc.wbufp = h2OutputBufs.Get().(*[]byte)
		hc.wbuf = (*hc.wbufp)[:0]
	}
}

// appendData queues a DATA frame carrying p on stream id (mu held). It is
// written here rather than by the framer, which would first copy p into a
// buffer of its own (and keep that buffer as large as the largest frame):
// a DATA frame is its 9-byte header (RFC 9113 4.1) and p, without padding.
func (hc *h2Conn) appendData(id uint32, end bool, p []byte) {
	hc.dataSent++
	hc.takeOutputBuf()
	var flags http2.Flags
	if end {
		flags = http2.FlagDataEndStream
	}
	n := len(p)
	hc.wbuf = append(hc.wbuf, byte(n>>16), byte(n>>8), byte(n), byte(http2.FrameData), byte(flags),
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
	hc.wbuf = append(hc.wbuf, p...)
}

// h2OutputBufs are the connections' output buffers.
var h2OutputBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// h2HeaderBlock appends the encoder's output to the header block.
type h2HeaderBlock struct{ hc *h2Conn }

func (w h2HeaderBlock) Write(p []byte) (int, error) {
	w.hc.hbuf = append(w.hc.hbuf, p...)
	return len(p), nil
}

// writeServerSettings queues the server's first frames: its settings, and
// the connection window beyond the 65,535 bytes every connection starts
// with (mu held).
func (hc *h2Conn) writeServerSettings() {
	s := []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: h2MaxStreams},
		{ID: http2.SettingMaxHeaderListSize, Val: uint32(min(hc.set.maxHeaderBytes, 1<<31-1))},
	}
	if hc.set.streamWindow != 65535 {
		s = append(s, http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(hc.set.streamWindow)})
	}
	if hc.set.frameSize != h2MinFrameSize {
		s = append(s, http2.Setting{ID: http2.SettingMaxFrameSize, Val: hc.set.frameSize})
	}
	_ = hc.fw.WriteSettings(s...)
	hc.unackedSettings++
	if extra := int64(hc.set.connWindow) - 65535; extra > 0 {
		_ = hc.fw.WriteWindowUpdate(0, uint32(extra))
		hc.recvWindow += extra
	}
}

// controlRoom reports whether an answer to the client's own frame may
// still be queued (mu held).
func (hc *h2Conn) controlRoom() bool {
	return !hc.dead && len(hc.wbuf) < h2OutputLimit+h2ControlLimit
}

// writeReset queues RST_STREAM for stream id (mu held).
func (hc *h2Conn) writeReset(id uint32, code http2.ErrCode) {
	hc.noteReset(id)
	if !hc.dead {
		_ = hc.fw.WriteRSTStream(id, code)
	}
}

// flush writes the pending output, unless a write is in progress (its
// writer takes what is pending when it is done). batch first lets the
// goroutines ready to run add their frames.
func (hc *h2Conn) flush(batch bool) {
	hc.mu.Lock()
	if hc.flushing || hc.dead || len(hc.wbuf) == 0 && (!hc.closeAfterFlush || hc.closedWrite) {
		hc.mu.Unlock()
		return
	}
	hc.flushing = true
	if batch {
		hc.mu.Unlock()
		runtime.Gosched()
		hc.mu.Lock()
	}
	for len(hc.wbuf) > 0 && !hc.dead {
		buf, bufp := hc.wbuf, hc.wbufp
		hc.wbuf, hc.wbufp = nil, nil
		hc.wakeSenders()
		hc.mu.Unlock()
		err := hc.write(buf)
		if cap(buf) <= 4*h2OutputLimit {
			*bufp = buf[:0]
			h2OutputBufs.Put(bufp)
		}
		hc.mu.Lock()
		if err != nil {
			hc.fail()
		}
	}
	hc.flushing = false
	closeNow := hc.closeAfterFlush && !hc.closedWrite && !hc.dead
	if closeNow {
		hc.closedWrite = true
	}
	hc.mu.Unlock()
	if closeNow {
		// The client reads the last frames, then closes its side, which
		// ends the reader; one that does not is closed after a moment
		// (not by a read deadline: only the reader may set one, as
		// netpoll's connections have it).
		hc.closeWrite()
		time.AfterFunc(h2CloseLinger, hc.closeConn)
	}
}

// write writes p to the socket, within h2WriteStall of the client taking
// it (the deadline moves on at most once a second, or a quarter of the
// stall).
func (hc *h2Conn) write(p []byte) error {
	stall := time.Duration(h2WriteStall.Load())
	if d := deadlineAfter(stall); d.Sub(hc.writeDeadline) >= min(time.Second, stall/4) {
		hc.writeDeadline = d
		_ = hc.conn.SetWriteDeadline(d)
	}
	_, err := hc.conn.Write(p)
	return err
}

// fail marks a connection whose socket failed: nothing more is written,
// every waiting stream is woken to find it so, and the reader ends on
// the closed socket (mu held).
func (hc *h2Conn) fail() {
	if hc.dead {
		return
	}
	hc.dead = true
	hc.wbuf = hc.wbuf[:0] // dropped; the buffer goes with the connection
	for _, x := range hc.streams {
		x.wakeReader()
		x.wakeSender()
	}
	hc.wakeSenders()
	go hc.conn.Close()
}

// wakeSenders wakes the streams waiting for the connection's window or
// for room in the output (mu held).
func (hc *h2Conn) wakeSenders() {
	for i, x := range hc.senders {
		x.swaiting = false
		x.wakeSender()
		hc.senders[i] = nil
	}
	hc.senders = hc.senders[:0]
}

// writeHead queues a response head on x's stream: the status, the
// response's fields as HTTP/2 carries them, contentLength (-1: none) and
// a Date when the response has none. end ends the stream with it.
func (hc *h2Conn) writeHead(x *h2Exchange, status int, h *fasthttp.ResponseHeader, contentLength int, end bool) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if x.reset || hc.dead {
		return errClientGone
	}
	x.sentAt.Store(int64(monoNow()))
	hc.hbuf = hc.hbuf[:0]
	_ = hc.henc.WriteField(hpack.HeaderField{Name: ":status", Value: h2StatusText(status)})
	date := false
	for k, v := range h.All() {
		name, index := hc.fieldName(k)
		switch name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "trailer", "content-length":
			// Connection-specific (RFC 9113 8.2.2), or framing HTTP/2 does
			// itself.
			continue
		case "date":
			date = true
		}
		hc.field(name, index, v)
	}
	if contentLength >= 0 {
		hc.scratch = strconv.AppendInt(hc.scratch[:0], int64(contentLength), 10)
		hc.field("content-length", true, hc.scratch)
	}
	if !date {
		_ = hc.henc.WriteField(hpack.HeaderField{Name: "date", Value: h2Date()})
	}
	hc.writeBlock(x.id, end)
	if end {
		x.endLocal()
	}
	return nil
}

// writeTrailers queues the response's trailer section, ending x's stream.
func (hc *h2Conn) writeTrailers(x *h2Exchange, h *fasthttp.ResponseHeader) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if x.reset || hc.dead {
		return errClientGone
	}
	hc.hbuf = hc.hbuf[:0]
	for k := range h.Trailers() {
		if v := h.PeekBytes(k); v != nil {
			name, index := hc.fieldName(k)
			hc.field(name, index, v)
		}
	}
	hc.writeBlock(x.id, true)
	x.endLocal()
	return nil
}

// writeBlock queues the header block in hbuf on stream id: HEADERS, and
// CONTINUATION frames for what does not fit the client's frame size
// (mu held).
func (hc *h2Conn) writeBlock(id uint32, end bool) {
	block := hc.hbuf
	max := int(hc.peerMaxFrame)
	first := block[:min(len(block), max)]
	block = block[len(first):]
	_ = hc.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		frag := block[:min(len(block), max)]
		block = block[len(frag):]
		_ = hc.fw.WriteContinuation(id, len(block) == 0, frag)
	}
}

// fieldName is a response field's name k as HTTP/2 writes it (lower
// case), and whether its values are offered to HPACK's table (h2Names).
func (hc *h2Conn) fieldName(k []byte) (string, bool) {
	if n, ok := h2Names[string(k)]; ok {
		return n.name, n.index
	}
	if n, ok := hc.names[string(k)]; ok {
		return n, false
	}
	if len(hc.names) < h2FieldCache {
		n := strings.ToLower(string(k))
		hc.names[string(k)] = n
		return n, false
	}
	hc.scratch = append(hc.scratch[:0], k...)
	for i, c := range hc.scratch {
		if 'A' <= c && c <= 'Z' {
			hc.scratch[i] = c + 'a' - 'A'
		}
	}
	return bytesView(hc.scratch), false
}

// field encodes one field. A value of a name whose values repeat across
// responses goes into HPACK's table, as a string the connection keeps (its
// last value under that name, copied only when it changes); any other is
// sent never indexed, without a copy (as nginx sends every response field:
// nothing per-response, such as a request id, churns the table).
func (hc *h2Conn) field(name string, index bool, v []byte) {
	if index && len(v) <= h2IndexedValue {
		last, ok := hc.values[name]
		if !ok || last != string(v) {
			last = string(v)
			hc.values[name] = last
		}
		_ = hc.henc.WriteField(hpack.HeaderField{Name: name, Value: last})
		return
	}
	_ = hc.henc.WriteField(hpack.HeaderField{Name: name, Value: bytesView(v), Sensitive: true})
}

// writeData queues p on x's stream in DATA frames, as the stream's and
// the connection's windows, the client's frame size and the output's room
// allow, waiting for more; end ends the stream with the last frame. A
// stream whose windows let nothing of it go for h2WriteStall is reset: the
// time counts from when it began waiting after its last bytes, not from
// its writer's last wake (every write of the connection wakes the waiting
// streams, and a client's PINGs, or its answers to the gateway's
// keepalive ones, would keep such a stream, its handler and its upstream
// exchange alive for good). A wait for room in the output alone is the
// connection's: its writes are bounded themselves (write).
func (hc *h2Conn) writeData(x *h2Exchange, p []byte, end bool) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	for {
		if x.reset || hc.dead {
			return errClientGone
		}
		if len(p) == 0 {
			if end {
				hc.appendData(x.id, true, nil)
				x.endLocal()
			}
			return nil
		}
		room := h2OutputLimit - len(hc.wbuf)
		n := min(int64(len(p)), x.sendWindow, hc.sendWindow, int64(hc.peerMaxFrame), int64(room))
		if n > 0 {
			last := end && int(n) == len(p)
			x.stalledAt = 0
			x.sentAt.Store(int64(monoNow()))
			hc.appendData(x.id, last, p[:n])
			x.sendWindow -= n
			hc.sendWindow -= n
			p = p[n:]
			if last {
				x.endLocal()
				return nil
			}
			continue
		}
		if room <= 0 && !hc.flushing {
			// The output is full and nobody writes it: this goroutine does.
			hc.mu.Unlock()
			hc.flush(false)
			hc.mu.Lock()
			continue
		}
		wait := time.Duration(h2WriteStall.Load())
		if x.sendWindow > 0 && hc.sendWindow > 0 {
			// Only the output is full: whoever writes it empties it.
			x.stalledAt = 0
		} else {
			now := monoNow()
			if x.stalledAt == 0 {
				x.stalledAt = now
			}
			if wait -= now - x.stalledAt; wait <= 0 {
				// The client let nothing of it go for h2WriteStall.
				hc.closeStream(x)
				hc.writeReset(x.id, http2.ErrCodeCancel)
				return errClientGone
			}
		}
		hc.waitSend(x, wait)
	}
}

// waitSend waits (mu held, released meanwhile) until x's stream is woken
// (it may send more, or it ended) or d passes.
func (hc *h2Conn) waitSend(x *h2Exchange, d time.Duration) {
	if !x.swaiting {
		x.swaiting = true
		hc.senders = append(hc.senders, x)
	}
	hc.mu.Unlock()
	// What is queued must go out for the client to answer it.
	hc.flush(false)
	x.waitSender(d)
	hc.mu.Lock()
}

// localResponse answers stream id with status and a plain-text message
// itself, without a handler (mu held): a request head the gateway cannot
// take. A stream whose client side is still open is then reset (NO_ERROR:
// the answer is whole, the rest of the request unwanted).
func (hc *h2Conn) localResponse(id uint32, state int, status int, msg string) {
	if hc.dead {
		return
	}
	hc.hbuf = hc.hbuf[:0]
	_ = hc.henc.WriteField(hpack.HeaderField{Name: ":status", Value: h2StatusText(status)})
	_ = hc.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: "text/plain; charset=utf-8"})
	_ = hc.henc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(msg) + 1)})
	_ = hc.henc.WriteField(hpack.HeaderField{Name: "date", Value: h2Date()})
	hc.writeBlock(id, false)
	hc.appendData(id, true, []byte(msg+"\n"))
	if state == h2Open {
		hc.writeReset(id, http2.ErrCodeNo)
	}
}

// h2Names are the response field names fasthttp writes (canonical) as
// HTTP/2 writes them: looked up, not lowered, per response; index says
// their values tend to repeat from one response to the next.
var h2Names = func() map[string]h2Name {
	m := map[string]h2Name{}
	for _, k := range []string{"Content-Type", "Content-Encoding", "Content-Length", "Date", "Server", "Cache-Control",
		"Vary", "Accept-Ranges", "Content-Language", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
		"Access-Control-Allow-Headers", "Access-Control-Allow-Methods", "Access-Control-Max-Age", "Access-Control-Expose-Headers",
		"Strict-Transport-Security", "X-Content-Type-Options", "X-Frame-Options", "Grpc-Encoding", "Grpc-Accept-Encoding", "Via"} {
		m[k] = h2Name{strings.ToLower(k), true}
	}
	for _, k := range []string{"Set-Cookie", "Location", "Etag", "Last-Modified", "Expires", "Age", "Content-Range",
		"Content-Disposition", "Www-Authenticate", "Retry-After", "X-Request-Id", "Grpc-Status", "Grpc-Message",
		"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer", "Allow", "Link"} {
		m[k] = h2Name{strings.ToLower(k), false}
	}
	return m
}()

type h2Name struct {
	name  string
	index bool
}

// h2Statuses are the statuses as :status values.
var h2Statuses = func() []string {
	s := make([]string, 1000)
	for i := 100; i < len(s); i++ {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func h2StatusText(status int) string {
	if status < 100 || status >= len(h2Statuses) {
		return "502"
	}
	return h2Statuses[status]
}

// h2DateNow is the Date of responses that have none, made once a second
// from the deadline clock (no clock read per response).
var h2DateNow atomic.Pointer[h2DateValue]

type h2DateValue struct {
	sec int64
	s   string
}

func h2Date() string {
	deadlineClock.once.Do(startDeadlineClock)
	sec := deadlineClock.now.Load() / int64(time.Second)
	if d := h2DateNow.Load(); d != nil && d.sec == sec {
		return d.s
	}
	d := &h2DateValue{sec: sec, s: time.Unix(sec, 0).UTC().Format(fasthttpDateFormat)}
	h2DateNow.Store(d)
	return d.s
}

// fasthttpDateFormat is HTTP's date format (RFC 9110 5.6.7).
const fasthttpDateFormat = "Mon, 02 Jan 2006 15:04:05 GMT"
