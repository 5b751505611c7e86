package server

import "golang.org/x/net/http2"

// The client's frames other than header blocks: request bodies (DATA) and
// the connection's receive window, the send windows (WINDOW_UPDATE),
// resets, settings and pings.

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
	// A client widens windows as the gateway's DATA uses them: a few
	// updates per frame sent, one per stream, and a margin; millions of
	// +1 updates are a flood that costs a frame's work each.
	hc.windowUpdates++
	if opened := int(hc.maxClientID+1) / 2; hc.windowUpdates > h2WindowUpdateMargin+2*opened+h2WindowUpdatesPerData*hc.dataSent {
		hc.debug("http2: connection closed after too many WINDOW_UPDATE frames")
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
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
		if !x.ended {
			// Reset before its answer: its handler and upstream exchange
			// end (the exchange's connection is closed).
			hc.earlyResets++
		}
		hc.closeStream(x)
		if opened := int(hc.maxClientID+1) / 2; hc.earlyResets >= h2EarlyResetBudget && 2*hc.earlyResets > opened {
			// Most streams reset before their answer: the rapid-reset
			// attack on handlers that end at once (CVE-2023-44487), each
			// reset costing an upstream connection.
			hc.debug("http2: connection closed after too many streams reset before their answer")
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
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
