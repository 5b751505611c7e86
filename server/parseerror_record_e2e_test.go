package server

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestParseErrorRecordInventsNoRequest: a request fasthttp fails before the
// handler runs is recorded with the method and path it had when fasthttp
// kept its head (a Host it cannot make a URI of), and with neither when it
// did not (it resets the request): a head too large (431), a malformed
// head, a body cut short within the part read before the handler (a POST
// declaring 50000 bytes, 300 sent, then the client's FIN). Those used to
// be recorded as GET /, which is what fasthttp's empty header answers: a
// request that was no GET and had no such path.
func TestParseErrorRecordInventsNoRequest(t *testing.T) {
	tests := []struct {
		desc, send   string
		want         int
		method, path string
	}{
		{desc: "body cut short before the handler", send: "POST /to1 HTTP/1.1\r\nHost: a\r\nContent-Length: 50000\r\n\r\n" + strings.Repeat("b", 300), want: 400},
		{desc: "head too large", send: "PUT /big HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("x", 40<<10) + "\r\n\r\n", want: 431},
		{desc: "malformed head", send: "DELETE /m HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", want: 400},
		{desc: "head kept, its Host refused", send: "DELETE /kept?q=1 HTTP/1.1\r\nHost: a:8o\r\n\r\n", want: 400, method: "DELETE", path: "/kept"},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(closedAddr(t)), nil, tr)
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					logged := len(tg.accessLogs().FilterMessage("request").All())
					c, br := dialRaw(t, tg.addr(3000))
					if _, err := io.WriteString(c, tc.send); err != nil {
						t.Fatal(err)
					}
					// The FIN cuts the body short; the answer can still be read.
					_ = c.(*net.TCPConn).CloseWrite()
					if m, err := readReply(br, "GET"); err != nil || m.status() != tc.want {
						t.Fatalf("answered %q, %v; want %d", m.line, err, tc.want)
					}
					eventually(t, 5*time.Second, "the access line", func() bool {
						return len(tg.accessLogs().FilterMessage("request").All()) > logged
					})
					f := tg.accessLogs().FilterMessage("request").All()[logged].ContextMap()
					if f["method"] != tc.method || f["path"] != tc.path || f["status"] != int64(tc.want) || f["route"] != "" {
						t.Errorf("recorded method %q path %q status %v route %q; want %q %q %d and no route",
							f["method"], f["path"], f["status"], f["route"], tc.method, tc.path, tc.want)
					}
				})
			}
		})
	}
}
