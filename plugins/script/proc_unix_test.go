//go:build unix

package script_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ahpd/ahpd/plugins/pluginstest"
)

func TestRunCancelled(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	turn := pluginstest.NewTurn("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	// The shell starts sleep as a child and waits: killing only the shell
	// would leave sleep running.
	go func() {
		errc <- a.Prompt(ctx, userMessage("run sleep 10 & echo $! > pid; wait\nsay not reached"), turn)
	}()
	pid := pluginstest.WaitForPID(t, f.path("pid"))
	start := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the turn took %v to end after cancel", d)
	}
	if !pluginstest.ProcessGone(pid) {
		t.Errorf("sleep (pid %d) still runs after the turn was cancelled", pid)
	}
	if len(turn.Of("toolDone")) != 0 || turn.Response() != "" {
		t.Errorf("events after cancel: %v", turn.Kinds())
	}
}
