package session

import (
	"context"
	"errors"

	"github.com/ahpd/ahpd/checkpoints"
)

// Where a folder session's turn starts: the tree its last turn left,
// written down before the next turn changes it (awaitEnd), and, when it
// shares its tree, a snapshot of the start recorded as start/<N> when
// the folder changed between the turns (see captures.go).

// openStart writes down the tree a folder session's turn starts from,
// before the turn reaches the agent (see the top of this file). fresh
// says the last checkpoint's tree was being written as the turn came:
// it is the turn's start. An error writing it is logged, and the turn
// starts from the last checkpoint; one of ctx fails the turn.
func (s *Session) openStart(ctx context.Context, fresh bool) error {
	q := &s.captures
	s.mu.Lock()
	if s.rec.Tree != nil || s.rec.Untracked || s.disposed || s.nextCheckpointLocked() == 0 {
		s.unlock()
		return nil
	}
	if q.alone || q.next == 0 && s.rec.Owed {
		// Nobody else of this host changes its tree between its turns:
		// the last checkpoint (or the one being written) is where this
		// turn starts. So too for the first turn after a restart that
		// left a turn without its checkpoint: this turn's covers it.
		s.unlock()
		return nil
	}
	if st := q.start; st != nil {
		s.unlock()
		select { // another chat's turn may be writing it
		case <-st.snapped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	st := &turnStart{snapped: closedChan}
	q.start = st
	if fresh {
		s.unlock()
		return nil
	}
	st.snapped = make(chan struct{})
	n, lastTree := s.nextCheckpointLocked(), q.lastTree
	s.unlock()
	defer close(st.snapped)
	gctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	repo, err := s.RepoFor(gctx)
	var tree string
	if err == nil {
		tree, err = repo.Snapshot(gctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, checkpoints.ErrNotRepository) {
			s.h.Log.Warn("could not write down the tree a turn starts from", "session", s.uri, "turn", n, "err", err)
		}
		return nil
	}
	if tree == lastTree {
		return nil // nothing changed since the last checkpoint: it is the start
	}
	s.mu.Lock()
	defer s.unlock()
	st.tree = tree
	// A checkpoint queued meanwhile (another chat's turn ended) took this
	// start while its tree was unknown, and counts from the one before:
	// the turn now starts from that checkpoint, and turn n is taken.
	if q.start == st && !s.disposed {
		s.queueStartLocked(repo, n, st)
	}
	return nil
}

// queueStartLocked queues the record of turn n's start, st, whose tree is
// written: on the capture queue, so that it follows the checkpoint before
// it and turn n's follows it. It counts nothing. The caller holds s.mu.
func (s *Session) queueStartLocked(repo *checkpoints.Repo, n int, st *turnStart) {
	q := &s.captures
	// The turns no longer follow each other: count them as Own does.
	q.base = nil
	prev, recorded := q.recorded, make(chan struct{})
	q.recorded = recorded
	go func() {
		defer close(recorded)
		if prev != nil {
			<-prev
		}
		s.inGit(func() { s.recordStart(repo, n, st) })
	}()
}

// recordStart records turn n's start as start/<n>, after the newest
// checkpoint.
func (s *Session) recordStart(repo *checkpoints.Repo, n int, st *turnStart) {
	q := &s.captures
	s.mu.Lock()
	disposed, parent, had := s.disposed, q.last, s.rec.Checkpoints
	s.unlock()
	if disposed {
		return
	}
	repo = repo.Yielding()
	if parent == "" {
		// After a restart, or on another host: as for a checkpoint.
		s.h.FetchMissing(s.h.Ctx, s, repo, had-1)
	}
	ctx, cancel := context.WithTimeout(s.h.Ctx, gitTimeout)
	defer cancel()
	commit, err := repo.RecordStart(ctx, s.id, n, st.tree, parent)
	if err != nil {
		// The turn's checkpoint follows the one before: its count holds
		// what changed in the folder between them.
		s.h.Log.Warn("could not record the tree a turn started from", "session", s.uri, "turn", n, "err", err)
		return
	}
	s.mu.Lock()
	st.commit = commit
	s.unlock()
}

// awaitEnd readies the tree a turn about to start changes: the tree
// the session's last turn left must be written down first, so it waits
// for the snapshot git is writing, and reports whether it had to wait
// (the last checkpoint is then as fresh as a start's snapshot would be).
// A snapshot that has not started is not waited for when the session is
// alone in its tree (alone, Repos): it is deferred to this turn's end,
// and records the tree both turns left. One that must be waited for
// goes ahead of the git nobody waits for.
func (s *Session) awaitEnd(ctx context.Context, alone bool) (waited bool, err error) {
	s.mu.Lock()
	q := &s.captures
	// Its last checkpoint is where this turn starts only when this run
	// took it: before a restart, or on another host, anything may have
	// happened to the files since. A worktree's branch is its own.
	alone = alone && q.next > 0 || s.rec.Tree != nil
	q.alone = alone
	c := q.newest
	if c == nil {
		s.unlock()
		return false, nil
	}
	switch c.state {
	case captureDeferred:
		// Deferred by another chat's turn, still running: its end
		// writes what both leave.
		s.unlock()
		return true, nil
	case captureWaiting:
		if alone && checkpoints.Backlogged() {
			c.state = captureDeferred
			s.unlock()
			return true, nil
		}
		c.urgent.Store(true)
	}
	snapped := c.snapped
	s.unlock()
	select {
	case <-snapped:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}
