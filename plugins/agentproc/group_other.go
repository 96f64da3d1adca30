//go:build !unix

package agentproc

import (
	"os"
	"os/exec"
)

// SetProcessGroup leaves cmd as it is: without process groups only the
// process itself can be killed.
func SetProcessGroup(cmd *exec.Cmd) {}

// KillGroup kills p alone.
func KillGroup(p *os.Process) { p.Kill() }

// ExitSignal reports no signal: there are none to report here.
func ExitSignal(state *os.ProcessState) (string, bool) { return "", false }
