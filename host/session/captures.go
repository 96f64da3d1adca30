package session

import (
	"context"
	"errors"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

// Checkpoints off the turn's path.
//
// A turn's end is published when the agent is done; its checkpoint
// follows. A capture is two steps. The snapshot (git add and write-tree
// into a scratch index) writes the tree down, and is all the next turn
// waits for: its agent must not change the files before they are. The
// record (the commit, its ref, then the counts) comes after, while the
// next turn runs; records are made one at a time, in the order the turns
// ended, so each commit's parent is the one before. What a client sees
// of a capture, the counts, is published when its record is done.
//
// The first send's turn/0 is the same: its tree is snapshotted before the
// agent starts, and recorded after.
//
// Close waits for the captures in flight once the turns have ended, until
// its context ends; then they are cancelled, and waited for again. The
// captures of a session are chained, so its newest capture's end is all
// of theirs.

// captureQueue is a session's queue of captures, guarded by s.mu.
type captureQueue struct {
	next     int           // the turn the next checkpoint records, once turn/0 is queued
	snapped  chan struct{} // closed once the newest capture's tree is written (or it gave up)
	recorded chan struct{} // closed once the newest capture is over

	repo    *checkpoints.Repo // the repository the session works in, once opened
	repoDir string            // the directory repo was opened for
	base    string            // turn/0's commit, once known
	last    string            // the newest checkpoint's commit, once known
}

// nextCheckpointLocked returns the turn number the session's next
// checkpoint records: 0 while it has none, recorded or queued.
func (s *Session) nextCheckpointLocked() int {
	return max(s.rec.Checkpoints, s.captures.next)
}

// queueCaptureLocked queues the capture of turn/n. tree, when not "", is
// its tree, already written by repo; otherwise the capture snapshots the
// working tree at once. The caller holds s.mu.
func (s *Session) queueCaptureLocked(repo *checkpoints.Repo, n int, tree string) {
	q := &s.captures
	prev := q.recorded
	snapped, recorded := make(chan struct{}), make(chan struct{})
	q.next, q.snapped, q.recorded = n+1, snapped, recorded
	go func() {
		defer close(recorded)
		if tree == "" {
			repo, tree = s.snapshot(n)
		}
		close(snapped)
		if prev != nil {
			<-prev
		}
		s.record(repo, n, tree, recorded)
	}()
}

// turnEndedLocked queues the checkpoint of a turn that completed or
// failed; a cancelled turn gets none, its edits staying in the next count.
// It runs as the turn's end is applied, before the chat can take another
// turn, so the next turn finds it queued. The caller holds s.mu.
func (s *Session) turnEndedLocked(a protocol.Action) {
	switch a := a.(type) {
	case *protocol.ChatTurnCompleteAction:
	case *protocol.ChatErrorAction:
		if a.Part.Error.ErrorType == hostStopped {
			// A turn a stop cut short, ended as the host starts again
			// (restart.go): its tree may be half made and not yet swept;
			// the next turn's starting checkpoint records what it left.
			return
		}
	default:
		return
	}
	if n := s.nextCheckpointLocked(); n > 0 && !s.rec.Untracked && !s.disposed {
		s.queueCaptureLocked(nil, n, "")
	}
}

// awaitSnapshot waits until the tree the session's last turn left is
// written down, so a turn about to start cannot change it first.
func (s *Session) awaitSnapshot(ctx context.Context) error {
	s.mu.Lock()
	snapped := s.captures.snapped
	s.unlock()
	if snapped == nil {
		return nil
	}
	select {
	case <-snapped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitCaptures waits until every capture queued so far is over.
func (s *Session) awaitCaptures() { s.AwaitCapturesCtx(context.Background()) }

// AwaitCapturesCtx waits until every capture queued so far is over, or
// ctx ends, and reports whether they are.
func (s *Session) AwaitCapturesCtx(ctx context.Context) bool {
	s.mu.Lock()
	recorded := s.captures.recorded
	s.unlock()
	if recorded == nil {
		return true
	}
	select {
	case <-recorded:
		return true
	case <-ctx.Done():
		return false
	}
}

// RepoFor returns the repository the session works in, opened once per
// directory: a capture on the turn's path then costs no git process to
// find it. A folder that is no repository is noted, and its counts come
// from what its tools write.
func (s *Session) RepoFor(ctx context.Context) (*checkpoints.Repo, error) {
	dir := s.WorkDir()
	s.mu.Lock()
	q, wt := &s.captures, s.rec.Tree
	if q.repo != nil && q.repoDir == dir {
		defer s.unlock()
		return q.repo, nil
	}
	s.unlock()
	repo, err := openRepo(ctx, dir)
	if errors.Is(err, checkpoints.ErrNotRepository) {
		s.mu.Lock()
		s.rec.Untracked = true
		s.persistLocked()
		s.unlock()
	}
	if err != nil {
		return nil, err
	}
	if wt != nil && wt.Path == dir {
		repo = repo.Excluding(wt.Links)
	}
	s.mu.Lock()
	q.repo, q.repoDir = repo, dir
	s.unlock()
	return repo, nil
}

// snapshot writes down the tree turn n left; "" if it could not.
func (s *Session) snapshot(n int) (*checkpoints.Repo, string) {
	s.mu.Lock()
	disposed := s.disposed
	s.unlock()
	if disposed {
		return nil, "" // its refs are gone, or going
	}
	ctx, cancel := context.WithTimeout(s.h.Ctx, gitTimeout)
	defer cancel()
	repo, err := s.RepoFor(ctx)
	var tree string
	if err == nil {
		tree, err = repo.Snapshot(ctx)
	}
	if err != nil && !errors.Is(err, checkpoints.ErrNotRepository) {
		s.h.Log.Warn("could not record a checkpoint", "session", s.uri, "turn", n, "err", err)
	}
	return repo, tree
}

// record commits turn n's tree, when it was written, as its checkpoint;
// then, unless another capture is queued behind it (which will), it reads
// the session's counts and stores its record. self is the capture's
// channel in the queue.
//
// Nobody waits for any of this, so its git yields the CPU to turns and
// snapshots; and under load, when captures queue up, the counts are read
// once for all of them.
func (s *Session) record(repo *checkpoints.Repo, n int, tree string, self chan struct{}) {
	s.inGit(func() { s.recordNow(repo, n, tree, self) })
}

func (s *Session) recordNow(repo *checkpoints.Repo, n int, tree string, self chan struct{}) {
	q := &s.captures
	s.mu.Lock()
	disposed, wt, parent, had := s.disposed, s.rec.Tree, q.last, s.rec.Checkpoints
	s.unlock()
	if disposed || repo == nil {
		return
	}
	repo = repo.Yielding()
	if tree != "" && n > 0 && parent == "" {
		// After a restart, or on another host than the one before: the
		// checkpoints it looks for may be on the remote only.
		s.h.FetchMissing(s.h.Ctx, s, repo, had-1)
	}
	ctx, cancel := context.WithTimeout(s.h.Ctx, gitTimeout)
	defer cancel()
	var commit string
	if tree != "" {
		var err error
		if n == 0 || parent != "" {
			commit, err = repo.RecordAfter(ctx, s.id, n, tree, parent)
		} else {
			commit, err = repo.Record(ctx, s.id, n, tree) // after a restart: it looks
		}
		if err != nil {
			s.h.Log.Warn("could not record a checkpoint", "session", s.uri, "turn", n, "err", err)
		}
	}
	if commit != "" {
		s.h.Push(s, repo)
	}
	s.mu.Lock()
	if commit != "" {
		q.last = commit
		if n == 0 {
			q.base = commit
		}
		s.rec.Checkpoints = max(s.rec.Checkpoints, n+1)
	}
	latest, last, base := q.recorded == self, q.last, q.base
	s.unlock()
	if !latest {
		return // the capture queued behind this one counts, and stores, for both
	}
	var ch *protocol.ChangesSummary
	if n > 0 && last != "" {
		stats, err := s.count(ctx, repo, wt, base, last)
		if err != nil {
			s.h.Log.Warn("could not count a session's changes", "session", s.uri, "err", err)
		} else {
			ch = changesOf(stats.Files, stats.Additions, stats.Deletions)
		}
	}
	s.mu.Lock()
	defer s.unlock()
	if ch != nil && !SameJSON(s.rec.Changes, ch) {
		s.setChangesLocked(ch) // which stores the record
	} else {
		s.persistLocked()
	}
}

// count reads the session's counts as of its newest checkpoint, last: a
// worktree session's Branch Changes, a folder session's Session Changes
// (turn/0, base, against it).
func (s *Session) count(ctx context.Context, repo *checkpoints.Repo, wt *worktree.Tree, base, last string) (checkpoints.Stats, error) {
	if wt != nil {
		return repo.BranchChangesTo(ctx, last, wt.Base)
	}
	if base == "" {
		// After a restart: look turn/0 up, once.
		cps, err := repo.Checkpoints(ctx, s.id)
		if err != nil {
			return checkpoints.Stats{}, err
		}
		if len(cps) == 0 {
			return checkpoints.Stats{}, errors.New("the session has no checkpoints")
		}
		// As SessionChanges: the first there is, should turn/0 be missing.
		base = cps[0].Commit
		if cps[0].Turn == 0 {
			s.mu.Lock()
			s.captures.base = base
			s.unlock()
		}
	}
	return repo.Diff(ctx, base, last)
}

// startCheckpoint snapshots the tree the session starts from, before its
// first turn reaches the agent, and queues its record as turn/0. It runs
// as a git job.
func (s *Session) startCheckpoint(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	repo, err := s.RepoFor(ctx)
	if errors.Is(err, checkpoints.ErrNotRepository) {
		return
	}
	var tree string
	if err == nil {
		tree, err = repo.Snapshot(ctx)
	}
	if err != nil {
		// The next send tries again.
		s.h.Log.Warn("could not record a checkpoint", "session", s.uri, "turn", 0, "err", err)
		return
	}
	s.mu.Lock()
	if !s.disposed {
		s.queueCaptureLocked(repo, 0, tree)
	}
	s.unlock()
}
