package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2Floods: clients that abuse HTTP/2 lose their connection (or the
// streams they should not have) and the gateway goes on serving others.
func TestH2Floods(t *testing.T) {
	// /block answers once the gate in force when it was asked opens.
	var gate atomic.Pointer[chan struct{}]
	closeGate := func() {
		if g := gate.Swap(nil); g != nil {
			close(*g)
		}
	}
	newGate := func() {
		closeGate()
		g := make(chan struct{})
		gate.Store(&g)
	}
	newGate()
	t.Cleanup(closeGate)
	var blocked atomic.Int32 // requests /block got
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/block":
			blocked.Add(1)
			if g := gate.Load(); g != nil {
				select {
				case <-*g:
				case <-r.Context().Done():
				}
			}
		case "/big":
			chunk := bytes.Repeat([]byte("b"), 16<<10)
			for range 64 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
		io.WriteString(w, "ok") //nolint:errcheck
	}))
	tg := startGateway(t, `
frontendPolicies:
  http: {http2MaxHeaderSize: 16384, http2WindowSize: 65535, http2ConnectionWindowSize: 65535}
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /slow}}]
      policies: {delay: {duration: 2s}}
      backends: [{host: `+up+`}]
    # HTTP/1.1 upstream: the streams the client leaves open hold their
    # handlers (a reset stream ends its exchange, HTTP/1.1 or HTTP/2).
    - backends: [{host: `+up+`, policies: {http: {version: HTTP1}}}]
`, nil)
	addr := tg.addr(3000)
	// healthy checks that a well-behaved client is served meanwhile.
	healthy := func(t *testing.T) {
		t.Helper()
		resp, err := h2cClient().Get(tg.url(3000) + "/fast")
		if err != nil {
			t.Fatalf("another client: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("another client: %d", resp.StatusCode)
		}
	}
	expectGoAway := func(t *testing.T, h *h2Raw, code http2.ErrCode) {
		t.Helper()
		ga, err := h.goAway(10 * time.Second)
		if err != nil {
			t.Fatalf("no GOAWAY: %v", err)
		}
		if ga == nil || ga.ErrCode != code {
			t.Fatalf("GOAWAY %+v; want one with %v", ga, code)
		}
		// And the connection ends.
		if _, err := h.readUntil(10*time.Second, nil, func(http2.Frame) bool { return false }); err == nil || isTimeout(err) {
			t.Fatalf("connection still open: %v", err)
		}
	}

	t.Run("too many concurrent streams", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		if _, err := h.readUntil(5*time.Second, nil, func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok }); err != nil {
			t.Fatal(err)
		}
		if got := h.settings[http2.SettingMaxConcurrentStreams]; got != h2MaxStreams {
			t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d; want %d", got, h2MaxStreams)
		}
		answers := map[uint32]*h2Answer{}
		for i := range h2MaxStreams + 1 {
			if err := h.request(uint32(2*i+1), "GET", "/block", true); err != nil {
				t.Fatal(err)
			}
		}
		over := uint32(2*h2MaxStreams + 1)
		if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[over] != nil && answers[over].wasReset }); err != nil {
			t.Fatalf("the stream over the limit was not refused: %v", err)
		}
		if code := answers[over].reset; code != http2.ErrCodeProtocol && code != http2.ErrCodeRefusedStream {
			t.Fatalf("RST_STREAM %v", code)
		}
		healthy(t)
		// The streams within the limit are served.
		closeGate()
		if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool {
			for i := range h2MaxStreams {
				if a := answers[uint32(2*i+1)]; a == nil || !a.done {
					return false
				}
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		for i := range h2MaxStreams {
			if a := answers[uint32(2*i+1)]; a.status != "200" {
				t.Fatalf("stream %d: %q", 2*i+1, a.status)
			}
		}
	})
	t.Run("over the limit again and again", func(t *testing.T) {
		// A client that keeps opening streams over the limit loses its
		// connection (h2ErrorBudget).
		newGate()
		h := dialH2Raw(t, addr)
		if _, err := h.readUntil(5*time.Second, nil, func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok }); err != nil {
			t.Fatal(err)
		}
		for i := range h2MaxStreams + h2ErrorBudget + 10 {
			if err := h.request(uint32(2*i+1), "GET", "/block", true); err != nil {
				break
			}
		}
		if _, err := h.readUntil(10*time.Second, nil, func(http2.Frame) bool { return false }); err == nil || isTimeout(err) {
			t.Fatalf("connection still open: %v", err)
		}
		closeGate()
		healthy(t)
	})
	newGate()

	t.Run("rapid reset", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		// Streams opened and reset at once, faster than their handlers
		// can end (a delay policy holds them, whatever the upstream):
		// past four times the stream limit waiting, the connection is
		// cut (CVE-2023-44487).
		var werr error
		for i := 0; i < 10*h2MaxStreams && werr == nil; i++ {
			id := uint32(2*i + 1)
			if werr = h.request(id, "GET", "/slow", true); werr == nil {
				werr = h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) })
			}
		}
		expectGoAway(t, h, http2.ErrCodeEnhanceYourCalm)
		healthy(t)
	})

	t.Run("rapid reset, handlers ending at once", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		// Each reset ends its handler and its HTTP/1.1 upstream exchange
		// (the upstream connection closes), so nothing waits when the
		// client resets each stream once the upstream has its request:
		// paced so, the streams reset before their answer, most of those
		// opened, end the connection.
		for i := range h2EarlyResetBudget {
			id := uint32(2*i + 1)
			before := blocked.Load()
			if err := h.request(id, "GET", "/block", true); err != nil {
				t.Fatalf("stream %d: %v", id, err)
			}
			eventually(t, 10*time.Second, "stream "+strconv.Itoa(int(id))+" upstream", func() bool { return blocked.Load() > before })
			if err := h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }); err != nil {
				t.Fatalf("stream %d: %v", id, err)
			}
		}
		// The budget's last reset ends the connection.
		expectGoAway(t, h, http2.ErrCodeEnhanceYourCalm)
		healthy(t)
	})

	t.Run("some resets among answered streams", func(t *testing.T) {
		closeGate()
		defer newGate()
		h := dialH2Raw(t, addr)
		// A client that gives up on one stream in three (more resets
		// than the budget, but a third of its streams) keeps its
		// connection.
		answers := map[uint32]*h2Answer{}
		id := uint32(1)
		for i := 0; i < 3*h2EarlyResetBudget+30; i, id = i+1, id+2 {
			if err := h.request(id, "GET", "/fast", true); err != nil {
				t.Fatalf("stream %d: %v", id, err)
			}
			if i%3 == 0 {
				stream := id
				if err := h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(stream, http2.ErrCodeCancel) }); err != nil {
					t.Fatal(err)
				}
				continue
			}
			stream := id
			f, err := h.readUntil(10*time.Second, answers, func(f http2.Frame) bool {
				_, away := f.(*http2.GoAwayFrame)
				return away || answers[stream] != nil && answers[stream].done
			})
			if err != nil {
				t.Fatalf("stream %d: %v", stream, err)
			}
			if _, away := f.(*http2.GoAwayFrame); away {
				t.Fatalf("GOAWAY after %d streams: %+v", i+1, f)
			}
			if a := answers[stream]; a.status != "200" {
				t.Fatalf("stream %d: %+v", stream, a)
			}
		}
	})
	closeGate()

	t.Run("CONTINUATION flood", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		// A header block that never ends, 4 KiB of fields a frame, past
		// http2MaxHeaderSize (CVE-2024-27316's kind).
		var field bytes.Buffer
		enc := hpack.NewEncoder(&field)
		_ = enc.WriteField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("f", 4000)})
		go func() {
			if h.write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block("GET", "/"), EndStream: true})
			}) != nil {
				return
			}
			for range 10000 {
				if h.write(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, field.Bytes()) }) != nil {
					return
				}
			}
		}()
		expectGoAway(t, h, http2.ErrCodeProtocol)
		healthy(t)
	})

	t.Run("data beyond the window", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		// The route's delay keeps the body unread: nothing gives the
		// window back meanwhile.
		if err := h.request(1, "POST", "/slow", false); err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 16384)
		for range 5 { // 80 KiB into a window of 64 KiB
			if h.write(func(fr *http2.Framer) error { return fr.WriteData(1, false, chunk) }) != nil {
				break
			}
		}
		// x/net takes it for the stream's fault: the stream is reset.
		answers := map[uint32]*h2Answer{}
		if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[1] != nil && answers[1].wasReset }); err != nil {
			t.Fatalf("no reset: %v", err)
		}
		if code := answers[1].reset; code != http2.ErrCodeFlowControl {
			t.Fatalf("RST_STREAM %v; want FLOW_CONTROL_ERROR", code)
		}
		healthy(t)
	})

	t.Run("window overflow", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		for range 2 {
			_ = h.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1<<31-1) })
		}
		expectGoAway(t, h, http2.ErrCodeFlowControl)
		healthy(t)
	})

	t.Run("window never opened", func(t *testing.T) {
		old := h2WriteStall.Swap(int64(200 * time.Millisecond))
		t.Cleanup(func() { h2WriteStall.Store(old) })
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		h := &h2Raw{t: t, c: c, fr: fr, settings: map[http2.SettingID]uint32{}}
		h.enc = hpack.NewEncoder(&h.hbuf)
		// A window of nothing: the server may send no DATA at all.
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		if err := h.request(1, "GET", "/big", true); err != nil {
			t.Fatal(err)
		}
		stalled := map[uint32]*h2Answer{}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for stalled[1] == nil || !stalled[1].wasReset {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("no reset of the stalled stream: %v", err)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.RSTStreamFrame:
				stalled[f.StreamID] = &h2Answer{wasReset: true, reset: f.ErrCode}
			case *http2.DataFrame:
				if len(f.Data()) > 0 {
					t.Fatalf("DATA beyond a window of 0")
				}
			}
		}
		healthy(t)
	})

	t.Run("PING flood, answers never read", func(t *testing.T) {
		// The answers pile up in the socket, then in the output; the
		// connection is closed, not its output grown without bound.
		old := h2WriteStall.Swap(int64(300 * time.Millisecond))
		t.Cleanup(func() { h2WriteStall.Store(old) })
		h := dialH2Raw(t, addr)
		if err := floodUntilClosed(h, func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{1}) }); err != nil {
			t.Fatal(err)
		}
		healthy(t)
	})

	t.Run("SETTINGS flood, answers never read", func(t *testing.T) {
		old := h2WriteStall.Swap(int64(300 * time.Millisecond))
		t.Cleanup(func() { h2WriteStall.Store(old) })
		h := dialH2Raw(t, addr)
		if err := floodUntilClosed(h, func(fr *http2.Framer) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
		}); err != nil {
			t.Fatal(err)
		}
		healthy(t)
	})

	// Frames that need no answer and are not acted on (PRIORITY), or
	// widen a window by 1 again and again (WINDOW_UPDATE), cost a parse
	// each: 2 million in 3 s were taken without end.
	t.Run("PRIORITY flood", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		go func() {
			for i := range 100 * h2PriorityPerStream {
				id := uint32(2*i + 1)
				if h.write(func(fr *http2.Framer) error {
					return fr.WritePriority(id, http2.PriorityParam{StreamDep: 0, Weight: 15})
				}) != nil {
					return
				}
			}
		}()
		expectGoAway(t, h, http2.ErrCodeEnhanceYourCalm)
		healthy(t)
	})
	t.Run("WINDOW_UPDATE flood", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		go func() {
			for range 100 * h2WindowUpdateMargin {
				if h.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1) }) != nil {
					return
				}
			}
		}()
		expectGoAway(t, h, http2.ErrCodeEnhanceYourCalm)
		healthy(t)
	})
	t.Run("window updates of a long download are no flood", func(t *testing.T) {
		// A client that acknowledges every DATA frame with two updates
		// (its stream's and the connection's; readUntil does) is served
		// to the end.
		h := dialH2Raw(t, addr)
		if err := h.request(1, "GET", "/big", true); err != nil {
			t.Fatal(err)
		}
		answers := map[uint32]*h2Answer{}
		if _, err := h.readUntil(20*time.Second, answers, func(f http2.Frame) bool {
			if _, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatal("GOAWAY to a client acknowledging its DATA")
			}
			return answers[1] != nil && answers[1].done
		}); err != nil {
			t.Fatal(err)
		}
		if a := answers[1]; a.status != "200" || len(a.body) < 64*16<<10 {
			t.Fatalf("status %q, %d bytes", a.status, len(a.body))
		}
	})

	t.Run("empty DATA flood", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		if err := h.request(1, "POST", "/slow", false); err != nil {
			t.Fatal(err)
		}
		go func() {
			for range 10 * h2EmptyFrameBudget {
				if h.write(func(fr *http2.Framer) error { return fr.WriteData(1, false, nil) }) != nil {
					return
				}
			}
		}()
		expectGoAway(t, h, http2.ErrCodeEnhanceYourCalm)
		healthy(t)
	})

	t.Run("empty CONTINUATION flood", func(t *testing.T) {
		h := dialH2Raw(t, addr)
		go func() {
			if h.write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block("GET", "/"), EndStream: true})
			}) != nil {
				return
			}
			for range 10 * h2EmptyFrameBudget {
				if h.write(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, nil) }) != nil {
					return
				}
			}
		}()
		// Past the frames a header block may take (PROTOCOL_ERROR) or the
		// empty frames in a row (ENHANCE_YOUR_CALM), whichever comes
		// first: http2MaxHeaderSize makes it the former.
		expectGoAway(t, h, http2.ErrCodeProtocol)
		healthy(t)
	})
}

// floodUntilClosed writes frames with write, reading nothing, until the
// connection fails; an error if it is still open after 15 s of it.
func floodUntilClosed(h *h2Raw, write func(*http2.Framer) error) error {
	done := make(chan error, 1)
	go func() {
		for {
			if err := h.write(write); err != nil {
				done <- nil
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		h.c.Close()
		return errors.New("the connection was still open after 15 s of flood")
	}
}

// TestH2HeaderListBudget: a header block of a few bytes can decode into a
// list as large as the limit, by references to the HPACK table (one 4 KB
// field in the table, named 15 times: 60 KB from 20 bytes). The header
// lists a connection's open streams hold are bounded together: past the
// budget (1 MiB by default) a new stream is refused (REFUSED_STREAM), and
// once streams close, new ones are served again. Without the bound, 99
// such streams held 6 MB per connection (100 MB with the former 1 MiB
// list limit), from kilobytes sent.
func TestH2HeaderListBudget(t *testing.T) {
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRoute(up), nil)
	h := dialH2Raw(t, tg.addr(3000))
	big := strings.Repeat("a", 4000)
	var fields []string
	for range 15 {
		fields = append(fields, "x-big", big)
	}
	const streams = 40
	for i := uint32(0); i < streams; i++ {
		// A POST whose body never comes: the stream stays open.
		if err := h.request(1+2*i, "POST", "/hold", false, fields...); err != nil {
			t.Fatal(err)
		}
	}
	answers := map[uint32]*h2Answer{}
	refused := func() int {
		n := 0
		for _, a := range answers {
			if a.wasReset && a.reset == http2.ErrCodeRefusedStream {
				n++
			}
		}
		return n
	}
	// 1 MiB holds 17 such lists: the other 23 are refused.
	if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return refused() >= streams-17 }); err != nil {
		t.Fatalf("refused %d of %d streams: %v", refused(), streams, err)
	}
	// The held streams go; a stream with the same list is served.
	for i := uint32(0); i < streams; i++ {
		if a := answers[1+2*i]; a == nil || !a.wasReset {
			_ = h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(1+2*i, http2.ErrCodeCancel) })
		}
	}
	next := uint32(1 + 2*streams)
	if err := h.request(next, "GET", "/after", true, fields...); err != nil {
		t.Fatal(err)
	}
	if a := h.answer(t, answers, next); a.status != "200" || string(a.body) != "GET /after " {
		t.Fatalf("after the streams closed: %+v", a)
	}
}

// TestH2MalformedHeadsAreRefused: an HTTP/2 head whose :method is not a
// token, whose :path holds whitespace, a control character or a
// fragment, or whose field value starts or ends with SP or HTAB is
// malformed (RFC 9113 8.2.1, 8.3.1): its stream is reset, and nothing goes
// upstream. A :method "GET /admin" and :path "/x" once went to an HTTP/1.1
// upstream as the request line "GET /admin /x HTTP/1.1", routed and
// authorized as /x.
func TestH2MalformedHeadsAreRefused(t *testing.T) {
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRoute(up), nil)
	h := dialH2Raw(t, tg.addr(3000))
	answers := map[uint32]*h2Answer{}
	id := uint32(1)
	for _, tc := range []struct {
		method, path string
		fields       []string
	}{
		{"GET /admin", "/x", nil},
		{"GET\t", "/x", nil},
		{"GET", "/x HTTP/1.0", nil},
		{"GET", "/x\t/admin", nil},
		{"GET", "/x#frag", nil},
		{"GET", "/x\x7f", nil},
		{"GET", "/x", []string{"x-a", " lead"}},
		{"GET", "/x", []string{"x-a", "trail\t"}},
		// Host naming another entity than :authority (RFC 9113 8.3.1).
		{"GET", "/x", []string{"host", "other.test"}},
	} {
		if err := h.request(id, tc.method, tc.path, true, tc.fields...); err != nil {
			t.Fatal(err)
		}
		a := h.answer(t, answers, id)
		if !a.wasReset || a.reset != http2.ErrCodeProtocol || a.status != "" {
			t.Errorf("%q %q %q: %+v, want a reset (PROTOCOL_ERROR)", tc.method, tc.path, tc.fields, a)
		}
		id += 2
	}
	if a := h.get(t, answers, id, "/ok?q=a%20b"); a.status != "200" || string(a.body) != "GET /ok?q=a%20b " {
		t.Fatalf("a well-formed request: %+v", a)
	}
	// A Host that agrees with :authority (case, a default port) is fine.
	for _, host := range []string{"H2.test", "h2.test:80"} {
		id += 2
		if err := h.request(id, "GET", "/ok", true, "host", host); err != nil {
			t.Fatal(err)
		}
		if a := h.answer(t, answers, id); a.status != "200" {
			t.Errorf("host %q: %+v, want 200", host, a)
		}
	}
}
