package llm

import (
	"strings"
	"testing"
)

func BenchmarkValid4K(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","messages":[` + strings.Repeat(`{"role":"user","content":"Question about the gateway and its providers, with \"quotes\" and more text to read"},`, 38) + `{"role":"user","content":"x"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(body) {
			b.Fatal("invalid")
		}
	}
}

func TestValidRefusesBadStrings(t *testing.T) {
	for _, s := range []string{`{"a":"\00000000"}`, `{"a":"\0"}`, "{\"a\":\"x\x01y\"}", `{"a":"\u00zz"}`, `["` + strings.Repeat("x", 40) + `\q"]`, `{"a":"open`} {
		if Valid([]byte(s)) {
			t.Errorf("%q passed", s)
		}
	}
	for _, s := range []string{`{"a":"\u00e9\n\"x\""}`, `[1,2]`, `{"a":"` + strings.Repeat("é", 30) + `"}`} {
		if !Valid([]byte(s)) {
			t.Errorf("%q refused", s)
		}
	}
}
