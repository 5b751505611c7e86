package policy

import "testing"

// Computed request targets and authorities never break the request line
// or the Host field they are written into.
func TestValidOriginFormAndAuthority(t *testing.T) {
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{"/", true}, {"/a/b?c=d&e=%20", true}, {"/a:b@c!$'()*+,;=~", true},
		{"", false}, {"a/b", false}, {"/a b", false}, {"/a\tb", false}, {"/a\r\nHost: x", false},
		{"/a#frag", false}, {"/\x7f", false}, {"/é", false}, {"* ", false},
	} {
		if got := ValidOriginForm(tc.target); got != tc.ok {
			t.Errorf("ValidOriginForm(%q) = %v", tc.target, got)
		}
	}
	for _, tc := range []struct {
		authority string
		ok        bool
	}{
		{"example.com", true}, {"example.com:8080", true}, {"10.0.0.1:80", true}, {"[::1]:443", true}, {"a_b-c.d", true},
		{"", false}, {"a b", false}, {"a/b", false}, {"user@host", false}, {"a?b", false}, {"a#b", false}, {"a\r\nX: y", false}, {"é.com", false},
	} {
		if got := ValidAuthority(tc.authority); got != tc.ok {
			t.Errorf("ValidAuthority(%q) = %v", tc.authority, got)
		}
	}
}

// TestReservedHeader: the fields no external service may set or remove are
// the framing and hop-by-hop ones, in any case; others are the services'.
func TestReservedHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Content-Length": true, "transfer-encoding": true,
		"Connection": true, "connection": true, "Proxy-Connection": true, "Keep-Alive": true,
		"TE": true, "te": true, "Upgrade": true, "UPGRADE": true,
		"Proxy-Authenticate": true, "proxy-authorization": true,
		"Trailer": false, "Host": false, "x-upgrade": false, "tx": false, "Authorization": false, "": false,
	} {
		if got := ReservedHeader(name); got != want {
			t.Errorf("ReservedHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestHeaderBudget: an answer's headers are taken while they fit in
// MaxServiceHeaderBytes; one that does not is refused and leaves the rest
// of the budget to smaller ones.
func TestHeaderBudget(t *testing.T) {
	var b HeaderBudget
	if !b.Take("x-a", string(make([]byte, MaxServiceHeaderBytes-3-10))) {
		t.Fatal("a header within the budget refused")
	}
	if b.Take("x-b", "0123456789") {
		t.Error("a header past the budget taken")
	}
	if !b.Take("x-c", "0123456") || b.Take("x", "") {
		t.Error("what was left of the budget")
	}
	var fresh HeaderBudget
	if fresh.Take("x-big", string(make([]byte, 3<<20))) {
		t.Error("a 3 MB value taken")
	}
}
