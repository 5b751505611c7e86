package policy

import (
	"bufio"
	"bytes"
	"sort"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// newCtx returns a policy context for a request with the given method, target
// and headers ("Name: value" lines), as the server would set it up: Path is the
// raw path of the target, Host the lower-cased host without port, Scheme http.
func newCtx(method, target string, headers ...string) *Ctx {
	fc := new(fasthttp.RequestCtx)
	fc.Request.Header.SetMethod(method)
	fc.Request.SetRequestURI(target)
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			panic("header without colon: " + h)
		}
		fc.Request.Header.Add(name, strings.TrimSpace(value))
	}
	c := &Ctx{Fast: fc, Scheme: []byte("http")}
	c.Path = rawPath(fc.Request.Header.RequestURI())
	host := fc.Request.Header.Host()
	if h, _, ok := splitAuthority(host); ok {
		host = h
	}
	c.Host = bytes.ToLower(host)
	return c
}

// rawPath is the path of a request target, without the query.
func rawPath(target []byte) []byte {
	if i := bytes.Index(target, []byte("://")); i >= 0 {
		rest := target[i+3:]
		j := bytes.IndexByte(rest, '/')
		if j < 0 {
			return []byte("/")
		}
		target = rest[j:]
	}
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	return target
}

// headerLines returns every "Name: value" line of a request header as fasthttp
// would send it, sorted, limited to the given names (all when none given).
func requestLines(t *testing.T, h *fasthttp.RequestHeader, names ...string) []string {
	t.Helper()
	return filterLines(string(h.Header()), names)
}

func responseLines(t *testing.T, h *fasthttp.ResponseHeader, names ...string) []string {
	t.Helper()
	return filterLines(string(h.Header()), names)
}

func filterLines(raw string, names []string) []string {
	var out []string
	for i, line := range strings.Split(raw, "\r\n") {
		if i == 0 || line == "" {
			continue // request or status line
		}
		name, _, _ := strings.Cut(line, ":")
		keep := len(names) == 0
		for _, n := range names {
			if strings.EqualFold(n, name) {
				keep = true
			}
		}
		if keep {
			out = append(out, line)
		}
	}
	sort.Strings(out)
	return out
}

// wireRequest returns the request as fasthttp would write it upstream.
func wireRequest(t *testing.T, req *fasthttp.Request) string {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := req.Write(w); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// wireResponse returns the response as fasthttp would write it.
func wireResponse(t *testing.T, resp *fasthttp.Response) string {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := resp.Write(w); err != nil {
		t.Fatalf("writing response: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func resultName(r Result) string {
	if r == Done {
		return "Done"
	}
	return "Continue"
}
