package logline

import (
	"math"
	"strconv"
	"testing"
)

// TestAppendInt: appendInt writes what strconv does, around every length
// and at the ends of int64.
func TestAppendInt(t *testing.T) {
	vals := []int64{0, 1, -1, 9, 10, 11, 99, 100, 101, 999, 1000, 51234, 65535, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for p := int64(1); p <= 1e18; p *= 10 {
		vals = append(vals, p-1, p, p+1, -p, -(p - 1))
	}
	for _, v := range vals {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Errorf("appendInt(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestAppendFraction: the digits of a fraction of a second, without the
// zeros it ends with.
func TestAppendFraction(t *testing.T) {
	tests := []struct {
		nanos uint32
		want  string
	}{
		{1, ".000000001"}, {87000, ".000087"}, {100000000, ".1"}, {999999999, ".999999999"},
		{123456789, ".123456789"}, {120000000, ".12"}, {500, ".0000005"},
	}
	for _, tc := range tests {
		if got := string(appendFraction(nil, tc.nanos)); got != tc.want {
			t.Errorf("appendFraction(%d) = %q, want %q", tc.nanos, got, tc.want)
		}
	}
}

// FuzzAppendInt holds appendInt and appendSeconds to strconv.
func FuzzAppendInt(f *testing.F) {
	for _, v := range []int64{0, 7, -42, 1e9 + 87000, math.MinInt64, math.MaxInt64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		if got, want := string(appendInt(nil, v)), strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendInt(%d) = %q, want %q", v, got, want)
		}
		if n := v % 1e9; n > 0 {
			want := strconv.FormatFloat(float64(n)/1e9, 'f', -1, 64)[1:]
			if got := string(appendFraction(nil, uint32(n))); got != want {
				t.Fatalf("appendFraction(%d) = %q, want %q", n, got, want)
			}
		}
	})
}
