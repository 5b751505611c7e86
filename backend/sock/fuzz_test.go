package sock

import (
	"bytes"
	"testing"
)

// FuzzResponseComplete: whatever the head, body and the writes they come in,
// a response is reported complete on its last write and never before.
func FuzzResponseComplete(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2"), []byte("ok"), uint8(5), uint8(40))
	f.Add([]byte("HTTP/1.1 204 No Content"), []byte(""), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, head, body []byte, cut1, cut2 uint8) {
		if bytes.Contains(head, headEnd) || bytes.HasSuffix(head, []byte("\r\n\r")) || bytes.HasSuffix(head, []byte("\r\n")) || bytes.HasSuffix(head, []byte("\r")) {
			return // a head ends at its first blank line
		}
		msg := append(append(append([]byte{}, head...), headEnd...), body...)
		a, b := int(cut1)%(len(msg)+1), int(cut2)%(len(msg)+1)
		if a > b {
			a, b = b, a
		}
		var c Conn
		c.resp.need = len(body)
		c.resp.armed.Store(true)
		writes := [][]byte{msg[:a], msg[a:b], msg[b:]}
		last := 2
		for last > 0 && len(writes[last]) == 0 {
			last--
		}
		for i, w := range writes {
			if !c.resp.armed.Load() {
				// Disarmed early: only when the head end was not in the
				// first write that carried bytes of the response.
				return
			}
			if len(w) == 0 && i != last {
				continue
			}
			if done := c.responseComplete(w); done != (i == last) {
				t.Fatalf("write %d of %q (splits %d,%d): complete=%v", i, msg, a, b, done)
			}
		}
	})
}
