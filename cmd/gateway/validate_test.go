package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestValidateOnlyAgreesWithStart: --validate-only refuses a file the
// gateway would refuse to start with, settings not served yet among them,
// with the same errors, and it exits non-zero (testdata/notserved.golden,
// rewritten with -update).
func TestValidateOnlyAgreesWithStart(t *testing.T) {
	env := []string{fmt.Sprintf("GW_TEST_PORT=%d", freePort(t)), fmt.Sprintf("GW_TEST_LLM_PORT=%d", freePort(t))}
	run := func(args ...string) (int, string) {
		t.Helper()
		// Bounded: a gateway that wrongly starts fails the test instead
		// of hanging it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, gatewayBin, args...)
		cmd.Dir = "testdata"
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("%v still running after 30s; output:\n%s", args, out)
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}

	code, got := run("-f", "notserved.yaml", "--validate-only")
	if code != 1 {
		t.Errorf("--validate-only: exit %d, want 1; output:\n%s", code, got)
	}
	golden := filepath.Join("testdata", "notserved.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("--validate-only output differs from %s (run with -update to accept):\n got:\n%s\nwant:\n%s", golden, got, want)
	}

	// Starting refuses the same file with the same errors.
	code, out := run("-f", "notserved.yaml")
	if code != 1 {
		t.Fatalf("start: exit %d, want 1; output:\n%s", code, out)
	}
	var startErr string
	for _, l := range strings.Split(out, "\n") {
		if _, fields, ok := strings.Cut(l, "failed to start\t"); ok {
			var v struct{ Error string }
			if err := json.Unmarshal([]byte(fields), &v); err != nil {
				t.Fatalf("start: %v: %s", err, l)
			}
			startErr = v.Error
		}
	}
	validateErr, _ := strings.CutPrefix(strings.TrimSuffix(got, "\n"), "notserved.yaml: invalid configuration:\n")
	if startErr == "" || startErr != validateErr {
		t.Errorf("start refuses the file with\n%s\n--validate-only with\n%s", startErr, validateErr)
	}
}
