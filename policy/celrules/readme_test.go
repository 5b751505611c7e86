package celrules

import (
	"os"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// The README's function table: every example compiles as a rule.
func TestReadmeFunctionExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| function | example (true) |\n|---|---|\n")
	if !ok {
		t.Fatal("the README has no function table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	n := 0
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, " | ")
		if len(cells) != 2 {
			t.Fatalf("row %q", row)
		}
		expr := strings.TrimSuffix(strings.TrimSpace(cells[1]), " |")
		expr = strings.TrimSuffix(strings.TrimPrefix(expr, "`"), "`")
		expr = strings.ReplaceAll(expr, `\\"`, `\"`)
		if _, err := Compile(&config.CELRuleSet{Rules: []config.CELRule{{Expr: expr}}}); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
		n++
	}
	if n < 15 {
		t.Fatalf("only %d examples found", n)
	}
}
