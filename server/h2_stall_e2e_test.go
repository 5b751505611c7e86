package server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2StallDeadlineIsPerStream: a stream whose client never opens its
// window is reset h2WriteStall after it last moved, however much else the
// connection writes meanwhile (answers to the client's PINGs and SETTINGS,
// the gateway's own keepalive PINGs, which every client answers), and its
// upstream exchange is let go. Each write of the connection woke the
// stream's writer, which waited h2WriteStall afresh: 100 such streams held
// 100 upstream connections for as long as the client pinged. A stream
// whose window opens little by little, within the stall each time, is not
// reset.
func TestH2StallDeadlineIsPerStream(t *testing.T) {
	const stall = time.Second
	old := h2WriteStall.Swap(int64(stall))
	t.Cleanup(func() { h2WriteStall.Store(old) })
	var upstreamDone atomic.Int32 // upstream handlers that returned
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer upstreamDone.Add(1)
		n, _ := strconv.Atoi(r.URL.Query().Get("chunks"))
		chunk := bytes.Repeat([]byte("b"), 16<<10)
		for range n {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	for _, tc := range []struct {
		name      string
		keepalive bool // the gateway pings; the client answers
		// every is what the client does every tick besides answering.
		every func(fr *http2.Framer) error
		// grant: the client opens the stream's window by this much each
		// tick (and the connection's), and expects the whole body.
		grant uint32
	}{
		{name: "client pings", every: func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{'c'}) }},
		{name: "client sends settings", every: func(fr *http2.Framer) error { return fr.WriteSettings() }},
		{name: "gateway keepalive pings answered", keepalive: true},
		{name: "window opened little by little", grant: 16 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := oneRouteVersion(up, "HTTP1")
			if tc.keepalive {
				cfg = "frontendPolicies:\n  http: {http2KeepaliveInterval: 50ms, http2KeepaliveTimeout: 5s}\n" + cfg
			}
			tg := startGateway(t, cfg, nil)
			c, err := net.DialTimeout("tcp", tg.addr(3000), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = io.WriteString(c, http2.ClientPreface)
			h := &h2Raw{t: t, c: c, fr: http2.NewFramer(c, c), settings: map[http2.SettingID]uint32{}}
			h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			h.enc = hpack.NewEncoder(&h.hbuf)
			// A window of nothing: no DATA may come until the client
			// opens it.
			_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			chunks := 4096 // 64 MiB: far more than any buffer on the way holds
			if tc.grant > 0 {
				chunks = 48 // 2.4 s at 16 KiB a tick: longer than the stall
			}
			before := upstreamDone.Load()
			if err := h.request(1, "GET", "/big?chunks="+strconv.Itoa(chunks), true); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(stall / 20)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					var err error
					switch {
					case tc.every != nil:
						err = h.write(tc.every)
					case tc.grant > 0:
						err = h.write(func(fr *http2.Framer) error {
							_ = fr.WriteWindowUpdate(0, tc.grant)
							return fr.WriteWindowUpdate(1, tc.grant)
						})
					}
					if err != nil {
						return
					}
				}
			}()
			start := time.Now()
			var got int
			var reset *http2.RSTStreamFrame
			ended := false
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for reset == nil && !ended {
				f, err := h.fr.ReadFrame()
				if err != nil {
					t.Fatalf("after %v, %d bytes: neither reset nor ended: %v", time.Since(start), got, err)
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						_ = h.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
					}
				case *http2.PingFrame:
					if !f.IsAck() {
						_ = h.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
					}
				case *http2.DataFrame:
					got += len(f.Data())
					ended = f.StreamEnded()
				case *http2.MetaHeadersFrame:
					ended = f.StreamEnded()
				case *http2.RSTStreamFrame:
					reset = f
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY %v", f.ErrCode)
				}
			}
			if tc.grant > 0 {
				if reset != nil || got != chunks*16<<10 {
					t.Fatalf("reset %v after %d of %d bytes; want the whole body", reset != nil, got, chunks*16<<10)
				}
				return
			}
			if reset == nil || reset.ErrCode != http2.ErrCodeCancel || got != 0 {
				t.Fatalf("stream ended with %d bytes, reset %+v; want a reset (CANCEL) and no DATA", got, reset)
			}
			if d := time.Since(start); d > 3*stall {
				t.Fatalf("reset after %v; the stall is %v", d, stall)
			}
			eventually(t, 10*time.Second, "the upstream exchange let go", func() bool { return upstreamDone.Load() > before })
		})
	}
}
