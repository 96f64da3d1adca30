//go:build unix

package checkpoints

import "syscall"

// lowerPriority lowers a process's CPU priority to nice 10. It is best
// effort: a process that has ended, or a system that refuses, runs git as
// it is.
func lowerPriority(pid int) {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, 10)
}
