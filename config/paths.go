package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// FileError returns err, the error of opening or reading a file the
// configuration names, saying where a relative path was looked for when
// the file is not found: relative paths are read from the working
// directory, as agentgateway reads them, not from the config file's
// directory, and the error would not say so.
//
//	open examples/tls/api.crt: no such file or directory (relative paths are read from the working directory, /srv)
//
// Any other error is returned as it is.
func FileError(err error) error {
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || filepath.IsAbs(pe.Path) {
		return err
	}
	wd, wdErr := os.Getwd()
	if wdErr != nil {
		return err
	}
	return &relativePathError{err: err, wd: wd}
}

// relativePathError is a relative path not found, with the directory it
// was looked for in.
type relativePathError struct {
	err error
	wd  string
}

func (e *relativePathError) Error() string {
	return e.err.Error() + " (relative paths are read from the working directory, " + e.wd + ")"
}

func (e *relativePathError) Unwrap() error { return e.err }
