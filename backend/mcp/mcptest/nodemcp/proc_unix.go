//go:build unix

package nodemcp

import (
	"os/exec"
	"syscall"
)

// ownGroup makes c the leader of a new process group, so that killGroup
// also ends whatever it starts.
func ownGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills c's process group (c must have been started).
func killGroup(c *exec.Cmd) error {
	return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}
