//go:build unix

package script_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunCancelled(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := newTurn()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	// The shell starts sleep as a child and waits: killing only the shell
	// would leave sleep running.
	go func() {
		errc <- a.Prompt(ctx, userMessage("run sleep 10 & echo $! > pid; wait\nsay not reached"), turn)
	}()
	pid := waitForPID(t, f.path("pid"))
	start := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the turn took %v to end after cancel", d)
	}
	if !processGone(pid) {
		t.Errorf("sleep (pid %d) still runs after the turn was cancelled", pid)
	}
	if len(turn.of("toolDone")) != 0 || turn.text() != "" {
		t.Errorf("events after cancel: %v", turn.kinds())
	}
}

// processGone reports whether pid ends within a few seconds. A killed
// process nobody has reaped yet is a zombie: it runs no more.
func processGone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err == nil {
			// The state follows the command name in parentheses.
			if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
				return true
			}
		}
	}
	return false
}

// waitForPID waits for a command to write its pid to path.
func waitForPID(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		return pid
	}
	t.Fatal("the command wrote no pid")
	return 0
}
