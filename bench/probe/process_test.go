package main

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestParseProcState(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    byte
		wantErr bool
	}{
		{desc: "sleeping", in: "123 (nginx) S 1 123 123 0", want: 'S'},
		{desc: "zombie", in: "123 (gateway) Z 1 0", want: 'Z'},
		{desc: "command with spaces and parens", in: "7 (a (b) c) R 1 2", want: 'R'},
		{desc: "empty", in: "", wantErr: true},
		{desc: "no closing paren", in: "123 (nginx S 1", wantErr: true},
		{desc: "nothing after paren", in: "123 (nginx)", wantErr: true},
		{desc: "missing space", in: "123 (nginx)S 1", wantErr: true},
		{desc: "state not a letter", in: "123 (nginx) 9 1", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseProcState([]byte(tc.in))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseProcState(%q) = %q, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseProcState(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestCheckProcess(t *testing.T) {
	if err := checkProcess(os.Getpid()); err != nil {
		t.Fatalf("checkProcess(self): %v", err)
	}
	// A child that exited but was not reaped yet is a zombie: exited.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a child process: %v", err)
	}
	pid := cmd.Process.Pid
	waitFor(t, func() bool { return errors.Is(checkProcess(pid), errExited) })
	_ = cmd.Wait()
	if err := checkProcess(pid); !errors.Is(err, errExited) {
		t.Fatalf("checkProcess(reaped child) = %v, want errExited", err)
	}
}

func FuzzParseProcState(f *testing.F) {
	f.Add([]byte("123 (nginx) S 1 123"))
	f.Add([]byte("7 (a (b) c) R 1 2"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseProcState(b)
		if err == nil && !(s >= 'A' && s <= 'Z' || s >= 'a' && s <= 'z') {
			t.Fatalf("accepted non-letter state %q", s)
		}
	})
}
