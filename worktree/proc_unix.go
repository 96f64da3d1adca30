//go:build unix

package worktree

import (
	"errors"
	"os"
	"syscall"
)

// alive reports whether a process pid exists: signal 0 checks without
// sending anything, and a process of another user refuses it but exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// tryLock takes an exclusive flock of f without waiting: ok is false when
// another open file holds it, in this process or any other. The lock goes
// when the last descriptor of f's open file closes, in whichever process
// that is; errNoLocks says the file system has no such locks.
func tryLock(f *os.File) (ok bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EINVAL):
		return false, errNoLocks
	}
	return false, err
}
