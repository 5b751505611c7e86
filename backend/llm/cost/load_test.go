package cost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// sourcesFrom parses a config.modelCatalog list as a user writes it.
func sourcesFrom(t *testing.T, yaml string) []config.ModelCatalogSource {
	t.Helper()
	f, err := config.Parse([]byte("config:\n  modelCatalog:\n"+yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return f.Config.ModelCatalog
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadMerge: sources merge in order, later ones winning rate by rate.
func TestLoadMerge(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "base.yaml", `
providers:
  openai:
    models:
      gpt-4o: {rates: {input: "2.5", output: "10", cacheRead: "1.25"}}
      gpt-4o-mini: {rates: {input: "0.15", output: "0.6"}}
  gcp.gemini:
    models:
      gemini-2.5-pro:
        rates: {input: "1.25", output: "10"}
        tiers: [{contextOver: 200000, rates: {input: "2.5"}}]
`)
	writeFile(t, dir, "override.json", `{"providers": {"openai": {"models": {"gpt-4o": {"rates": {"output": "8"}}}}}}`)
	sources := sourcesFrom(t, `
  - file: base.yaml
  - file: override.json
  - inline:
      providers:
        openai:
          models:
            gpt-4o-mini: {tags: [cheap]}
            gpt-5: {rates: {input: "1.25", output: "10"}}
        gcp.gemini:
          models:
            gemini-2.5-pro:
              rates: {output: "12"}
              tiers: [{contextOver: 100000, rates: {input: "5"}}]
  - inline: "providers: {openai: {models: {gpt-4o: {rates: {input: '3'}}}}}"
`)
	c, err := Load(sources, dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, provider, model string
		u                     Usage
		want                  float64
	}{
		{"the last source's input rate", "openai", "gpt-4o", Usage{Input: 1_000_000}, 3},
		{"the second source's output rate", "openai", "gpt-4o", Usage{Output: 1_000_000}, 8},
		{"the first source's cache rate, untouched since", "openai", "gpt-4o", Usage{CacheRead: 1_000_000}, 1.25},
		{"a later source adding tags keeps the prices", "openai", "gpt-4o-mini", Usage{Input: 1_000_000, Output: 1_000_000}, 0.75},
		{"a later source adds a model", "openai", "gpt-5", Usage{Input: 1_000_000}, 1.25},
		{"a later source's tiers replace the earlier ones", "gcp.gemini", "gemini-2.5-pro", Usage{Input: 150_000}, 0.75},
		{"the base rates below the new bound merge too", "gcp.gemini", "gemini-2.5-pro", Usage{Input: 100_000, Output: 1_000_000}, 12.125},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got, ok := c.Cost(tc.provider, tc.model, tc.u); !ok || got != tc.want {
				t.Errorf("Cost = %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
	// The sources themselves are left as they were.
	if r := sources[2].Inline.Providers["gcp.gemini"].Models["gemini-2.5-pro"].Rates; r.Input != nil {
		t.Errorf("merging changed a source: %+v", r)
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	abs := writeFile(t, dir, "prices.yaml", `providers: {p: {models: {m: {rates: {input: "1"}}}}}`)
	tests := []struct {
		desc, path, baseDir string
	}{
		{"relative to the base directory", "prices.yaml", dir},
		{"absolute, whatever the base", abs, "/nonexistent"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := Load([]config.ModelCatalogSource{{File: tc.path}}, tc.baseDir)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := c.Cost("p", "m", Usage{Input: 1_000_000}); !ok || got != 1 {
				t.Errorf("Cost = %v, %v; want 1", got, ok)
			}
		})
	}
}

// TestLoadRelativeMissing: a relative path not found, with no base
// directory, says where relative paths are read from.
func TestLoadRelativeMissing(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load([]config.ModelCatalogSource{{File: "missing/prices.yaml"}}, "")
	want := "config.modelCatalog[0].file (missing/prices.yaml): open missing/prices.yaml: no such file or directory (relative paths are read from the working directory, " + wd + ")"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// TestLoadErrors: every problem is reported, naming the source's index,
// the file and the field inside it.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "good.yaml", `providers: {p: {models: {m: {rates: {input: "1"}}}}}`)
	writeFile(t, dir, "bad.yaml", "providers:\n  openai:\n    models:\n      gpt-4o:\n        rates: {input: \"-1\", outptu: \"2\"}\n")
	writeFile(t, dir, "syntax.json", `{"providers": {`)
	writeFile(t, dir, "list.yaml", "- a\n")
	big := writeFile(t, dir, "big.yaml", "")
	if err := os.Truncate(big, MaxCatalogFileSize+1); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		sources []config.ModelCatalogSource
		want    []string // each a line of the error
	}{
		{"missing file", []config.ModelCatalogSource{{File: "good.yaml"}, {File: "missing.yaml"}}, []string{
			"config.modelCatalog[1].file (missing.yaml): open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory",
		}},
		{"field errors with their lines", []config.ModelCatalogSource{{File: "bad.yaml"}}, []string{
			`config.modelCatalog[0].file (bad.yaml): providers.openai.models.gpt-4o.rates.input: must not be negative, got "-1" (line 5:24)`,
			`config.modelCatalog[0].file (bad.yaml): providers.openai.models.gpt-4o.rates.outptu: unknown field "outptu" (did you mean "output"?) (line 5:30)`,
		}},
		{"syntax error", []config.ModelCatalogSource{{File: "syntax.json"}}, []string{
			"config.modelCatalog[0].file (syntax.json): (root): syntax error",
		}},
		{"not a catalog", []config.ModelCatalogSource{{File: "list.yaml"}}, []string{
			"config.modelCatalog[0].file (list.yaml): (root): expected map, got list",
		}},
		{"file too large", []config.ModelCatalogSource{{File: "big.yaml"}}, []string{
			"config.modelCatalog[0].file (big.yaml): larger than 33554432 bytes",
		}},
		{"a directory", []config.ModelCatalogSource{{File: "."}}, []string{
			"config.modelCatalog[0].file (.): read " + dir + ": is a directory",
		}},
		{"empty source", []config.ModelCatalogSource{{}}, []string{
			"config.modelCatalog[0]: neither file nor inline is set",
		}},
		{"every problem at once", []config.ModelCatalogSource{{File: "missing.yaml"}, {Inline: &config.ModelCatalog{}}, {File: "syntax.json"}}, []string{
			"config.modelCatalog[0].file (missing.yaml): open",
			"config.modelCatalog[2].file (syntax.json): (root): syntax error",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := Load(tc.sources, dir)
			if err == nil {
				t.Fatalf("loaded %v; want an error", c)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("error has %d lines, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d:\n%s\nwant it to start with\n%s", i, lines[i], want)
				}
			}
		})
	}
}
