package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

// TestConfigSizeLimit: a config file (or standard input) of more than 64
// MiB is refused, not cut off at 64 MiB and parsed; one of exactly 64 MiB
// is read whole.
func TestConfigSizeLimit(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{maxConfigSize, maxConfigSize + 1} {
		// A comment line, then spaces: cut anywhere, still a YAML document.
		path := filepath.Join(dir, fmt.Sprint(size))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("binds: []\n#"); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil { // the rest reads as NUL bytes
			t.Fatal(err)
		}
		f.Close()
		for _, src := range []*source{newSource(options{file: path}, nil), newSource(options{file: "-"}, io.LimitReader(zeros{}, size))} {
			data, err := src.read()
			if size > maxConfigSize {
				if err != errConfigTooLarge || data != nil {
					t.Errorf("%s, %d bytes: %d bytes read, error %v; want %v", src.name(), size, len(data), err, errConfigTooLarge)
				}
			} else if err != nil || int64(len(data)) != size {
				t.Errorf("%s, %d bytes: %d bytes read, error %v", src.name(), size, len(data), err)
			}
		}
	}
}

// zeros reads as endless NUL bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
