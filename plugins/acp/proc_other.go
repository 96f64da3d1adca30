//go:build !unix

package acp

import (
	"os"
	"os/exec"
)

// setProcessGroup leaves cmd as it is: without process groups only the
// process itself can be killed.
func setProcessGroup(cmd *exec.Cmd) {}

// killGroup kills p alone.
func killGroup(p *os.Process) { p.Kill() }

// exitSignal reports no signal: there are none to report here.
func exitSignal(state *os.ProcessState) (string, bool) { return "", false }
