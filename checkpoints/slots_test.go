package checkpoints

import (
	"context"
	"testing"
)

// TestSlotsOrder: a slot that comes free goes to the waiter of the
// highest priority then, first come among equals; a priority that
// changes while its caller waits counts as it is when the slot is free.
func TestSlotsOrder(t *testing.T) {
	queued := make(chan struct{}, 8)
	s := &semaphore{free: 1, queued: func() { queued <- struct{}{} }}
	if err := s.acquire(t.Context(), At(Later)); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 8)
	wait := func(name string, p func() Priority) {
		go func() {
			if err := s.acquire(t.Context(), p); err != nil {
				got <- name + ": " + err.Error()
				return
			}
			got <- name
		}()
		<-queued
	}
	var raised bool
	wait("later", At(Later))
	wait("soon", At(Soon))
	wait("soon again", At(Soon))
	wait("raised", func() Priority {
		if raised {
			return Now
		}
		return Later
	})
	raised = true // read under s.mu, at the release below
	var order []string
	for range 4 {
		s.release()
		order = append(order, <-got)
	}
	s.release()
	want := []string{"raised", "soon", "soon again", "later"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("slots went to %q, want %q", order, want)
		}
	}
	if s.free != 1 || s.held != 0 || len(s.waiters) != 0 || s.waiting.Load() != 0 {
		t.Errorf("after all gave theirs back: free %d, held %d, waiting %d", s.free, s.held, len(s.waiters))
	}
}

// TestSlotsAge: a waiter passed over by later ones of a higher priority
// maxPassed times goes next, ahead of all but those somebody waits for.
func TestSlotsAge(t *testing.T) {
	queued := make(chan struct{}, 64)
	s := &semaphore{free: 1, queued: func() { queued <- struct{}{} }}
	if err := s.acquire(t.Context(), At(Later)); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 64)
	wait := func(name string, p Priority) {
		go func() {
			if err := s.acquire(t.Context(), At(p)); err == nil {
				got <- name
			}
		}()
		<-queued
	}
	wait("record", Later)
	for range maxPassed + 2 {
		wait("stage", Soon)
	}
	var order []string
	for range maxPassed + 3 {
		s.release()
		order = append(order, <-got)
	}
	s.release()
	if order[maxPassed] != "record" {
		t.Errorf("slots went to %q: want the record after %d stages", order, maxPassed)
	}
}

// TestSlotsCancel: a waiter whose context ends leaves the queue, and a
// slot given to it as it ended goes to the next.
func TestSlotsCancel(t *testing.T) {
	queued := make(chan struct{}, 8)
	s := &semaphore{free: 1, queued: func() { queued <- struct{}{} }}
	if err := s.acquire(t.Context(), At(Later)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.acquire(ctx, At(Now)) }()
	<-queued
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled wait got its slot")
	}
	if s.waiting.Load() != 0 {
		t.Errorf("%d waiting after the only waiter left", s.waiting.Load())
	}
	s.release()
	if s.free != 1 || s.held != 0 {
		t.Errorf("free %d, held %d", s.free, s.held)
	}
}

// TestTryAcquire takes a free slot at once, and none once all are held.
func TestTryAcquire(t *testing.T) {
	n := Processes()
	var releases []func()
	ctx := t.Context()
	for range n {
		held, release, ok := TryAcquire(ctx)
		if !ok {
			// Another test's git holds one: nothing to learn here.
			for _, r := range releases {
				r()
			}
			t.Skip("the slots are busy")
		}
		if !holding(held) {
			t.Fatal("the context of a slot taken does not say so")
		}
		releases = append(releases, release)
	}
	if _, _, ok := TryAcquire(ctx); ok {
		t.Error("a slot beyond all of them")
	}
	for _, r := range releases {
		r()
		r() // a second call does nothing
	}
}

// TestStaged: the files Stage writes down are the tree Snapshot writes,
// whatever changes after; Staged.Diff counts what Repo.Diff counts
// between the two trees, renames too; nothing of the user's moves.
func TestStaged(t *testing.T) {
	dir := newRepo(t, map[string]string{"a.txt": "one\ntwo\n", "b.txt": "moved\nlines\nhere\n"})
	r := open(t, dir)
	base, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.txt", "one\nthree\nfour\n")
	write(t, dir, "new.txt", "fresh\n")
	remove(t, dir, "b.txt")
	write(t, dir, "c.txt", "moved\nlines\nhere\n")
	before := stateOf(t, dir)
	st, err := r.Stage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	write(t, dir, "late.txt", "after the stage\n")
	got, err := st.Diff(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := st.Yielding().Tree(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.Diff(t.Context(), base, tree)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got.Files != 3 {
		t.Errorf("staged diff %+v, the trees' %+v (want 3 files: a.txt, new.txt, b.txt moved to c.txt)", got, want)
	}
	if files := treeOf(t, dir, tree); files["late.txt"] != "" || files["new.txt"] == "" {
		t.Errorf("the staged tree holds %v", files)
	}
	remove(t, dir, "late.txt")
	checkStateUnchanged(t, before, stateOf(t, dir))
}
