package server

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// TestValidKeyValues: every key and string of an attribute, nested ones
// too, is made UTF-8; valid attributes come back as they were, without an
// allocation.
func TestValidKeyValues(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out attribute.KeyValue
	}{
		{"string", attribute.String("k", "a\xffb"), attribute.String("k", "a\uFFFDb")},
		{"key", attribute.String("k\xff", "v"), attribute.String("k\uFFFD", "v")},
		{"run", attribute.String("k", "a\xff\xfeb"), attribute.String("k", "a\uFFFDb")},
		{"string slice", attribute.StringSlice("k", []string{"ok", "x\xff"}), attribute.StringSlice("k", []string{"ok", "x\uFFFD"})},
		{"slice", attribute.Slice("k", attribute.IntValue(1), attribute.StringValue("\xff")), attribute.Slice("k", attribute.IntValue(1), attribute.StringValue("\uFFFD"))},
		{"map", attribute.Map("k", attribute.String("in\xff", "v\xff")), attribute.Map("k", attribute.String("in\uFFFD", "v\uFFFD"))},
		{"valid", attribute.String("k", "héllo"), attribute.String("k", "héllo")},
		{"int", attribute.Int("k", 7), attribute.Int("k", 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []attribute.KeyValue{attribute.Bool("first", true), tc.in}
			got, changed := validKeyValues(in)
			if changed != (tc.in != tc.out) {
				t.Errorf("changed %v", changed)
			}
			if got[1].Key != tc.out.Key || got[1].Value.String() != tc.out.Value.String() || got[1].Value.Type() != tc.out.Value.Type() {
				t.Errorf("%v = %q, want %v = %q", got[1].Key, got[1].Value.String(), tc.out.Key, tc.out.Value.String())
			}
			if changed && in[1] != tc.in {
				t.Error("the input changed")
			}
		})
	}
	valid := []attribute.KeyValue{attribute.String("url.path", "/a/b"), attribute.Int("status", 200), attribute.String("ua", "curl/8")}
	if n := testing.AllocsPerRun(100, func() { validKeyValues(valid) }); n != 0 {
		t.Errorf("%v allocations for valid attributes", n)
	}
}
