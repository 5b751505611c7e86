package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestAccessLogLines: through a real proxy, each request leaves one line
// in nginx's combined format, with what nginx escapes escaped, and Close
// writes out what is still buffered.
func TestAccessLogLines(t *testing.T) {
	up := serveOn(t, &fasthttp.Server{Handler: echoUpstream})
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := openAccessLog(path)
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := serveOn(t, newServer(up, l))
	stamp := `\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]`
	tests := []struct {
		desc    string
		method  string
		uri     string
		body    string
		headers map[string]string
		want    string // regexp of the whole line
	}{
		{desc: "plain GET", method: "GET", uri: "/small",
			want: `127\.0\.0\.1 - - ` + stamp + ` "GET /small HTTP/1\.1" 200 0 "-" "fasthttp"`},
		{desc: "POST with a body, referer and user agent", method: "POST", uri: "/echo?x=1", body: "hello",
			headers: map[string]string{"Referer": "http://example.com/", "User-Agent": "wrk"},
			want:    `127\.0\.0\.1 - - ` + stamp + ` "POST /echo\?x=1 HTTP/1\.1" 200 5 "http://example\.com/" "wrk"`},
		{desc: "quotes and backslashes escaped", method: "GET", uri: "/a",
			headers: map[string]string{"User-Agent": `say "hi" \o/`},
			want:    `127\.0\.0\.1 - - ` + stamp + ` "GET /a HTTP/1\.1" 200 0 "-" "say \\x22hi\\x22 \\x5Co/"`},
	}
	for _, tc := range tests {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.Header.SetMethod(tc.method)
		req.SetRequestURI("http://" + proxyAddr + tc.uri)
		req.SetBodyString(tc.body)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		if err := fasthttp.Do(&req, &resp); err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(tests) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tests), b)
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if !regexp.MustCompile("^" + tc.want + "$").MatchString(lines[i]) {
				t.Errorf("line %q\nwant %s", lines[i], tc.want)
			}
		})
	}
}

// TestAccessLogFlushesOnItsOwn: without Close, a line reaches the file
// within the flush interval.
func TestAccessLogFlushesOnItsOwn(t *testing.T) {
	up := serveOn(t, &fasthttp.Server{Handler: echoUpstream})
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := openAccessLog(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	proxyAddr := serveOn(t, newServer(up, l))
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("http://" + proxyAddr + "/small")
	if err := fasthttp.Do(&req, &resp); err != nil {
		t.Fatal(err)
	}
	bound := accessLogFlushInterval + 5*time.Second
	for deadline := time.Now().Add(bound); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), `"GET /small HTTP/1.1" 200`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line in the file within %v", bound)
		}
	}
}

// TestAppendEscaped: what nginx writes as \xHH.
func TestAppendEscaped(t *testing.T) {
	tests := []struct{ desc, in, want string }{
		{"printable", "GET /a?b=c", "GET /a?b=c"},
		{"quote and backslash", `"\`, `\x22\x5C`},
		{"control and high bytes", "a\tb\x7f\xff", `a\x09b\x7F\xFF`},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := string(appendEscaped(nil, []byte(tc.in))); got != tc.want {
				t.Errorf("appendEscaped(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// BenchmarkAccessLogWrite: one combined line into the buffer.
func BenchmarkAccessLogWrite(b *testing.B) {
	l, err := openAccessLog(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/small")
	ctx.Request.Header.Set("User-Agent", "wrk")
	ctx.Response.SetBodyString(strings.Repeat("x", 100))
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		l.write(&ctx, now)
	}
}
