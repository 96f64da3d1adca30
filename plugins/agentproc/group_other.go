//go:build !unix

package agentproc

import (
	"os"
	"os/exec"
	"time"
)

// SetProcessGroup leaves cmd as it is: without process groups only the
// process itself can be killed.
func SetProcessGroup(cmd *exec.Cmd) {}

// KillGroup kills p alone.
func KillGroup(p *os.Process) { p.Kill() }

// StopGroup kills p alone, at once: there is no SIGTERM to ask with.
func StopGroup(p *os.Process, grace time.Duration) { p.Kill() }

// ExitSignal reports no signal: there are none to report here.
func ExitSignal(state *os.ProcessState) (string, bool) { return "", false }
