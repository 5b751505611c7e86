package policy

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// A deleted field leaves every other name's lines in their order, wherever
// it stood and however many lines it had; a field fasthttp keeps apart is
// deleted as Del deletes it.
func TestDelRequestHeaderKeepsTheOrderOfTheOthers(t *testing.T) {
	for _, tc := range []struct {
		name, head, del, want string
	}{
		{"before a list", "Keep-Alive: 5\r\nX-A: 1\r\nX-A: 2\r\nX-A: 3\r\n", "Keep-Alive", "X-A: 1|X-A: 2|X-A: 3"},
		{"inside a list", "X-A: 1\r\nX-Del: x\r\nX-A: 2\r\nX-B: 1\r\nX-A: 3\r\nX-B: 2\r\n", "X-Del", "X-A: 1|X-A: 2|X-B: 1|X-A: 3|X-B: 2"},
		{"on several lines", "X-Del: 1\r\nX-A: 1\r\nX-Del: 2\r\nX-A: 2\r\nX-A: 3\r\nX-Del: 3\r\n", "x-del", "X-A: 1|X-A: 2|X-A: 3"},
		{"a list before it too", "X-A: 0\r\nX-Z: z\r\nX-Del: 1\r\nX-A: 1\r\nX-A: 2\r\n", "X-Del", "X-A: 0|X-Z: z|X-A: 1|X-A: 2"},
		{"no list after it", "X-A: 1\r\nX-A: 2\r\nX-Del: 1\r\nX-B: 1\r\n", "X-Del", "X-A: 1|X-A: 2|X-B: 1"},
		{"last", "X-A: 1\r\nX-A: 2\r\nX-Del: 1\r\n", "X-Del", "X-A: 1|X-A: 2"},
		{"absent", "X-A: 1\r\nX-A: 2\r\n", "X-Del", "X-A: 1|X-A: 2"},
		{"connection and a list", "Connection: keep-alive\r\nX-A: 1\r\nX-A: 2\r\nX-A: 3\r\n", "Connection", "X-A: 1|X-A: 2|X-A: 3"},
		{"a list after a kept field", "X-Del: 1\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nX-A: 2\r\n", "X-Del", "Transfer-Encoding: chunked|X-A: 1|X-A: 2"},
		{"kept apart", "Content-Type: a/b\r\nX-A: 1\r\nX-A: 2\r\n", "Content-Type", "X-A: 1|X-A: 2"},
		{"many lines after it", "X-Del: 1\r\n" + strings.Repeat("X-B: b\r\n", 40) + "X-A: 1\r\nX-A: 2\r\n", "X-Del", strings.Repeat("X-B: b|", 40) + "X-A: 1|X-A: 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h fasthttp.RequestHeader
			if err := h.Read(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\n" + tc.head + "\r\n"))); err != nil {
				t.Fatal(err)
			}
			DelRequestHeader(&h, []byte(tc.del))
			if got := lines(h.All()); got != tc.want {
				t.Fatalf("after deleting %s:\n got %s\nwant %s", tc.del, got, tc.want)
			}
		})
	}
}

func TestDelResponseHeaderKeepsTheOrderOfTheOthers(t *testing.T) {
	var h fasthttp.ResponseHeader
	head := "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nKeep-Alive: 5\r\nWWW-Authenticate: Negotiate\r\nWWW-Authenticate: Basic realm=\"x\"\r\nDate: d\r\n\r\n"
	if err := h.Read(bufio.NewReader(strings.NewReader(head))); err != nil {
		t.Fatal(err)
	}
	DelResponseHeader(&h, []byte("Keep-Alive"))
	var got []string
	for _, v := range h.PeekAll("WWW-Authenticate") {
		got = append(got, string(v))
	}
	if want := []string{"Negotiate", `Basic realm="x"`}; strings.Join(got, "|") != strings.Join(want, "|") || h.Peek("Keep-Alive") != nil || string(h.Peek("Date")) != "d" {
		t.Fatalf("challenges %q, Keep-Alive %q, Date %q", got, h.Peek("Keep-Alive"), h.Peek("Date"))
	}
}

func lines(all func(func([]byte, []byte) bool)) string {
	var out []string
	for k, v := range all {
		if string(k) == "Host" || string(k) == "Content-Type" && len(v) == 0 {
			continue
		}
		out = append(out, string(k)+": "+string(v))
	}
	return strings.Join(out, "|")
}

// The check that finds nothing to move allocates nothing.
func TestDelRequestHeaderAllocations(t *testing.T) {
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nKeep-Alive: 5\r\nX-B: 2\r\n\r\n"))); err != nil {
		t.Fatal(err)
	}
	name := []byte("Keep-Alive")
	allocs := testing.AllocsPerRun(100, func() {
		DelRequestHeader(&h, name)
		h.SetBytesKV(name, []byte("5"))
	})
	var r fasthttp.ResponseHeader
	r.SetBytesKV(name, []byte("5"))
	r.Set("X-B", "2")
	allocs += testing.AllocsPerRun(100, func() {
		DelResponseHeader(&r, name)
		r.SetBytesKV(name, []byte("5"))
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations", allocs)
	}
}

// FuzzDelRequestHeader: whatever the header and the name, the name is gone
// and every other name keeps its values in their order.
func FuzzDelRequestHeader(f *testing.F) {
	f.Add("Keep-Alive: 5\r\nX-A: 1\r\nX-A: 2\r\nX-A: 3\r\n", "Keep-Alive")
	f.Add("X-A: 0\r\nX-Z: z\r\nX-Del: 1\r\nX-A: 1\r\nX-Z: y\r\nX-A: 2\r\nX-Del: 2\r\n", "x-del")
	f.Add("Connection: a\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nX-A: 2\r\n", "Connection")
	f.Fuzz(func(t *testing.T, fields, name string) {
		var h fasthttp.RequestHeader
		if h.Read(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\n"+fields+"\r\n"))) != nil || !validToken(name) {
			return
		}
		before := map[string][]string{}
		for k, v := range h.All() {
			before[string(k)] = append(before[string(k)], string(v))
		}
		DelRequestHeader(&h, []byte(name))
		after := map[string][]string{}
		for k, v := range h.All() {
			if strings.EqualFold(string(k), name) {
				t.Fatalf("%s is still there: %q", name, h.Header())
			}
			after[string(k)] = append(after[string(k)], string(v))
		}
		for k, v := range before {
			if strings.EqualFold(k, name) || strings.EqualFold(k, "Connection") && strings.EqualFold(name, "Connection") {
				continue
			}
			if strings.Join(after[k], "\x00") != strings.Join(v, "\x00") {
				t.Fatalf("deleting %s: %s went from %q to %q", name, k, v, after[k])
			}
		}
	})
}
