package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// errExited means the watched process is gone, so waiting longer is useless.
var errExited = errors.New("process exited")

// checkProcess returns errExited once pid no longer exists or is a zombie.
func checkProcess(pid int) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w (pid %d)", errExited, pid)
	}
	if err != nil {
		return err
	}
	state, err := parseProcState(b)
	if err != nil {
		return err
	}
	if state == 'Z' || state == 'X' {
		return fmt.Errorf("%w (pid %d)", errExited, pid)
	}
	return nil
}

// parseProcState returns the state letter of a /proc/PID/stat line
// ("PID (COMM) S ..."). COMM may itself hold spaces and parentheses, so the
// state is read after the last ')'.
func parseProcState(b []byte) (byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) || b[i+1] != ' ' {
		return 0, fmt.Errorf("malformed /proc stat line %q", truncate(b))
	}
	s := b[i+2]
	if s < 'A' || s > 'Z' && s < 'a' || s > 'z' {
		return 0, fmt.Errorf("malformed /proc stat state %q", s)
	}
	return s, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
