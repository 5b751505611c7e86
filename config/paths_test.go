package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestFileError: a relative path not found says where it was looked for;
// other errors are left as they are.
func TestFileError(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hint := " (relative paths are read from the working directory, " + wd + ")"
	tests := []struct {
		desc string
		path string // opened; the error is given to FileError
		err  error  // instead of opening path
		want string
	}{
		{desc: "relative path not found", path: "testdata/missing.pem", want: "open testdata/missing.pem: no such file or directory" + hint},
		{desc: "relative path below a missing directory", path: "missing/dir/cert.pem", want: "open missing/dir/cert.pem: no such file or directory" + hint},
		{desc: "absolute path not found", path: filepath.Join(dir, "missing.pem"), want: "open " + filepath.Join(dir, "missing.pem") + ": no such file or directory"},
		{desc: "relative path found but not a file", path: "testdata/invalid.yaml/x", want: "open testdata/invalid.yaml/x: not a directory"},
		{desc: "not a path error", err: fs.ErrNotExist, want: "file does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.err
			if err == nil {
				f, openErr := os.Open(tc.path)
				if openErr == nil {
					f.Close()
					t.Fatalf("%s opened", tc.path)
				}
				err = openErr
			}
			got := FileError(err)
			if got.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if !errors.Is(got, err) {
				t.Errorf("%v does not wrap %v", got, err)
			}
		})
	}
}
