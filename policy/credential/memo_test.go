package credential

import (
	"strings"
	"testing"
)

func TestMemo(t *testing.T) {
	m, err := NewMemo[string]()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewMemo[string]()
	for _, n := range []int{0, 10, 240, 241, 2032, 2033, 16 << 10, 16<<10 + 1} {
		cred := []byte(strings.Repeat("x", n))
		k := m.Key(cred)
		if m.Key(cred) != k {
			t.Fatalf("%d bytes: the key is not stable", n)
		}
		if other.Key(cred) == k {
			t.Fatalf("%d bytes: two memos share a key: the salt is not theirs", n)
		}
		if _, ok := m.Get(k); ok {
			t.Fatalf("%d bytes: found before it was put", n)
		}
		m.Put(k, "v")
		if v, ok := m.Get(k); !ok || v != "v" {
			t.Fatalf("%d bytes: got %q %v", n, v, ok)
		}
		if _, ok := m.Get(m.Key(append(cred, 'y'))); ok {
			t.Fatalf("%d bytes: another credential found the entry", n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { m.Get(m.Key([]byte("Basic dTpw"))) }); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}
