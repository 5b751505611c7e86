package promptcache

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/config"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func ptr[T any](v T) *T { return &v }

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkGolden compares got with the golden file (rewriting it with -update).
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// formatOf is the provider format of a testdata input, by its name.
func formatOf(name string) convert.Format {
	if strings.HasPrefix(name, "bedrock") {
		return convert.Bedrock
	}
	return convert.Messages
}

// sectionPoints counts the cache points (non-null marks) in each section
// of body.
func sectionPoints(t testing.TB, body []byte, f convert.Format) (system, messages, tools, top int) {
	t.Helper()
	var d dialect = anthropic{}
	if f == convert.Bedrock {
		d = bedrock{}
	}
	var r request
	if unique, err := r.read(body, d); err != nil || !unique {
		t.Fatalf("read: unique %v, %v", unique, err)
	}
	system = tally(r.system, d.mark(), 0).marks
	messages = tally(r.messages, d.mark(), 0).marks
	tools = tally(r.toolsSection, d.mark(), 0).marks
	return system, messages, tools, r.marks
}

// words is n distinct words separated by spaces.
func words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("w")
		b.WriteString(strings.Repeat("x", i%7))
	}
	return b.String()
}

func everything() *config.PromptCaching {
	return &config.PromptCaching{CacheTools: ptr(true), MinTokens: ptr(0)}
}
