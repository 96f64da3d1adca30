//go:build !unix

package claude

import (
	"os"
	"os/exec"
)

// setProcessGroup leaves cmd as it is: without process groups only the
// CLI itself can be killed.
func setProcessGroup(cmd *exec.Cmd) {}

// killGroup kills p alone.
func killGroup(p *os.Process) { p.Kill() }
