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
	t.Chdir("..") // the examples name files from the repository's root
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	checked := 0
	for _, b := range blocks {
		yaml := dedent(b[1])
		whole := strings.HasPrefix(yaml, "binds:") || strings.HasPrefix(yaml, "llm:") || strings.HasPrefix(yaml, "gateways:")
		if !whole || strings.Contains(yaml, "...") {
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
	if checked < 3 {
		t.Fatalf("checked %d README examples; the pattern no longer finds them", checked)
	}
}

// dedent removes the indentation of a block nested in a list item.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	pad := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); pad < 0 || n < pad {
			pad = n
		}
	}
	for i, l := range lines {
		if len(l) >= pad && pad > 0 {
			lines[i] = l[pad:]
		}
	}
	return strings.Join(lines, "\n")
}
