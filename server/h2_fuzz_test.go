package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzServeH2: whatever frames an HTTP/2 client sends after its preface,
// the gateway never crashes or hangs: once the client half-closes, the
// connection ends within a bound, and what the gateway wrote is whole
// frames. With the flag's low bit set, the connection is first given time
// to park between two pieces of the input (parking after 5 ms here), so
// the frames after it are read by a resumed connection.
func FuzzServeH2(f *testing.F) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	head := bytes.Clone(hb.Bytes())
	frames := func(write func(fr *http2.Framer)) []byte {
		var b bytes.Buffer
		write(http2.NewFramer(&b, nil))
		return b.Bytes()
	}
	settings := frames(func(fr *http2.Framer) { _ = fr.WriteSettings() })
	get := frames(func(fr *http2.Framer) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: head, EndStream: true, EndHeaders: true})
	})
	post := frames(func(fr *http2.Framer) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: head, EndHeaders: true})
		_ = fr.WriteData(3, false, []byte("abc"))
		_ = fr.WriteWindowUpdate(0, 1000)
		_ = fr.WriteData(3, true, nil)
	})
	split := frames(func(fr *http2.Framer) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: head[:2], EndStream: true})
		_ = fr.WriteContinuation(5, true, head[2:])
	})
	control := frames(func(fr *http2.Framer) {
		_ = fr.WritePing(false, [8]byte{1})
		_ = fr.WriteSettingsAck()
		_ = fr.WriteRSTStream(7, http2.ErrCodeCancel)
		_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	})
	for _, seed := range [][]byte{
		settings,
		append(bytes.Clone(settings), get...),
		append(append(bytes.Clone(settings), get...), post...),
		append(bytes.Clone(settings), split...),
		append(bytes.Clone(settings), control...),
		append(bytes.Clone(settings), 0, 0, 4, 1, 0, 0, 0, 0, 1), // a HEADERS frame cut short
	} {
		f.Add(seed, uint16(len(settings)), uint8(0))
		f.Add(seed, uint16(len(settings)), uint8(1))
	}
	old := headTimeout.Swap(int64(300 * time.Millisecond))
	f.Cleanup(func() { headTimeout.Store(old) })
	oldPark := parkIdleAfter.Swap(int64(5 * time.Millisecond))
	f.Cleanup(func() { parkIdleAfter.Store(oldPark) })
	up := requestUpstream(f, answerOK)
	gw := fuzzGateway(f, TransportStd, oneRouteVersion(up, "HTTP1"))
	addr := gw.Addrs()[3000].String()
	gw.mu.Lock()
	m := gw.binds[3000].metrics
	gw.mu.Unlock()
	f.Fuzz(func(t *testing.T, raw []byte, cut uint16, flags uint8) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		at := min(int(cut), len(raw))
		c.Write([]byte(http2.ClientPreface))
		c.Write(raw[:at])
		if flags&1 != 0 {
			// Give it the time to park (it may not: a stream may be open,
			// or a frame half read), then wake it with the rest.
			for end := time.Now().Add(200 * time.Millisecond); m.Parked() == 0 && time.Now().Before(end); {
				time.Sleep(time.Millisecond) // polling, bounded above
			}
		}
		c.Write(raw[at:])
		c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("no close within 10 s after the client's end, for %x (got %d bytes)", raw, len(got))
		}
		// Whole frames, each within the largest frame size a server may
		// send without the client's leave.
		for len(got) > 0 {
			if len(got) < 9 {
				t.Fatalf("a frame header cut short: %x", got)
			}
			n := int(binary.BigEndian.Uint32(got[:4]) >> 8)
			if n > 16384 || len(got) < 9+n {
				t.Fatalf("a frame of %d bytes with %d left, for %x", n, len(got)-9, raw)
			}
			got = got[9+n:]
		}
	})
}
