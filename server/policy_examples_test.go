package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/relaygate/gateway/config"
)

// TestAgentgatewayPolicyExamples: files of the same structure as
// agentgateway's policy examples (config/testdata/policy) parse and
// compile unchanged, and run: nothing in them is refused as not served.
func TestAgentgatewayPolicyExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "config", "testdata", "policy", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files (%v)", err)
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f, err := config.Parse(data, placeholderEnv(string(data), "placeholder-"))
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(f); err != nil {
				t.Fatal(err)
			}
			if ns := f.NotServedYet(); len(ns) > 0 {
				t.Fatalf("not served yet: %v", ns)
			}
		})
	}
}
