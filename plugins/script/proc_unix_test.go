//go:build unix

package script_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/plugins/script"
)

func TestRunStopsBackground(t *testing.T) {
	for _, command := range []string{
		"sleep 300 & echo $! > pid",
		// The subshell exits at once, orphaning sleep in the group.
		"(sleep 300 & echo $! > pid)",
		// Deaf to SIGTERM: killed after the grace.
		"(trap '' TERM; exec sleep 300) & echo $! > pid",
	} {
		f := newFixture(t)
		a := f.start(t, "allow") // the commands run without asking
		turn := pluginstest.NewTurn("")
		if err := prompt(t, a, "run "+command+"\nsay after", turn); err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		if dones := turn.Of("toolDone"); len(dones) != 1 || !dones[0].Result.Success {
			t.Errorf("%s: events %v", command, turn.Kinds())
		}
		if got := turn.Response(); got != "after\n\n" {
			t.Errorf("%s: response %q", command, got)
		}
		if pid := pluginstest.WaitForPID(t, f.path("pid")); !pluginstest.ProcessGone(pid) {
			t.Errorf("%s: sleep (pid %d) still runs after the turn ended", command, pid)
		}
	}
}

// startWaiting starts an agent and a turn whose run step starts sleep
// and waits for it, writing "bye" to the file cleaned when it is sent
// SIGTERM. It returns the agent, sleep's pid once it runs, and the
// turn's result to come. The grace between SIGTERM and SIGKILL is an
// hour: the trap runs to its end however slow the machine (it did not
// within a second under a CPU hog), and a stop that sent no SIGTERM
// first would not end in the test's time.
func startWaiting(ctx context.Context, t *testing.T, f *fixture, turn *pluginstest.Turn) (plugins.Agent, int, <-chan error) {
	t.Helper()
	script.SetStopGrace(t, time.Hour)
	a := f.start(t, "allow") // the commands run without asking
	errc := make(chan error, 1)
	// The trap reaps sleep, which SIGTERM reaches too, then exits.
	go func() {
		errc <- a.Prompt(ctx, userMessage("run trap 'wait; echo bye > cleaned; exit' TERM; sleep 3600 & echo $! > pid; wait\nsay not reached"), turn)
	}()
	return a, pluginstest.WaitForPID(t, f.path("pid")), errc
}

func TestRunCancelled(t *testing.T) {
	f := newFixture(t)
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, pid, errc := startWaiting(ctx, t, f, turn)
	cancel()
	// The turn ends when the command does, asked to (not when sleep
	// would, minutes on).
	if err := ended(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if b, err := os.ReadFile(f.path("cleaned")); err != nil || string(b) != "bye\n" {
		t.Errorf("cleaned: %q, %v: the command was not sent SIGTERM first", b, err)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("sleep (pid %d) still runs after the turn was cancelled", pid)
	}
	if len(turn.Of("toolDone")) != 0 || turn.Response() != "" {
		t.Errorf("events after cancel: %v", turn.Kinds())
	}
}

func TestCloseStopsRun(t *testing.T) {
	f := newFixture(t)
	turn := pluginstest.NewTurn("")
	a, pid, errc := startWaiting(context.Background(), t, f, turn)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the command: its trap has run.
	if b, err := os.ReadFile(f.path("cleaned")); err != nil || string(b) != "bye\n" {
		t.Errorf("cleaned: %q, %v: Close did not stop the command, asking first", b, err)
	}
	if err := <-errc; err == nil {
		t.Error("a turn cut short by Close succeeded")
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("sleep (pid %d) still runs after Close", pid)
	}
}
