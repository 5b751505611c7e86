package backend

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// errWouldWait stands for an upstream that sent everything and keeps its
// connection open: a read past the bytes would wait.
var errWouldWait = errors.New("read past the upstream's bytes: it would wait")

// pieces returns s in reads of at most n bytes, then errWouldWait.
type pieces struct {
	s string
	n int
}

func (p *pieces) Read(b []byte) (int, error) {
	if p.s == "" {
		return 0, errWouldWait
	}
	k := copy(b[:min(len(b), p.n)], p.s)
	p.s = p.s[k:]
	return k, nil
}

// TestAwaitHead decides where a response head ends from the bytes as they
// arrive, in one read or split anywhere: a bare-LF blank line is refused
// without waiting for more, a CRLF one lets fasthttp's parser read the head
// and nothing after it is searched.
func TestAwaitHead(t *testing.T) {
	tests := []struct {
		desc  string
		bytes string
		want  error // nil: fasthttp then reads the head
	}{
		{"CRLF head", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", nil},
		{"CRLF head, bare LF blank lines in the body", "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\na\n\nb\n\n", nil},
		{"bare LF lines, CRLF blank line", "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok", nil},
		{"status line only", "HTTP/1.1 204 No Content\r\n\r\n", nil},
		{"bare LF head", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", ErrBareLFHead},
		{"bare LF head, CRLF CRLF later", "HTTP/1.1 200 OK\nContent-Length: 6\n\nok\r\n\r\n", ErrBareLFHead},
		{"bare LF status line only", "HTTP/1.1 204 No Content\n\n", ErrBareLFHead},
		{"CR LF LF", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok", ErrBareLFHead},
		{"LF CR LF", "HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok", ErrBareLFHead},
		{"incomplete head", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", errWouldWait},
		{"nothing", "", io.EOF},
	}
	for _, tc := range tests {
		for _, n := range []int{1, 2, 3, 5, 1 << 20} {
			t.Run(tc.desc+"/reads of "+itoa(n), func(t *testing.T) {
				br := bufio.NewReaderSize(&pieces{s: tc.bytes, n: n}, 4096)
				err := AwaitHead(br)
				switch {
				case tc.want == nil && err != nil:
					t.Fatalf("AwaitHead = %v", err)
				case tc.want == io.EOF && err != io.EOF:
					// fasthttp's parser reports a connection closed or
					// failing before any byte so; stale connections are
					// told by it.
					t.Fatalf("AwaitHead = %v, want io.EOF", err)
				case tc.want != nil && !errors.Is(err, tc.want):
					t.Fatalf("AwaitHead = %v, want %v", err, tc.want)
				}
				if err != nil {
					return
				}
				var h fasthttp.ResponseHeader
				if err := h.Read(br); err != nil {
					t.Fatalf("fasthttp's parser after AwaitHead: %v", err)
				}
			})
		}
	}
}

// TestAwaitHeadFullBuffer leaves a head too large for the buffer to
// fasthttp's parser, which refuses it.
func TestAwaitHeadFullBuffer(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 8192) + "\r\n\r\n"
	br := bufio.NewReaderSize(&pieces{s: head, n: 1000}, 4096)
	if err := AwaitHead(br); err != nil {
		t.Fatalf("AwaitHead = %v", err)
	}
	var h fasthttp.ResponseHeader
	if err := h.Read(br); err == nil {
		t.Fatal("fasthttp read a head larger than its buffer")
	}
}

func itoa(n int) string {
	if n >= 1<<20 {
		return "all"
	}
	return string(rune('0' + n))
}

// BenchmarkAwaitHead measures the search for the end of a typical response
// head, which every exchange now does before fasthttp parses the head.
func BenchmarkAwaitHead(b *testing.B) {
	const resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nDate: Mon, 23 Nov 2026 10:00:00 GMT\r\nServer: upstream\r\nCache-Control: no-store\r\nX-Request-Id: 0123456789abcdef\r\n\r\n{}"
	src := strings.NewReader(resp)
	br := bufio.NewReaderSize(src, 8192)
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(resp)
		br.Reset(src)
		if err := AwaitHead(br); err != nil {
			b.Fatal(err)
		}
	}
}
