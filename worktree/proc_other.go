//go:build !unix

package worktree

import "os"

// alive reports whether a process pid exists: where processes are opened
// by handle, opening one that has ended fails.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}

// tryLock says there are no file locks here: claims fall back on their
// writer's pid.
func tryLock(*os.File) (bool, error) { return false, errNoLocks }
