package config

import "testing"

func TestCheckHostname(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"*", true},
		{"example.com", true},
		{"*.Example.COM", true},
		{"a-b.c", true},
		{"under_score.com", true},
		{"example.com.", true},
		{"*.example.com.", true},
		{"example.com..", false},
		{"*.*.example.com", false},
		{"-edge.com", false},
		{"edge-.com", false},
		{"a..b", false},
		{"*.", false},
		{"a.*.b", false},
		{"**.b", false},
		{"", false},
	} {
		if err := CheckHostname(tc.in); (err == nil) != tc.ok {
			t.Errorf("CheckHostname(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
