package hexdigit

import (
	"strconv"
	"testing"
)

// TestDigits: every byte is a digit exactly when strconv reads it as one,
// with the value strconv gives.
func TestDigits(t *testing.T) {
	for c := 0; c < 256; c++ {
		v, err := strconv.ParseUint(string(rune(c)), 16, 8)
		if Is(byte(c)) != (err == nil && c < 128) {
			t.Fatalf("Is(%q) = %v", rune(c), Is(byte(c)))
		}
		if Is(byte(c)) && uint64(Value(byte(c))) != v {
			t.Fatalf("Value(%q) = %d, want %d", rune(c), Value(byte(c)), v)
		}
	}
}
