package main

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePorts(t *testing.T) {
	tests := []struct {
		desc    string
		n       int
		wantErr bool
	}{
		{desc: "one port", n: 1},
		{desc: "several distinct ports", n: 8},
		{desc: "zero rejected", n: 0, wantErr: true},
		{desc: "negative rejected", n: -3, wantErr: true},
		{desc: "too many rejected", n: 1001, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ports, err := freePorts(tc.n)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("freePorts(%d) = %v, want an error", tc.n, ports)
				}
				return
			}
			if err != nil {
				t.Fatalf("freePorts(%d): %v", tc.n, err)
			}
			if len(ports) != tc.n {
				t.Fatalf("got %d ports, want %d", len(ports), tc.n)
			}
			seen := map[int]bool{}
			for _, p := range ports {
				if p <= 0 || p > 65535 || seen[p] {
					t.Fatalf("bad or repeated port %d in %v", p, ports)
				}
				seen[p] = true
				// The port must be bindable again once freePorts returns.
				l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(p))
				if err != nil {
					t.Fatalf("port %d not free after return: %v", p, err)
				}
				_ = l.Close()
			}
		})
	}
}
