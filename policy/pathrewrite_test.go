package policy

import (
	"bytes"
	"testing"
)

func TestAppendQuery(t *testing.T) {
	tests := []struct {
		desc, target, want string
	}{
		{desc: "none", target: "/a", want: ""},
		{desc: "query", target: "/a?b=c&d", want: "?b=c&d"},
		{desc: "empty query", target: "/a?", want: "?"},
		{desc: "fragment dropped", target: "/a?b#frag", want: "?b"},
		{desc: "absolute form", target: "http://h/a?b", want: "?b"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := string(appendQuery(nil, []byte(tt.target))); got != tt.want {
				t.Errorf("appendQuery(%q) = %q, want %q", tt.target, got, tt.want)
			}
		})
	}
}

// FuzzPrefixRewrite checks prefix replacement never panics and, when it
// succeeds, yields an absolute path that ends with the unmatched rest.
func FuzzPrefixRewrite(f *testing.F) {
	f.Add("/foo/bar", "/foo", "/")
	f.Add("/foo", "/foo/", "/v1/")
	f.Add("/apiary", "/api", "/v1")
	f.Add("x", "/", "/v1")
	f.Fuzz(func(t *testing.T, path, matched, prefix string) {
		if prefix == "" || prefix[0] != '/' {
			return
		}
		r := pathRewrite{kind: pathPrefix, value: []byte(prefix)}
		out, ok := r.appendPath([]byte("keep"), []byte(path), []byte(matched))
		if !bytes.HasPrefix(out, []byte("keep")) {
			t.Fatalf("appendPath overwrote dst: %q", out)
		}
		if !ok {
			return
		}
		got := out[len("keep"):]
		if len(got) == 0 || got[0] != '/' {
			t.Fatalf("appendPath(%q, %q, %q) = %q, want an absolute path", path, matched, prefix, got)
		}
		m := bytes.TrimRight([]byte(matched), "/")
		rest := []byte(path)[len(m):]
		if !bytes.HasSuffix(got, rest) {
			t.Fatalf("appendPath(%q, %q, %q) = %q, lost the rest %q", path, matched, prefix, got, rest)
		}
	})
}
