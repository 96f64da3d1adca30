package session

import (
	"context"
	"errors"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

// Recording a turn's checkpoint once its files are staged, and reading
// the counts (see captures.go).

// record commits turn n's tree, when it was written, as its checkpoint,
// after its turn's start when it has one; then, unless another checkpoint
// is queued behind it (which will), it reads the session's counts and
// stores its record. self is the capture's channel in the queue.
//
// Nobody waits for any of this, so its git yields the CPU to turns and
// snapshots; and under load, when captures queue up, the counts are read
// once for all of them.
func (s *Session) record(repo *checkpoints.Repo, n int, sh *shot, start *turnStart, self chan struct{}) {
	s.inGit(func() { s.recordNow(repo, n, sh, start, self) })
}

func (s *Session) recordNow(repo *checkpoints.Repo, n int, sh *shot, start *turnStart, self chan struct{}) {
	q := &s.captures
	s.mu.Lock()
	disposed, wt, last, had, linear := s.disposed, s.rec.Tree, q.last, s.rec.Checkpoints, q.base != nil
	parent := last
	if start != nil && start.commit != "" {
		parent = start.commit
	}
	s.unlock()
	if disposed || repo == nil {
		return
	}
	repo = repo.Yielding()
	if (sh.tree != "" || sh.staged != nil) && n > 0 && last == "" {
		// After a restart, or on another host than the one before: the
		// checkpoints it looks for may be on the remote only.
		s.h.FetchMissing(s.h.Ctx, s, repo, had-1)
	}
	ctx, cancel := context.WithTimeout(s.h.Ctx, gitTimeout)
	defer cancel()
	// One slot for all of the record's git, so that once it starts it
	// ends without queueing again behind every other session's.
	ctx, release, err := checkpoints.Acquire(ctx, checkpoints.At(checkpoints.Later))
	if err != nil {
		return // the host is stopping: the next capture covers the turn
	}
	defer release()
	tree := sh.tree
	if tree == "" && sh.base != nil {
		tree, err = sh.base.get(ctx)
	} else if tree == "" && sh.staged != nil {
		tree, err = sh.staged.Yielding().Tree(ctx)
	}
	if err != nil {
		s.h.Log.Warn("could not record a checkpoint", "session", s.uri, "turn", n, "err", err)
	}
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
		if n > 0 && wt == nil && !linear {
			q.unfolded = append(q.unfolded, commit)
		}
	}
	s.mu.Lock()
	if tree != "" && q.lastEnd == self {
		q.lastTree = tree // what the next start compares with
	}
	if commit != "" {
		q.last = commit
		s.rec.Checkpoints = max(s.rec.Checkpoints, n+1)
		if sh.covers == q.ends {
			s.rec.Owed = false // written below, or by the record behind
		}
	}
	latest, last, base := q.lastEnd == self, q.last, q.base
	s.unlock()
	if !latest {
		return // the capture queued behind this one counts, and stores, for both
	}
	var ch *protocol.ChangesSummary
	switch {
	case n > 0 && commit != "" && sh.counted:
		ch = changesOf(sh.stats.Files, sh.stats.Additions, sh.stats.Deletions)
	case n > 0 && last != "":
		from := ""
		if base != nil {
			from, _ = base.get(ctx) // "" if it failed: Own counts
		}
		stats, err := s.count(ctx, repo, wt, last, from)
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
// worktree session's Branch Changes, a folder session's Session Changes,
// its own turns' changes combined. Those it keeps, adding the turns
// recorded since it last counted (one git process for them all); after a
// restart, or when that fails, it reads them from the session's refs
// (two, for all its turns). It runs as a record, one at a time.
func (s *Session) count(ctx context.Context, repo *checkpoints.Repo, wt *worktree.Tree, last, base string) (checkpoints.Stats, error) {
	if wt != nil {
		return repo.BranchChangesTo(ctx, last, wt.Base)
	}
	q := &s.captures
	if base != "" {
		// Every checkpoint follows the one before: the turns' changes
		// combined are the diff from the first to the newest.
		q.unfolded = nil
		return repo.Diff(ctx, base, last)
	}
	var err error
	switch {
	case q.own == nil:
		q.own, err = repo.OwnChanges(ctx, s.id)
	case len(q.unfolded) > 0:
		var turns [][]checkpoints.FileChange
		if turns, err = repo.TurnChanges(ctx, q.unfolded); err == nil {
			for _, t := range turns {
				q.own.Add(t)
			}
		}
	}
	q.unfolded = nil
	var st checkpoints.Stats
	if err == nil {
		st, err = repo.Count(ctx, q.own)
	}
	if err != nil {
		q.own = nil // read them all again next time
	}
	return st, err
}

// startCheckpoint snapshots the tree the session starts from, before its
// first turn reaches the agent, and queues its record as turn/0. It runs
// as a git job.
func (s *Session) startCheckpoint(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	ctx, release, err := checkpoints.Acquire(ctx, checkpoints.At(checkpoints.Now))
	if err != nil {
		return // the next send tries again
	}
	defer release()
	repo, err := s.RepoFor(ctx)
	if errors.Is(err, checkpoints.ErrNotRepository) {
		return
	}
	// The files staged are all the agent must not change first; their
	// tree, which every count of the session's turns is read against, is
	// written under the same slot, or would queue behind every capture.
	var staged *checkpoints.Staged
	if err == nil {
		staged, err = repo.Stage(ctx)
	}
	if err == nil {
		if _, err = staged.Tree(ctx); err != nil {
			staged.Close()
		}
	}
	if err != nil {
		// The next send tries again.
		s.h.Log.Warn("could not record a checkpoint", "session", s.uri, "turn", 0, "err", err)
		return
	}
	s.mu.Lock()
	if s.disposed {
		staged.Close()
	} else {
		s.queueCaptureLocked(repo, 0, staged)
	}
	s.unlock()
}
