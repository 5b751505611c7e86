package server

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestTimeoutFiresWhileTheBodyTrickles: a route's requestTimeout and
// backendRequestTimeout bound the exchange while the gateway waits for a
// slow client's request body, not only once its next piece comes. The
// client sends the first piece of its body and holds the rest until it has
// an answer: it gets 504 while it still owes most of its body, and the
// HTTP/1.1 connection closes (the body was never read to its end); over
// HTTP/2 the stream ends. The deadline used to be set only on the upstream
// connection, so it was noticed at the client's next piece (the body idle
// timeout, 60 s, when none came). Each timeout, over HTTP/1.1 and HTTP/2
// upstreams, a declared-length, chunked and HTTP/2 body, both transports;
// and on a retry route, where a declared-length body is read whole before
// the first attempt and one of unknown length is recorded as it streams.
func TestTimeoutFiresWhileTheBodyTrickles(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		_, _ = io.WriteString(w, "whole")
	}))
	const (
		total = 60000
		first = 20000
	)
	var routes strings.Builder
	paths := []string{}
	for _, timeout := range []string{"requestTimeout", "backendRequestTimeout"} {
		for _, version := range []string{"HTTP1", "HTTP2"} {
			path := "/" + timeout + "/" + version
			paths = append(paths, path)
			routes.WriteString("    - matches: [{path: {pathPrefix: " + path + "}}]\n" +
				"      policies: {timeout: {" + timeout + ": 300ms}}\n" +
				"      backends: [{host: '${UP}', policies: {http: {version: " + version + "}}}]\n")
		}
	}
	paths = append(paths, "/retry")
	routes.WriteString("    - matches: [{path: {pathPrefix: /retry}}]\n" +
		"      policies: {timeout: {requestTimeout: 300ms}, retry: {attempts: 2, codes: [503]}}\n" +
		"      backends: [{host: '${UP}'}]\n")
	yaml := "binds:\n- port: 3000\n  listeners:\n  - routes:\n" + routes.String()

	rest := strconv.Itoa(total-first) + " bytes of its body"
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, yaml, map[string]string{"UP": up}, tr)
			for _, path := range paths {
				for _, client := range []string{"content-length", "chunked"} {
					t.Run(path+"/HTTP1.1 "+client, func(t *testing.T) {
						t.Parallel()
						c, br := dialRaw(t, tg.addr(3000))
						head := "POST " + path + " HTTP/1.1\r\nHost: a\r\n"
						piece := strings.Repeat("a", first)
						if client == "chunked" {
							head += "Transfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(first, 16) + "\r\n" + piece + "\r\n"
						} else {
							head += "Content-Length: " + strconv.Itoa(total) + "\r\n\r\n" + piece
						}
						if _, err := io.WriteString(c, head); err != nil {
							t.Fatal(err)
						}
						// The rest is sent only once an answer came: none
						// may need it.
						_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
						m, err := readReply(br, "POST")
						if err != nil {
							t.Fatalf("no answer while the client still owed %s: %v", rest, err)
						}
						if m.status() != http.StatusGatewayTimeout {
							t.Fatalf("got %q %q, want 504", m.line, m.body)
						}
						if b, err := br.ReadByte(); !isClosed(err) {
							t.Fatalf("after the answer: byte %q, %v; want the connection closed (its body was not read to its end)", b, err)
						}
					})
				}
				t.Run(path+"/h2c", func(t *testing.T) {
					t.Parallel()
					h := dialH2Raw(t, tg.addr(3000))
					if err := h.request(1, "POST", path, false); err != nil {
						t.Fatal(err)
					}
					if err := h.write(func(fr *http2.Framer) error {
						for off := 0; off < first; off += 10000 { // within the default frame size
							if err := fr.WriteData(1, false, make([]byte, 10000)); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						t.Fatal(err)
					}
					answers := map[uint32]*h2Answer{}
					if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[1] != nil && answers[1].done }); err != nil {
						t.Fatalf("no answer while the client still owed %s: %v", rest, err)
					}
					if a := answers[1]; a.status != "504" {
						t.Fatalf("got status %q (reset %v %v) body %q, want 504", a.status, a.wasReset, a.reset, a.body)
					}
				})
			}
		})
	}
}
