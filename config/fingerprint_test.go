package config

import (
	"encoding/json"
	"testing"
)

// TestFingerprintSeesWhatTheDumpHides: two configs that differ only in a
// secret the dump redacts have the same JSON and different fingerprints;
// equal configs have equal ones whatever their maps' order; fields JSON
// leaves out are left out.
func TestFingerprintSeesWhatTheDumpHides(t *testing.T) {
	mod := func(auth string) *HeaderModifier {
		return &HeaderModifier{Set: HeaderValues{"Authorization": auth, "X-A": "1", "X-B": "2"}}
	}
	a, b := mod("Bearer one"), mod("Bearer two")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("the dump does not redact: %s / %s", ja, jb)
	}
	if Fingerprint(a) == Fingerprint(b) {
		t.Error("configs with different secrets have one fingerprint")
	}
	if Fingerprint(a) != Fingerprint(mod("Bearer one")) {
		t.Error("equal configs have different fingerprints")
	}
	type withHidden struct {
		Kept   string
		Hidden string `json:"-"`
		secret string
	}
	if Fingerprint(withHidden{"k", "x", "y"}) != Fingerprint(withHidden{"k", "z", "w"}) {
		t.Error(`json:"-" and unexported fields are read`)
	}
	// Lengths keep values apart: ("ab", "c") is not ("a", "bc").
	if Fingerprint([]string{"ab", "c"}) == Fingerprint([]string{"a", "bc"}) {
		t.Error("values run together")
	}
	if Fingerprint((*HeaderModifier)(nil)) == Fingerprint(&HeaderModifier{}) {
		t.Error("nil and empty are one")
	}
}
