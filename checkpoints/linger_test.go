package checkpoints

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCaptureWithLingeringChild captures in a repository whose
// reference-transaction hook leaves a process running that inherited
// git's output (git hands a hook its stderr as stdout), as a hook that
// starts a daemon does. git itself exits at once and its output is
// complete, so the capture must succeed: when the package read git's
// output through pipes with a WaitDelay, it failed after the delay with
// "exec: WaitDelay expired before I/O complete", which is also how a
// capture failed when the machine was too busy to drain a pipe in time.
func TestCaptureWithLingeringChild(t *testing.T) {
	t.Parallel()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	pidFile := filepath.Join(t.TempDir(), "pid")
	hook := filepath.Join(dir, ".git", "hooks", "reference-transaction")
	script := "#!/bin/sh\nsleep 600 &\necho $! >> " + strconv.Quote(pidFile) + "\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killAll(t, pidFile) })

	r := open(t, dir)
	commit, err := r.Capture(t.Context(), "s", 1)
	if err != nil {
		t.Fatalf("Capture = %v", err)
	}
	if got := run(t, dir, "rev-parse", turnsPrefix("s")+"1"); got != commit {
		t.Errorf("ref holds %s, Capture returned %s", got, commit)
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
}

// killAll ends the processes whose ids the hook wrote, and reaps none:
// they are the shell's children, adopted by init once it exits.
func killAll(t *testing.T, pidFile string) {
	data, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	} else if err != nil {
		t.Error(err)
		return
	}
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Errorf("pid file: %v", err)
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill %d: %v", pid, err)
		}
	}
}
