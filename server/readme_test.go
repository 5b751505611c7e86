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
		f, err := config.Parse([]byte(yaml), placeholderEnv(yaml, "placeholder-"))
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

// placeholderEnv is an environment defining each variable doc references
// ($NAME, ${NAME}) as prefix+NAME, and no other: the variables Parse reads
// over the config section (SESSION_KEY, ...) stay unset.
func placeholderEnv(doc, prefix string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if strings.Contains(doc, "$"+k) || strings.Contains(doc, "${"+k) {
			return prefix + k, true
		}
		return "", false
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
