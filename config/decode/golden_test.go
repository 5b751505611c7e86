package decode_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestGolden decodes a document with many mistakes and compares the whole
// report: every error, in document order, with paths and positions.
func TestGolden(t *testing.T) {
	cases := []struct {
		desc   string
		input  string
		golden string
	}{
		{desc: "gateway config with many errors", input: "errors.yaml", golden: "errors.golden"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join("testdata", tc.input))
			if err != nil {
				t.Fatal(err)
			}
			errs := decode.YAML(doc, new(gwConfig))
			if errs == nil {
				t.Fatal("no errors")
			}
			got := errs.Error() + "\n"
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("report differs from %s (run with -update after checking):\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}
