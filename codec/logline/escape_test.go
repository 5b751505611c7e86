package logline

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// plainBytes is plainWord's definition, byte by byte.
func plainBytes(b []byte) bool {
	for _, c := range b {
		if !plainByte[c] {
			return false
		}
	}
	return true
}

// TestPlainWord: every byte value at every position, among plain bytes
// and among random ones, is judged as byte by byte.
func TestPlainWord(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(b []byte) {
		t.Helper()
		if got, want := plainWord(binary.LittleEndian.Uint64(b)), plainBytes(b); got != want {
			t.Fatalf("% x: plainWord %v, byte by byte %v", b, got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			check(b)
		}
	}
	for range 200_000 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], r.Uint64())
		// Mostly plain words with one or two odd bytes, where the borrow
		// trick could go wrong.
		for i := range b {
			if r.IntN(4) != 0 {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		check(b[:])
	}
}

func TestLoad64(t *testing.T) {
	s := "0123456789"
	if got, want := load64(s, 2), binary.LittleEndian.Uint64([]byte(s[2:10])); got != want {
		t.Fatalf("string: %x, want %x", got, want)
	}
	if got, want := load64([]byte(s), 1), binary.LittleEndian.Uint64([]byte(s[1:9])); got != want {
		t.Fatalf("bytes: %x, want %x", got, want)
	}
}

// TestPlainString: strings of every length up to a few words, with one
// byte of every value at every position, are judged as byte by byte.
func TestPlainString(t *testing.T) {
	for n := range 26 {
		base := []byte("abcdefghijklmnopqrstuvwxyz"[:n])
		if !plainString(base) || !plainString(string(base)) {
			t.Fatalf("%q: not plain", base)
		}
		for pos := range n {
			for c := range 256 {
				b := append([]byte(nil), base...)
				b[pos] = byte(c)
				want := plainBytes(b)
				if got := plainString(b); got != want {
					t.Fatalf("%q: plainString %v, byte by byte %v", b, got, want)
				}
				if got := plainString(string(b)); got != want {
					t.Fatalf("%q as a string: plainString %v, byte by byte %v", b, got, want)
				}
			}
		}
	}
}
