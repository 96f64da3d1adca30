//go:build unix

package agentproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
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

// stopPoll is how often StopGroup looks whether the group is empty yet:
// no event tells when processes that are not our children exit.
const stopPoll = 10 * time.Millisecond

// StopGroup ends the process group p leads, also after p itself exited:
// SIGTERM to every member, then, once grace has passed, SIGKILL to those
// still there. It returns as soon as the group is empty, or once the
// SIGKILL is sent.
//
// Members that exited but whose parent has not reaped them count as
// still there: where the process that adopts orphans does not reap them
// (some container inits), StopGroup takes the whole grace.
func StopGroup(p *os.Process, grace time.Duration) {
	switch err := syscall.Kill(-p.Pid, syscall.SIGTERM); {
	case errors.Is(err, syscall.ESRCH):
		return // nothing is left
	case err != nil:
		// Not our group after all (EPERM): at least the process itself.
		p.Kill()
		return
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(stopPoll)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			// Signal 0 only asks whether anyone is there to signal.
			if errors.Is(syscall.Kill(-p.Pid, 0), syscall.ESRCH) {
				return
			}
		case <-deadline.C:
			KillGroup(p)
			return
		}
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
