package server

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// readRequestHead parses a request head as the server would; a head it
// refuses fails the test.
func readRequestHead(t *testing.T, raw string) *fasthttp.RequestHeader {
	t.Helper()
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	return &h
}

// TestBodyReadConfig: only a request that has a body moves the read deadline
// out to bodyIdleTimeout; a bodiless one keeps the head's.
func TestBodyReadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		want       bool
	}{
		{"no body", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"empty length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", false},
		{"length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", true},
		{"chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := readRequestHead(t, tc.head)
			got := bodyReadConfig(h).ReadTimeout == time.Duration(bodyIdleTimeout.Load())
			if got != tc.want {
				t.Fatalf("deadline moved = %v, want %v (ContentLength %d)", got, tc.want, h.ContentLength())
			}
		})
	}
}
