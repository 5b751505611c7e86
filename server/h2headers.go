package server

import (
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Header blocks: a HEADERS frame and the CONTINUATION frames after it are
// decoded by hpack as they come, a request head straight into the new
// stream's request context (onField), with the checks RFC 9113 8.2 and 8.3
// ask of a server and the limits that keep a client from flooding.

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
	// overLimit: the stream is refused for being past h2MaxStreams, which
	// the client knew (it acknowledged the settings that say so).
	overLimit bool
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
	case hc.active >= h2MaxStreams:
		// As many streams are open or half-closed as the client may
		// have (streams whose answer ended do not count, even while
		// their handler still runs). Before the client acknowledged
		// the settings it may not know the limit yet: no fault of its.
		hc.maxClientID = id
		b.reset, b.resets = http2.ErrCodeRefusedStream, true
		b.overLimit = hc.unackedSettings == 0
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
		if b.reset == http2.ErrCodeRefusedStream {
			return hc.refuseStream(id, b.overLimit)
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
	if !validH2FieldName(f.Name) || edgeSpace(f.Value) {
		// A value may not start or end with SP or HTAB (RFC 9113
		// 8.2.1).
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
	size := hc.set.maxHeaderBytes - b.remain
	hc.mu.Lock()
	if hc.dead {
		hc.mu.Unlock()
		releaseH2Exchange(x)
		return nil
	}
	if hc.headerBytes+size > hc.set.headerBudget && len(hc.streams) > 0 {
		// The open streams hold as many header bytes as the connection
		// may: this one waits for them (REFUSED_STREAM: not processed).
		// The client cannot know that budget: no error of its.
		hc.mu.Unlock()
		releaseH2Exchange(x)
		return hc.refuseStream(id, false)
	}
	defer hc.mu.Unlock()
	hc.headerBytes += size
	x.headerBytes = size
	x.open(hc, id, state)
	hc.addStream(x)
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

// edgeSpace reports whether v starts or ends with SP or HTAB.
func edgeSpace(v string) bool {
	return len(v) > 0 && (v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t')
}
