package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestFieldBitNamesEachFieldAndNothingElse(t *testing.T) {
	want := map[string]uint16{"Expect": fieldExpect, "X-Forwarded-For": fieldXFF, "X-Forwarded-Proto": fieldXFP}
	for i, name := range hopHeaders {
		want[string(name)] = 1 << i
	}
	var all uint16
	for name, bit := range want {
		for _, variant := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			if got := fieldBit([]byte(variant)); got != bit {
				t.Errorf("fieldBit(%q) = %b, want %b", variant, got, bit)
			}
		}
		all |= bit
	}
	if all != allFields {
		t.Errorf("the fields' bits make %b, allFields is %b", all, allFields)
	}
	for _, name := range []string{"", "T", "Tx", "Trailed", "Upgrade2", "Connectio", "Connectiox", "Keep-Alivx", "Expecx",
		"X-Forwarded-Fox", "X-Forwarded-Protx", "X-Forwarded-Host", "Content-Length", "Proxy-Authorizatio", "Proxy-Authenticatx"} {
		if got := fieldBit([]byte(name)); got != 0 {
			t.Errorf("fieldBit(%q) = %b, want 0", name, got)
		}
	}
}

// TestRequestFieldsSeesEveryKindOfField: the fields prepareRequest skips
// unless requestFields reports them, wherever fasthttp keeps them.
func TestRequestFieldsSeesEveryKindOfField(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		want       uint16
	}{
		{"none", "Host: a\r\nUser-Agent: x\r\nCookie: a=b\r\n", 0},
		{"connection close (a flag, not a field)", "Host: a\r\nConnection: close\r\n", fieldConnection},
		{"connection tokens", "Host: a\r\nconnection: upgrade, x-a\r\nupgrade: websocket\r\n", fieldConnection | fieldUpgrade},
		{"trailer announcement (end to end, not acted on)", "Host: a\r\nContent-Length: 0\r\nTrailer: X-Sum\r\n", 0},
		{"each other field", "Host: a\r\nProxy-Connection: k\r\nKeep-Alive: 5\r\nProxy-Authorization: b\r\n" +
			"Proxy-Authenticate: c\r\nTE: trailers\r\nExpect: 100-continue\r\nx-forwarded-for: 1.2.3.4\r\nX-Forwarded-Proto: https\r\nContent-Length: 0\r\n",
			allFields &^ (fieldConnection | fieldUpgrade)},
		{"chunked (trailer fields unseen)", "Host: a\r\nTransfer-Encoding: chunked\r\n", allFields},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := readRequestHead(t, "POST / HTTP/1.1\r\n"+tc.head+"\r\n")
			if got := requestFields(h); got != tc.want {
				t.Errorf("requestFields = %011b, want %011b", got, tc.want)
			}
		})
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

// Deleting a field on the way (a hop-by-hop one, one Connection names, one
// a header policy removes) leaves the lines of every other name in their
// order, both ways: fasthttp's Del fills the hole with the last line, and
// `X-A: 1`, `X-A: 2`, `X-A: 3` after a Keep-Alive reached the backend as
// 3, 1, 2 (and an upstream's WWW-Authenticate challenges, its order of
// preference, reached the client turned round).
func TestDeletedFieldsLeaveTheOrderOfTheOthers(t *testing.T) {
	seen := make(chan http.Header, 4)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		// Written sorted by name: A-Drop, Keep-Alive, the challenges, Date.
		w.Header()["Keep-Alive"] = []string{"timeout=5"}
		w.Header()["A-Drop"] = []string{"x"}
		w.Header()["Www-Authenticate"] = []string{"Negotiate", `Basic realm="a"`, `Bearer realm="b"`}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        requestHeaderModifier: {remove: [x-remove]}
        responseHeaderModifier: {remove: [a-drop]}
      backends: [{host: `+up+`}]
`, nil)
	for _, tc := range []struct{ name, fields string }{
		{"hop-by-hop", "Keep-Alive: timeout=5\r\nX-A: 1\r\nX-A: 2\r\nX-A: 3\r\n"},
		{"named by Connection", "Connection: keep-alive, x-hop\r\nX-Hop: 1\r\nX-A: 1\r\nX-B: b\r\nX-A: 2\r\nX-A: 3\r\n"},
		{"removed by a policy", "X-Remove: 1\r\nX-A: 1\r\nX-A: 2\r\nX-Remove: 2\r\nX-A: 3\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tg.addr(3000))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n"+tc.fields+"\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var got http.Header
			select {
			case got = <-seen:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream saw no request")
			}
			if v := got["X-A"]; strings.Join(v, "|") != "1|2|3" {
				t.Errorf("the upstream got X-A %q; want 1, 2, 3 in order", v)
			}
			if v := resp.Header["Www-Authenticate"]; strings.Join(v, "|") != `Negotiate|Basic realm="a"|Bearer realm="b"` {
				t.Errorf("the client got the challenges %q; want them in the upstream's order", v)
			}
			if got.Get("X-Remove") != "" || got.Get("X-Hop") != "" || resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("A-Drop") != "" {
				t.Errorf("a field was not deleted: request %v, response %v", got, resp.Header)
			}
		})
	}
}
