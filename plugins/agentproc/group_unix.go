//go:build unix

package agentproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// SetProcessGroup makes cmd, once started, the leader of a process group
// of its own, so that KillGroup reaches everything it starts.
func SetProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// KillGroup kills the process group p leads. The group outlives its
// leader while a member runs, so this also ends what an exited process
// left behind.
func KillGroup(p *os.Process) {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		// Not our group after all (EPERM): at least the process itself.
		p.Kill()
	}
}

// ExitSignal returns the name of the signal that ended a process, such
// as "SIGKILL", if one did.
func ExitSignal(state *os.ProcessState) (string, bool) {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return "", false
	}
	if name, ok := signalNames[ws.Signal()]; ok {
		return name, true
	}
	return fmt.Sprintf("SIG%d", int(ws.Signal())), true
}

// signalNames are the names of the signals a command commonly dies of,
// as ACP clients report them.
var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT",
	syscall.SIGALRM: "SIGALRM",
	syscall.SIGBUS:  "SIGBUS",
	syscall.SIGFPE:  "SIGFPE",
	syscall.SIGHUP:  "SIGHUP",
	syscall.SIGILL:  "SIGILL",
	syscall.SIGINT:  "SIGINT",
	syscall.SIGKILL: "SIGKILL",
	syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGTERM: "SIGTERM",
	syscall.SIGUSR1: "SIGUSR1",
	syscall.SIGUSR2: "SIGUSR2",
}
