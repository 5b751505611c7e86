package server

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// TestReadmeExamplesValidate: every YAML config in the README parses and
// compiles (`--validate-only`), so a reader copying one gets a working file.
func TestReadmeExamplesValidate(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	checked := 0
	for _, b := range blocks {
		yaml := b[1]
		if !strings.Contains(yaml, "binds:") || strings.Contains(yaml, "...") {
			continue // a fragment
		}
		env := func(k string) (string, bool) { return "placeholder-" + k, true }
		f, err := config.Parse([]byte(yaml), env)
		if err != nil {
			t.Errorf("README example does not parse: %v\n%s", err, yaml)
			continue
		}
		if err := Validate(f); err != nil {
			t.Errorf("README example does not validate: %v\n%s", err, yaml)
		}
		checked++
	}
	if checked < 2 {
		t.Fatalf("checked %d README examples; the pattern no longer finds them", checked)
	}
}
