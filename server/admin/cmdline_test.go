package admin

import (
	"os"
	"strings"
	"testing"
)

// TestCmdline: /debug/pprof/cmdline shows the command line the caller gives
// (with its secrets hidden), never os.Args whole; without one, the program
// name alone.
func TestCmdline(t *testing.T) {
	tests := []struct {
		desc    string
		cmdline []string
		want    string
	}{
		{"given", []string{"gateway", "-c", "<redacted>"}, "gateway\x00-c\x00<redacted>"},
		{"none", nil, os.Args[0]},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s := startTest(t, Options{AdminAddr: "127.0.0.1:0", Cmdline: tc.cmdline})
			status, body := get(t, "http://"+s.AdminAddr()+"/debug/pprof/cmdline")
			if status != 200 || body != tc.want {
				t.Fatalf("got %d %q, want %q", status, body, tc.want)
			}
			if tc.cmdline == nil && len(os.Args) > 1 && strings.Contains(body, os.Args[1]) {
				t.Fatalf("shows the arguments: %q", body)
			}
		})
	}
}
