package sock

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestBareBlankEnd(t *testing.T) {
	for _, tc := range []struct {
		tail string
		want bool
	}{
		{"x\n\n", true},
		{"ab\n\n", true},
		{"x\r\n\n", true},
		{"x\n\r\n", true},
		{"\r\n\r\n", false},  // the CRLF CRLF end fasthttp takes
		{"abc\n", false},     // one line ended, the head goes on
		{"ab\r\n", false},    // likewise
		{"\n\r\n\n", false},  // a CRLF blank line came first: not bare
		{"ab\n\n\n", false},  // only blank lines in the last four bytes
		{"\n\n", false},      // blank lines alone (leading ones are skipped)
		{"\r\n\n\n", false},  // likewise
		{"x\n\nG", false},    // bytes after the blank line
		{"abcd", false},      // no line end
		{"x\n\r\n\r", false}, // half of a CRLF
	} {
		var h HeadWatch
		h.saw([]byte(tc.tail))
		if got := bareBlankEnd(h.tail); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.tail, got, tc.want)
		}
	}
}

// TestHeadWatchFollowsReadsInPieces: the last four bytes are kept across
// reads of any size.
func TestHeadWatchFollowsReadsInPieces(t *testing.T) {
	var h HeadWatch
	for _, p := range []string{"GET / HTTP/1.1\r\nHost: a", "\n", "", "\n"} {
		h.saw([]byte(p))
	}
	if !bareBlankEnd(h.tail) {
		t.Fatalf("tail %08x after pieces ending \"a\\n\\n\"", h.tail)
	}
	h.saw([]byte("\r"))
	if bareBlankEnd(h.tail) {
		t.Fatal("a byte after the blank line still counts as the end")
	}
}

// headConns are the data-path connection kinds, each with its peer.
func headConns(t *testing.T) map[string]func() (net.Conn, *HeadWatch, *net.TCPConn) {
	return map[string]func() (net.Conn, *HeadWatch, *net.TCPConn){
		"Conn": func() (net.Conn, *HeadWatch, *net.TCPConn) {
			sc, peer := pair(t)
			return sc, HeadWatchOf(sc), peer
		},
		"PromptConn": func() (net.Conn, *HeadWatch, *net.TCPConn) {
			sc, peer := pair(t)
			pc := &PromptConn{Conn: sc.TCPConn}
			return pc, HeadWatchOf(pc), peer
		},
	}
}

// TestHeadWaitRefusesABareLFHead: a read during a head, after bytes that
// ended with a bare-LF blank line, fails at once with ErrBareLFHead.
func TestHeadWaitRefusesABareLFHead(t *testing.T) {
	for name, open := range headConns(t) {
		for _, head := range []string{"GET / HTTP/1.1\nHost: a\n\n", "GET / HTTP/1.1\r\nHost: a\r\n\n", "GET / HTTP/1.1\r\nHost: a\n\r\n"} {
			t.Run(name+"/"+strconv.Quote(head[len(head)-4:]), func(t *testing.T) {
				c, h, peer := open()
				if _, err := peer.Write([]byte(head)); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 64)
				if n, err := c.Read(buf); err != nil || string(buf[:n]) != head {
					t.Fatalf("Read = %q, %v", buf[:n], err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				h.ReadingHead()
				start := time.Now()
				if _, err := c.Read(buf); !errors.Is(err, ErrBareLFHead) {
					t.Fatalf("Read after %q = %v, want ErrBareLFHead", head, err)
				}
				if took := time.Since(start); took > time.Second {
					t.Fatalf("ErrBareLFHead after %v, want at once", took)
				}
			})
		}
	}
}

// TestHeadWaitEnds: outside a head, or once a read deadline ended it, the
// same bytes are a body's and the next read waits for more.
func TestHeadWaitEnds(t *testing.T) {
	for name, open := range headConns(t) {
		for _, end := range []string{"never set", "next request", "stopped", "read deadline set"} {
			t.Run(name+"/"+end, func(t *testing.T) {
				c, h, peer := open()
				if _, err := peer.Write([]byte("abc\n\n")); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 64)
				if _, err := c.Read(buf); err != nil {
					t.Fatal(err)
				}
				switch end {
				case "never set":
					c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				case "next request":
					c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					h.ReadingHead()
					h.NextRequest()
				case "stopped":
					c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					h.ReadingHead()
					h.Stop()
				case "read deadline set":
					h.ReadingHead()
					c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				}
				if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("Read = %v, want the deadline's timeout", err)
				}
				if _, err := peer.Write([]byte("more")); err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if n, err := c.Read(buf); err != nil || string(buf[:n]) != "more" {
					t.Fatalf("Read = %q, %v; want the next bytes", buf[:n], err)
				}
			})
		}
	}
}

func TestHasBareBlank(t *testing.T) {
	for _, tc := range []struct {
		before, b string
		want      bool
	}{
		{"", "POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\nab", true},
		{"", "GET / HTTP/1.1\r\nHost: a\r\n\nGET", true},
		{"", "GET / HTTP/1.1\r\nHost: a\n\r\nx", true},
		{"", "GET / HTTP/1.1\r\nHost: a\r\n\r\nab\n\n", true}, // a CRLF head first: not stuck, but the bytes do hold one
		{"", "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n", false},
		{"st: a\n", "\nab", true}, // the blank line begins in the bytes before
		{"st: a", "\r\n\nab", true},
		{"\r\n", "\r\nab", false},
		{"", "", false},
	} {
		var h HeadWatch
		h.saw([]byte(tc.before))
		if got := hasBareBlank(h.tail, []byte(tc.b)); got != tc.want {
			t.Errorf("%q then %q: %v, want %v", tc.before, tc.b, got, tc.want)
		}
	}
}

// TestHeadWatchBehindABuffer: a server reading through bufio, as fasthttp
// does. A head that ended with a bare-LF blank line and has more bytes
// after it (a body) is refused when the reader asks for more, as long as
// the reader did not move what it holds; a read that came during a body is
// never searched.
func TestHeadWatchBehindABuffer(t *testing.T) {
	const head = "POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\nab"
	for _, tc := range []struct {
		desc       string
		beforeRead func(h *HeadWatch)     // before the bytes are read
		afterRead  func(br *bufio.Reader) // after
		want       error
	}{
		{desc: "read between requests", want: ErrBareLFHead},
		{desc: "read during the head", beforeRead: (*HeadWatch).ReadingHead, want: ErrBareLFHead},
		{desc: "read during a body", beforeRead: (*HeadWatch).Stop, want: os.ErrDeadlineExceeded},
		{desc: "bytes moved by the reader", afterRead: func(br *bufio.Reader) { br.Discard(1) }, want: os.ErrDeadlineExceeded},
	} {
		for name, open := range headConns(t) {
			t.Run(name+"/"+tc.desc, func(t *testing.T) {
				c, h, peer := open()
				br := bufio.NewReaderSize(c, 4096)
				if _, err := peer.Write([]byte(head)); err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				if tc.beforeRead != nil {
					tc.beforeRead(h)
				}
				if _, err := br.Peek(len(head)); err != nil {
					t.Fatal(err)
				}
				if tc.afterRead != nil {
					tc.afterRead(br)
				}
				h.ReadingHead()
				if _, err := br.Peek(br.Buffered() + 1); !errors.Is(err, tc.want) {
					t.Fatalf("Peek for more = %v, want %v", err, tc.want)
				}
			})
		}
	}
}

// FuzzHasBareBlank: the scan of a read's bytes after those of earlier reads
// agrees with a plain search of all of them for a blank line in bare-LF form
// that ends in the read's bytes.
func FuzzHasBareBlank(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\nHost: a"), []byte("\n\nab"))
	f.Add([]byte("x\r"), []byte("\n\n"))
	f.Add([]byte(""), []byte("a\n\r\n"))
	f.Fuzz(func(t *testing.T, earlier, b []byte) {
		var h HeadWatch
		h.saw(earlier)
		all := append(append([]byte{}, earlier...), b...)
		want := false
		for end := len(earlier); end < len(all) && !want; end++ {
			w := all[max(0, end-3) : end+1]
			for _, pattern := range []string{"\n\n", "\r\n\n", "\n\r\n"} {
				if bytes.HasSuffix(w, []byte(pattern)) && len(w) > len(pattern) && lineByte(w[len(w)-len(pattern)-1]) {
					want = true
				}
			}
		}
		if got := hasBareBlank(h.tail, b); got != want {
			t.Fatalf("%q then %q: %v, want %v", earlier, b, got, want)
		}
	})
}
