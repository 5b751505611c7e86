package server

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestHopBitNamesEachHopHeaderAndNothingElse(t *testing.T) {
	for i, name := range hopHeaders {
		for _, variant := range []string{string(name), strings.ToLower(string(name)), strings.ToUpper(string(name))} {
			if got := hopBit([]byte(variant)); got != 1<<i {
				t.Errorf("hopBit(%q) = %b, want %b", variant, got, 1<<i)
			}
		}
	}
	for _, name := range []string{"", "T", "Tx", "Trailed", "Upgrade2", "Connectio", "Connectiox", "Keep-Alivx", "X-Forwarded-For", "Content-Length", "Proxy-Authorizatio", "Proxy-Authenticatx"} {
		if got := hopBit([]byte(name)); got != 0 {
			t.Errorf("hopBit(%q) = %b, want 0", name, got)
		}
	}
}

func TestCleanResponseRemovesHopAndListedFieldsOnly(t *testing.T) {
	var resp fasthttp.Response
	raw := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nconnection: x-private, close\r\nX-Private: 1\r\n" +
		"keep-alive: timeout=5\r\nTE: trailers\r\nProxy-Authenticate: Basic\r\nX-Kept: yes\r\nUpgrade: h2c\r\n\r\n"
	if err := resp.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	cleanResponse(&resp.Header)
	for _, gone := range []string{"Connection", "X-Private", "Keep-Alive", "Te", "Proxy-Authenticate", "Upgrade"} {
		if v := resp.Header.Peek(gone); v != nil {
			t.Errorf("%s: %q survived", gone, v)
		}
	}
	if resp.Header.ConnectionClose() {
		t.Error("the upstream's Connection: close reached the client response")
	}
	if string(resp.Header.Peek("X-Kept")) != "yes" {
		t.Error("X-Kept was removed")
	}
}
