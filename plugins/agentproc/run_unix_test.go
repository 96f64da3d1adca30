//go:build unix

package agentproc_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins/agentproc"
	"github.com/ahpd/ahpd/plugins/pluginstest"
)

// runSh runs script with sh, its first argument a pid file in a
// temporary directory, under ctx and with grace. The scripts leave
// processes that sleep an hour: a Run that waited for one fails the test
// at testwait.Hang.
func runSh(ctx context.Context, t *testing.T, script string, grace time.Duration) (pidFile, out string, took time.Duration, err error) {
	t.Helper()
	pidFile = filepath.Join(t.TempDir(), "pid")
	var buf bytes.Buffer
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- agentproc.Run(ctx, exec.Command("sh", "-c", script, pidFile), &buf, grace) }()
	select {
	case err = <-done:
	case <-time.After(testwait.Hang):
		t.Fatalf("%s: Run did not return: it waits for what the command left", script)
	}
	return pidFile, buf.String(), time.Since(start), err
}

func TestRunStopsWhatWasLeft(t *testing.T) {
	for _, script := range []string{
		`sleep 3600 & echo $! > "$0"; echo out; echo err >&2`,
		// A subshell's child is orphaned at once, but stays in the group.
		`(sleep 3600 & echo $! > "$0"); echo out; echo err >&2`,
	} {
		pidFile, out, _, err := runSh(context.Background(), t, script, 200*time.Millisecond)
		if err != nil {
			t.Errorf("%s: Run: %v", script, err)
		}
		if out != "out\nerr\n" {
			t.Errorf("%s: output %q, want both streams in order", script, out)
		}
		if pid := pluginstest.WaitForPID(t, pidFile); !pluginstest.ProcessGone(pid) {
			t.Errorf("%s: sleep (pid %d) outlived Run", script, pid)
		}
	}
}

func TestRunCancelAsksFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// SIGTERM reaches the shell and sleep alike; the shell's trap reaps
	// sleep and says it was asked.
	pidFile := filepath.Join(t.TempDir(), "pid")
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() {
		cmd := exec.Command("sh", "-c", `trap 'wait; echo asked; exit 3' TERM; sleep 3600 & echo $! > "$0"; wait`, pidFile)
		// A grace of an hour: Run returns when the command ends, asked.
		done <- agentproc.Run(ctx, cmd, &buf, time.Hour)
	}()
	pid := pluginstest.WaitForPID(t, pidFile)
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(testwait.Hang):
		t.Fatal("Run did not return after its context ended")
	}
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Run: %v, want the trap's exit status 3", err)
	}
	if got := buf.String(); got != "asked\n" {
		t.Errorf("output %q: the command was not sent SIGTERM first", got)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("sleep (pid %d) outlived Run", pid)
	}
}

func TestRunKillsWhatIgnoresTerm(t *testing.T) {
	const grace = 200 * time.Millisecond
	pidFile, _, took, err := runSh(context.Background(), t, `(trap '' TERM; exec sleep 3600) & echo $! > "$0"`, grace)
	if err != nil {
		t.Errorf("Run: %v", err)
	}
	if took < grace {
		t.Errorf("Run took %v: SIGKILL came before the grace of %v", took, grace)
	}
	if pid := pluginstest.WaitForPID(t, pidFile); !pluginstest.ProcessGone(pid) {
		t.Errorf("sleep (pid %d), deaf to SIGTERM, outlived Run", pid)
	}
}

func TestRunEscapedProcess(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command")
	}
	// setsid leaves the group, and keeps the output open: Run cannot stop
	// it, and does not wait for it more than the grace. The command waits
	// for the pid, written after setsid, so as not to stop it before.
	pidFile, out, _, err := runSh(context.Background(), t,
		`setsid sh -c 'echo $$ > "$0"; exec sleep 3600' "$0" & while [ ! -s "$0" ]; do sleep 0.01; done; echo out`,
		200*time.Millisecond)
	pid := pluginstest.WaitForPID(t, pidFile)
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		pluginstest.ProcessGone(pid)
	})
	if err != nil || out != "out\n" {
		t.Errorf("Run: %q, %v", out, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the escaped process (pid %d) was signalled: %v", pid, err)
	}
}

func TestRunStartFailure(t *testing.T) {
	before := openFiles()
	var buf bytes.Buffer
	if err := agentproc.Run(context.Background(), exec.Command(filepath.Join(t.TempDir(), "missing")), &buf, time.Second); err == nil {
		t.Error("Run of a missing program succeeded")
	}
	if after := openFiles(); before >= 0 && after != before {
		t.Errorf("%d files open after a failed Run, %d before", after, before)
	}
}
