package server

import "testing"

func TestAppendHost(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"Example.COM", "example.com", true},
		{"example.com:8080", "example.com", true},
		{"example.com:", "example.com", true}, // RFC 3986: port = *DIGIT
		{"Example.COM.:8080", "example.com", true},
		{".", ".", true},
		{"10.0.0.1:80", "10.0.0.1", true},
		{"[::1]", "[::1]", true},
		{"[FE80::1]:443", "[fe80::1]", true},
		{"a_b-c.~!$&'()*+,;=%41", "a_b-c.~!$&'()*+,;=%41", true},
		{"::", "", false},
		{"a:b:80", "", false},
		{"a:8o", "", false},
		{"a:-1", "", false},
		{"a/b", "", false},
		{"a b", "", false},
		{"a@b", "", false},
		{"[::1", "", false},
		{"[::1]x", "", false},
		{"[::1]:x", "", false},
		{"[::[1]", "", false},
		{"a]b", "", false},
		{"\x00", "", false},
		{"\xff", "", false},
	} {
		got, ok := appendHost([]byte("pre"), []byte(tc.in))
		if ok != tc.ok || string(got) != "pre"+tc.want {
			t.Errorf("appendHost(%q) = %q, %v; want %q, %v", tc.in, got[3:], ok, tc.want, tc.ok)
		}
	}
}
