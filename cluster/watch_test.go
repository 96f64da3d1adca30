package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/internal/testwait"
)

// A watching host is told of a session released and of one whose holder
// died, by name, and not of sessions acquired or renewed.
func TestFreedTellsReleasesAndExpiries(t *testing.T) {
	c := clustertest.Start(t, 3)
	watcher := join(t, c, 0, "watcher", true, Config{})
	alive := join(t, c, 1, "alive", false, Config{})
	dying := join(t, c, 2, "dying", true, Config{}) // its clock never moves
	wctx, cancel := context.WithCancel(ctx(t))
	freed, err := watcher.Freed(wctx)
	if err != nil {
		t.Fatal(err)
	}
	long := "ahp-session://released/" + string(make([]byte, 100))
	l, err := alive.Acquire(ctx(t), long)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alive.Acquire(ctx(t), "kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := dying.Acquire(ctx(t), "orphaned"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	want := []string{long, "orphaned"} // the release first; the expiry a second later
	for _, w := range want {
		select {
		case got := <-freed:
			if got != w {
				t.Fatalf("freed %q, want %q", got, w)
			}
		case <-time.After(testwait.Hang):
			t.Fatalf("%q not freed", w)
		}
	}
	cancel()
	for got := range freed { // closed once the context ends
		if got == "kept" {
			t.Fatal("a session renewed by a live holder was freed")
		}
	}
}
