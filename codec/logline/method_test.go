package logline

import "testing"

// TestMethod: standard methods come back as constants without allocating;
// others as copies that outlive the buffer they came from.
func TestMethod(t *testing.T) {
	for _, m := range []string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE"} {
		buf := []byte(m)
		if got := Method(buf); got != m {
			t.Fatalf("Method(%q) = %q", m, got)
		}
		if n := testing.AllocsPerRun(100, func() { _ = Method(buf) }); n != 0 {
			t.Errorf("Method(%q) allocates %v times", m, n)
		}
	}
	buf := []byte("PROPFIND")
	got := Method(buf)
	copy(buf, "XXXXXXXX")
	if got != "PROPFIND" {
		t.Fatalf("a non-standard method changed with its buffer: %q", got)
	}
}
