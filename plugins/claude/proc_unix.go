//go:build unix

package claude

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd the leader of a process group of its own, so
// that killGroup reaches the commands the CLI's tools start.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the process group p leads. The group outlives its
// leader while a member runs, so this also ends what an exited CLI left
// behind.
func killGroup(p *os.Process) {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		// Not our group after all (EPERM): at least the process itself.
		p.Kill()
	}
}
