package policy

import (
	"bytes"
	"path"
	"strings"
	"testing"

	"github.com/relaygate/gateway/codec/hexdigit"
)

func TestNormalizePath(t *testing.T) {
	tests := []struct {
		desc string
		in   string
		want string
		err  error
	}{
		{desc: "root", in: "/", want: "/"},
		{desc: "ordinary path", in: "/a/b/c", want: "/a/b/c"},
		{desc: "trailing slash kept", in: "/a/b/", want: "/a/b/"},
		{desc: "empty path", in: "", want: "/"},
		{desc: "no leading slash", in: "a/b", want: "/a/b"},
		{desc: "repeated slashes", in: "//a//b", want: "/a/b"},
		{desc: "only slashes", in: "////", want: "/"},
		{desc: "repeated trailing slashes", in: "/a///", want: "/a/"},
		{desc: "dot segment", in: "/a/./b", want: "/a/b"},
		{desc: "dot-dot segment", in: "/a/b/../c", want: "/a/c"},
		{desc: "dot-dot above the root", in: "/a/../../b", want: "/b"},
		{desc: "dot-dot at the root", in: "/..", want: "/"},
		{desc: "dot at the root", in: "/.", want: "/"},
		{desc: "final dot", in: "/a/b/.", want: "/a/b/"},
		{desc: "final dot-dot", in: "/a/b/..", want: "/a/"},
		{desc: "final dot-dot and slash", in: "/a/b/../", want: "/a/"},
		{desc: "dot-dot after an empty segment", in: "/a//../b", want: "/b"},
		{desc: "dots that are not segments", in: "/.a/a./..b/b../.../a.b", want: "/.a/a./..b/b../.../a.b"},
		// RFC 3986 5.2.4 and the paths of 5.4's examples (base /b/c/d;p
		// merged with the reference).
		{desc: "RFC 3986 5.2.4 first example", in: "/a/b/c/./../../g", want: "/a/g"},
		{desc: "RFC 3986 5.2.4 second example", in: "mid/content=5/../6", want: "/mid/6"},
		{desc: "RFC 3986 5.4.1 ./g", in: "/b/c/./g", want: "/b/c/g"},
		{desc: "RFC 3986 5.4.1 .", in: "/b/c/.", want: "/b/c/"},
		{desc: "RFC 3986 5.4.1 ./", in: "/b/c/./", want: "/b/c/"},
		{desc: "RFC 3986 5.4.1 ..", in: "/b/c/..", want: "/b/"},
		{desc: "RFC 3986 5.4.1 ../", in: "/b/c/../", want: "/b/"},
		{desc: "RFC 3986 5.4.1 ../g", in: "/b/c/../g", want: "/b/g"},
		{desc: "RFC 3986 5.4.1 ../..", in: "/b/c/../..", want: "/"},
		{desc: "RFC 3986 5.4.1 ../../g", in: "/b/c/../../g", want: "/g"},
		{desc: "RFC 3986 5.4.2 ../../../g", in: "/b/c/../../../g", want: "/g"},
		{desc: "RFC 3986 5.4.2 /./g", in: "/./g", want: "/g"},
		{desc: "RFC 3986 5.4.2 /../g", in: "/../g", want: "/g"},
		{desc: "RFC 3986 5.4.2 g.", in: "/b/c/g.", want: "/b/c/g."},
		{desc: "RFC 3986 5.4.2 .g", in: "/b/c/.g", want: "/b/c/.g"},
		{desc: "RFC 3986 5.4.2 g..", in: "/b/c/g..", want: "/b/c/g.."},
		{desc: "RFC 3986 5.4.2 ..g", in: "/b/c/..g", want: "/b/c/..g"},
		{desc: "RFC 3986 5.4.2 ./../g", in: "/b/c/./../g", want: "/b/g"},
		{desc: "RFC 3986 5.4.2 ./g/.", in: "/b/c/./g/.", want: "/b/c/g/"},
		{desc: "RFC 3986 5.4.2 g/./h", in: "/b/c/g/./h", want: "/b/c/g/h"},
		{desc: "RFC 3986 5.4.2 g/../h", in: "/b/c/g/../h", want: "/b/c/h"},
		{desc: "RFC 3986 5.4.2 g;x=1/./y", in: "/b/c/g;x=1/./y", want: "/b/c/g;x=1/y"},
		{desc: "RFC 3986 5.4.2 g;x=1/../y", in: "/b/c/g;x=1/../y", want: "/b/c/y"},
		{desc: "encoded dot-dot", in: "/a/%2e%2e/b", want: "/b"},
		{desc: "encoded dot-dot, upper case", in: "/a/b/%2E%2E", want: "/a/"},
		{desc: "half-encoded dot-dot", in: "/a/.%2e/b", want: "/b"},
		{desc: "encoded dot", in: "/a/%2e/b", want: "/a/b"},
		{desc: "encoded tilde", in: "/%7Euser", want: "/~user"},
		{desc: "encoded tilde, lower case", in: "/%7euser", want: "/~user"},
		{desc: "encoded letters, digits and marks", in: "/%41%7a%30%2D%5f", want: "/Az0-_"},
		{desc: "reserved escape upper-cased", in: "/a%3fb%3a%20%c3%a9", want: "/a%3Fb%3A%20%C3%A9"},
		{desc: "encoded percent stays encoded", in: "/a%252Fb", want: "/a%252Fb"},
		{desc: "encoded NUL stays encoded", in: "/a%00", want: "/a%00"},
		{desc: "reserved characters as they are", in: "/a:b@c!$&'()*+,;=", want: "/a:b@c!$&'()*+,;="},
		{desc: "non-ASCII bytes as they are", in: "/\xc3\xa9", want: "/\xc3\xa9"},
		{desc: "encoded slash refused", in: "/a%2Fb", err: errPathEncodedSlash},
		{desc: "encoded slash, lower case, refused", in: "/a%2fb", err: errPathEncodedSlash},
		{desc: "encoded backslash refused", in: "/a%5Cb", err: errPathEncodedSlash},
		{desc: "encoded backslash, lower case, refused", in: "/a%5cb", err: errPathEncodedSlash},
		{desc: "backslash refused", in: "/a\\b", err: errPathBackslash},
		{desc: "backslash dot-dot refused", in: "/a/..\\..\\b", err: errPathBackslash},
		{desc: "escape without digits refused", in: "/a%", err: errPathBadEscape},
		{desc: "escape cut short refused", in: "/a%4", err: errPathBadEscape},
		{desc: "escape with a non-hex digit refused", in: "/a%4g", err: errPathBadEscape},
		{desc: "escape built of escapes refused", in: "/%%32%65", err: errPathBadEscape},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			prefix := []byte("http://h")
			got, err := AppendNormalizedPath(prefix, []byte(tc.in))
			if err != tc.err {
				t.Fatalf("AppendNormalizedPath(%q): error %v, want %v", tc.in, err, tc.err)
			}
			if tc.err != nil {
				if string(got) != "http://h" {
					t.Fatalf("AppendNormalizedPath(%q) refused but returned %q", tc.in, got)
				}
				if !PathNeedsNormalizing([]byte(tc.in)) {
					t.Fatalf("PathNeedsNormalizing(%q) = false for a path that is refused", tc.in)
				}
				return
			}
			if string(got) != "http://h"+tc.want {
				t.Fatalf("AppendNormalizedPath(%q) = %q, want %q", tc.in, got[len(prefix):], tc.want)
			}
			if needs, want := PathNeedsNormalizing([]byte(tc.in)), tc.in != tc.want; needs != want {
				t.Fatalf("PathNeedsNormalizing(%q) = %v, want %v", tc.in, needs, want)
			}
		})
	}
}

// FuzzNormalizePath: normalizing never panics; its result starts with "/",
// has no empty (but a final one), "." or ".." segment, no escape it would
// change and no slash or backslash in any form; normalizing it again
// changes nothing; PathNeedsNormalizing says false exactly for the paths
// normalizing keeps as they are; and the result names the path that
// path.Clean makes of the input with its escapes in normal form.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"/", "", "/a/b", "//a//b", "/a/./b", "/a/../../b", "/a/%2e%2e/b", "/%7Euser", "/a%2Fb", "/a%5cb",
		"/a\\b", "/a%", "/%%32%65", "/b/c/./../g", "/a/b/..", "/.", "/..", "/a%3fb", "a/b", "/.%2E/x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := AppendNormalizedPath(nil, []byte(in))
		if err != nil {
			if len(out) != 0 {
				t.Fatalf("%q refused (%v) but returned %q", in, err, out)
			}
			if !PathNeedsNormalizing([]byte(in)) {
				t.Fatalf("PathNeedsNormalizing(%q) = false for a path that is refused (%v)", in, err)
			}
			return
		}
		s := string(out)
		if !strings.HasPrefix(s, "/") {
			t.Fatalf("%q -> %q: no leading slash", in, s)
		}
		if strings.Contains(s, "\\") {
			t.Fatalf("%q -> %q: backslash", in, s)
		}
		segs := strings.Split(s[1:], "/")
		for i, seg := range segs {
			if seg == "." || seg == ".." || seg == "" && i < len(segs)-1 {
				t.Fatalf("%q -> %q: segment %d is %q", in, s, i, seg)
			}
		}
		again, err := AppendNormalizedPath(nil, out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		if PathNeedsNormalizing(out) {
			t.Fatalf("PathNeedsNormalizing(%q) = true for a normalized path", out)
		}
		if needs := PathNeedsNormalizing([]byte(in)); !needs && s != in {
			t.Fatalf("PathNeedsNormalizing(%q) = false, yet it normalizes to %q", in, s)
		}
		if want := path.Clean("/" + normalEscapes(in)); path.Clean(s) != want {
			t.Fatalf("%q -> %q, which path.Clean makes %q, want %q", in, s, path.Clean(s), want)
		}
	})
}

// normalEscapes decodes the escapes of unreserved characters and
// upper-cases the others (the fuzz target's reference).
func normalEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && hexdigit.Is(s[i+1]) && hexdigit.Is(s[i+2]) {
			if v := hexdigit.Value(s[i+1])<<4 | hexdigit.Value(s[i+2]); unreserved[v] {
				b.WriteByte(v)
			} else {
				b.WriteString(strings.ToUpper(s[i : i+3]))
			}
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// BenchmarkNormalizePath: an ordinary path costs one scan and nothing else
// (0 allocations); one that needs normalizing is rewritten into a reused
// buffer, also without allocating.
func BenchmarkNormalizePath(b *testing.B) {
	for _, bc := range []struct {
		desc, path string
	}{
		{"ordinary", "/api/v1/users/12345/profile"},
		{"ordinary with escapes", "/api/v1/search/caf%C3%A9%20au%20lait"},
		{"dot segments and slashes", "/api//v1/./users/../users/%7e12345/profile"},
	} {
		b.Run(bc.desc, func(b *testing.B) {
			p := []byte(bc.path)
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				if PathNeedsNormalizing(p) {
					var err error
					if buf, err = AppendNormalizedPath(buf[:0], p); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func TestNormalizePathAllocations(t *testing.T) {
	p := []byte("/api/v1/users/12345/profile")
	q := []byte("/api//v1/./users/../users/%7e12345/profile")
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		if PathNeedsNormalizing(p) {
			t.Fatal("an ordinary path needs normalizing")
		}
		var err error
		if buf, err = AppendNormalizedPath(buf[:0], q); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

// TestNormalizeTarget: a computed target's path is normalized and its query
// kept as it is; a path normalizing refuses is refused.
func TestNormalizeTarget(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/a/b?x=1", "/a/b?x=1", true},
		{"/a/../admin", "/admin", true},
		{"/a/%2e%2e/admin?x=/../y", "/admin?x=/../y", true},
		{"//a/./%7euser?", "/a/~user?", true},
		{"/a/%2Fb", "", false},
		{"/a\\b?q", "", false},
		{"/a%zz", "", false},
	} {
		got, ok := NormalizeTarget(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("NormalizeTarget(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
