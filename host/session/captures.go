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
// A folder session's counts are what changed during its own turns, not
// what the folder holds (other sessions work in it too): so each of its
// turns after the first also has its start written down, before it
// reaches the agent, unless the turn starts from a checkpoint that is
// still being written (its tree is then as fresh as a start's would be)
// or another start is open (a cancelled turn's, or one of another chat's
// turn still running), whose turn's edits then count with this one's. A
// start whose tree is the last checkpoint's is nothing to record; one
// that differs (the folder changed between the turns) is recorded as
// start/<N> on the queue, and the turn's checkpoint follows it. Each
// recorded turn's diff against its parent is then the turn's own, and
// the record that counts folds the new ones into the session's own
// changes (checkpoints.Own), kept in memory and read again from the refs
// after a restart. A worktree session needs none of it: its branch is
// its own.
//
// Close waits for the captures in flight once the turns have ended, until
// its context ends; then they are cancelled, and waited for again. The
// captures of a session are chained, so its newest capture's end is all
// of theirs.

// captureQueue is a session's queue of captures, guarded by s.mu.
type captureQueue struct {
	next     int           // the turn the next checkpoint records, once turn/0 is queued
	snapped  chan struct{} // closed once the newest capture's tree is written (or it gave up)
	recorded chan struct{} // closed once the newest capture (or start, queueStartLocked) is over

	lastEnd  chan struct{}     // the newest turn checkpoint's recorded: the capture that counts
	repo     *checkpoints.Repo // the repository the session works in, once opened
	repoDir  string            // the directory repo was opened for
	last     string            // the newest checkpoint's commit, once known
	lastTree string            // the newest checkpoint's tree, once snapshotted in this run
	start    *turnStart        // the open start: the next checkpoint's turn started from it

	// Touched by records only, which run one at a time (inGit).
	own      *checkpoints.Own // the session's own changes; nil: read them from its refs
	unfolded []string         // checkpoints recorded since own took its last
}

// turnStart is where a turn started, guarded by s.mu.
type turnStart struct {
	snapped chan struct{} // closed once tree is known
	tree    string        // the tree it started from, when not the last checkpoint's
	commit  string        // start/<N>'s commit, once recorded
}

// closedChan is a channel closed already.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// nextCheckpointLocked returns the turn number the session's next
// checkpoint records: 0 while it has none, recorded or queued.
func (s *Session) nextCheckpointLocked() int {
	return max(s.rec.Checkpoints, s.captures.next)
}

// queueCaptureLocked queues the capture of turn/n. tree, when not "", is
// its tree, already written by repo; otherwise the capture snapshots the
// working tree at once. The caller holds s.mu.
//
// Turn n's checkpoint takes the open start as its turn's; turn/0 opens
// one, which turn 1 starts from.
func (s *Session) queueCaptureLocked(repo *checkpoints.Repo, n int, tree string) {
	q := &s.captures
	prev := q.recorded
	snapped, recorded := make(chan struct{}), make(chan struct{})
	q.next, q.snapped, q.recorded, q.lastEnd = n+1, snapped, recorded, recorded
	start := q.start
	q.start = nil
	if n == 0 {
		q.start = &turnStart{snapped: closedChan}
	}
	if tree != "" {
		q.lastTree = tree
	}
	go func() {
		defer close(recorded)
		if tree == "" {
			repo, tree = s.snapshot(n)
			s.mu.Lock()
			if q.lastEnd == recorded {
				q.lastTree = tree // what the next start compares with
			}
			s.unlock()
		}
		close(snapped)
		if prev != nil {
			<-prev
		}
		s.record(repo, n, tree, start, recorded)
	}()
}

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
			// the next turn's checkpoint records what it left, and that
			// turn starts where this one did (its start/<N>, when it
			// recorded one, else the last checkpoint).
			if s.captures.start == nil && s.nextCheckpointLocked() > 0 {
				s.captures.start = &turnStart{snapped: closedChan}
			}
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
// written down, so a turn about to start cannot change it first, and
// reports whether it had to wait.
func (s *Session) awaitSnapshot(ctx context.Context) (waited bool, err error) {
	s.mu.Lock()
	snapped := s.captures.snapped
	s.unlock()
	if snapped == nil {
		return false, nil
	}
	select {
	case <-snapped:
		return false, nil
	default:
	}
	select {
	case <-snapped:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
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

// record commits turn n's tree, when it was written, as its checkpoint,
// after its turn's start when it has one; then, unless another checkpoint
// is queued behind it (which will), it reads the session's counts and
// stores its record. self is the capture's channel in the queue.
//
// Nobody waits for any of this, so its git yields the CPU to turns and
// snapshots; and under load, when captures queue up, the counts are read
// once for all of them.
func (s *Session) record(repo *checkpoints.Repo, n int, tree string, start *turnStart, self chan struct{}) {
	s.inGit(func() { s.recordNow(repo, n, tree, start, self) })
}

func (s *Session) recordNow(repo *checkpoints.Repo, n int, tree string, start *turnStart, self chan struct{}) {
	q := &s.captures
	s.mu.Lock()
	disposed, wt, last, had := s.disposed, s.rec.Tree, q.last, s.rec.Checkpoints
	parent := last
	if start != nil && start.commit != "" {
		parent = start.commit
	}
	s.unlock()
	if disposed || repo == nil {
		return
	}
	repo = repo.Yielding()
	if tree != "" && n > 0 && last == "" {
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
		if n > 0 && wt == nil {
			q.unfolded = append(q.unfolded, commit)
		}
	}
	s.mu.Lock()
	if commit != "" {
		q.last = commit
		s.rec.Checkpoints = max(s.rec.Checkpoints, n+1)
	}
	latest, last := q.lastEnd == self, q.last
	s.unlock()
	if !latest {
		return // the capture queued behind this one counts, and stores, for both
	}
	var ch *protocol.ChangesSummary
	if n > 0 && last != "" {
		stats, err := s.count(ctx, repo, wt, last)
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
func (s *Session) count(ctx context.Context, repo *checkpoints.Repo, wt *worktree.Tree, last string) (checkpoints.Stats, error) {
	if wt != nil {
		return repo.BranchChangesTo(ctx, last, wt.Base)
	}
	q := &s.captures
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
