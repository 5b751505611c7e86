package server

import "testing"

func TestReclaimDue(t *testing.T) {
	for _, tc := range []struct {
		desc            string
		base, prev, now int
		want            bool
	}{
		{"a wave still parking", 0, 600, 1600, false},
		{"the wave has ebbed", 0, 1600, 1650, true},
		{"grown too little", 0, 900, 1000, false},
		{"steady churn", 5000, 5010, 4990, false},
		{"growth counted from the low point", 3000, 4100, 4100, true},
		{"fewer parked than before", 2000, 1500, 1000, false},
	} {
		if got := reclaimDue(tc.base, tc.prev, tc.now); got != tc.want {
			t.Errorf("%s: reclaimDue(%d, %d, %d) = %v, want %v", tc.desc, tc.base, tc.prev, tc.now, got, tc.want)
		}
	}
}
