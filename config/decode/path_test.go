package decode

import (
	"reflect"
	"testing"
)

func TestJoinKey(t *testing.T) {
	cases := []struct {
		desc, parent, key, want string
	}{
		{"field at root", "", "binds", "binds"},
		{"nested field", "binds[0]", "port", "binds[0].port"},
		{"dash and digits are bare", "headers", "X-Foo_2", "headers.X-Foo_2"},
		{"dot is quoted", "headers", "a.b", `headers["a.b"]`},
		{"slash is quoted", "routes", "/v1", `routes["/v1"]`},
		{"empty key is quoted", "m", "", `m[""]`},
		{"quote is escaped", "m", `a"b`, `m["a\"b"]`},
		{"quoted key at root", "", "a b", `["a b"]`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := joinKey(tc.parent, tc.key); got != tc.want {
				t.Errorf("joinKey(%q, %q) = %q, want %q", tc.parent, tc.key, got, tc.want)
			}
		})
	}
}

func TestJoinRel(t *testing.T) {
	cases := []struct {
		desc, base, rel, want string
	}{
		{"empty rel", "a", "", "a"},
		{"field", "a", "b.c", "a.b.c"},
		{"index", "a", "[1].c", "a[1].c"},
		{"at root", "", "b", "b"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := joinRel(tc.base, tc.rel); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseRel(t *testing.T) {
	cases := []struct {
		desc string
		rel  string
		want []segment
		ok   bool
	}{
		{"empty", "", nil, true},
		{"fields and index", "a.b[2].c", []segment{{key: "a"}, {key: "b"}, {index: 2, isIndex: true}, {key: "c"}}, true},
		{"quoted key", `h["a.b"].c`, []segment{{key: "h"}, {key: "a.b"}, {key: "c"}}, true},
		{"quoted key with bracket", `h["a]"]`, []segment{{key: "h"}, {key: "a]"}}, true},
		{"leading index", "[0]", []segment{{index: 0, isIndex: true}}, true},
		{"unclosed bracket", "a[1", nil, false},
		{"bad index", "a[x]", nil, false},
		{"negative index", "a[-1]", nil, false},
		{"trailing dot", "a.", nil, false},
		{"unterminated quote", `a["x]`, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := parseRel(tc.rel)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseRel(%q) = %+v, %v; want %+v, %v", tc.rel, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestClosest(t *testing.T) {
	names := []string{"hostnames", "port", "protocol", "weight", "TCP"}
	cases := []struct {
		desc, in, want string
	}{
		{"one deletion", "hostnmes", "hostnames"},
		{"transposition", "wieght", "weight"},
		{"case only", "PORT", "port"},
		{"too far", "hosts", ""},
		{"short words allow fewer edits", "UDP", ""},
		{"exact match is not a suggestion", "port", ""},
		{"two edits in a long word", "protocal1", "protocol"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := closest(tc.in, names); got != tc.want {
				t.Errorf("closest(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
