package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/protocol"
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
// Git is bounded host-wide (checkpoints' slots). A capture takes a slot
// as its turn ends when one is free, so a quiet host captures every turn
// as it ended; otherwise it waits for one. The next turn waits for the
// snapshot git is writing, and for one still waiting for a slot only
// when the session shares its tree (the capture then goes ahead of the
// rest): a session alone in it (Repos) with git behind defers the
// capture to the end of the turn now starting, whose files it records
// for both, and a turn ending while its session's capture waits folds
// into it too. The record notes which turn ends a checkpoint covers
// (Record.Owed), so that after a stop the next turn's checkpoint covers
// a turn a given-up capture left without one.
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
	newest   *capture      // the newest capture, until its tree is written

	lastEnd  chan struct{}     // the newest turn checkpoint's recorded: the capture that counts
	repo     *checkpoints.Repo // the repository the session works in, once opened
	repoDir  string            // the directory repo was opened for
	last     string            // the newest checkpoint's commit, once known
	lastTree string            // the newest checkpoint's tree, once snapshotted in this run
	start    *turnStart        // the open start: the next checkpoint's turn started from it
	alone    bool              // at its last turn's start the session was alone in its tree (Repos)
	ends     int               // turn ends seen in this run: a capture covers those up to its own
	// base is turn/0's tree while every checkpoint queued in this run
	// follows the one before (no start/<N> between; nil otherwise): the
	// session's own changes are then the diff from it to the newest, one
	// git process.
	base *lazyTree

	// Touched by records only, which run one at a time (inGit).
	own      *checkpoints.Own // the session's own changes; nil: read them from its refs
	unfolded []string         // checkpoints recorded since own took its last
}

// capture is a turn checkpoint's snapshot, from its turn's end until its
// tree is written; its state is guarded by s.mu.
type capture struct {
	n       int
	covers  int // the turn ends (captureQueue.ends) it writes the tree of
	state   captureState
	wake    chan struct{} // a deferred capture is let go: its turn ended
	snapped chan struct{} // closed once the tree is written, or given up
	urgent  atomic.Bool   // a turn waits for the tree (read by the git slots)
	alone   bool          // the session was alone in its tree as its turn started
	slot    context.Context
	release func() // the git slot taken as it was queued, if one was free
}

// priority is the capture's place among the waiters for git: ahead of
// the records when nobody waits for it, ahead of all when a turn does.
func (c *capture) priority() checkpoints.Priority {
	if c.urgent.Load() {
		return checkpoints.Now
	}
	return checkpoints.Soon
}

type captureState int

const (
	// captureWaiting: waiting for a git slot (checkpoints.Acquire).
	captureWaiting captureState = iota
	// captureDeferred: the session's next turn started before the
	// snapshot did, and its files move on: the capture waits for that
	// turn's end, and records the tree it leaves for both.
	captureDeferred
	// captureSnapping: git is writing the tree; a turn starting waits.
	captureSnapping
	captureSnapped
)

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

// queueCaptureLocked queues the capture of turn/n. staged, when not nil,
// is its files, already staged by repo; otherwise the capture stages the
// working tree's as soon as a git slot is free: at once when one is, so
// that a quiet host captures each turn as it ended. The caller holds s.mu.
//
// Turn n's checkpoint takes the open start as its turn's; turn/0 opens
// one, which turn 1 starts from.
func (s *Session) queueCaptureLocked(repo *checkpoints.Repo, n int, staged *checkpoints.Staged) {
	q := &s.captures
	prev := q.recorded
	c := &capture{n: n, covers: q.ends, state: captureSnapped, wake: make(chan struct{}, 1), snapped: make(chan struct{})}
	recorded := make(chan struct{})
	q.next, q.snapped, q.recorded, q.lastEnd = n+1, c.snapped, recorded, recorded
	start := q.start
	q.start = nil
	if n == 0 {
		q.start = &turnStart{snapped: closedChan}
		q.base = nil
	}
	if staged != nil {
		if n == 0 {
			q.base = &lazyTree{staged: staged}
			if tree := staged.Written(); tree != "" {
				q.base.once.Do(func() { q.base.tree = tree })
				q.base.done.Store(true)
				q.lastTree = tree
			}
		}
		close(c.snapped)
	} else {
		q.newest = c
		// A session sharing its tree is told apart from what the others
		// do next only by how soon its tree is written: it goes first.
		c.urgent.Store(!q.alone)
		c.alone = q.alone
		if slot, release, ok := checkpoints.TryAcquire(s.h.Ctx); ok {
			c.state, c.slot, c.release = captureSnapping, slot, release
		} else {
			c.state = captureWaiting
		}
	}
	covers := c.covers // a snapshot to write takes it again once written
	var base *lazyTree // turn/0's staged tree: written through it
	if n == 0 {
		base = q.base
	}
	go func() {
		defer close(recorded)
		sh := &shot{staged: staged, covers: covers, base: base}
		if staged == nil {
			repo, sh = s.snapshotCapture(c, recorded)
		} else if base != nil {
			s.writeBase(base, sh)
		}
		defer sh.close()
		if prev != nil {
			<-prev
		}
		s.record(repo, n, sh, start, recorded)
	}()
}

// lazyTree is turn/0's tree, written once by whoever needs it first:
// its own capture, ahead of the records, or a later capture whose counts
// are read against it.
type lazyTree struct {
	once   sync.Once
	done   atomic.Bool
	staged *checkpoints.Staged // not to be touched but through get
	tree   string
	err    error
}

// get writes the tree, the first time, under ctx (which holds a slot).
func (l *lazyTree) get(ctx context.Context) (string, error) {
	l.once.Do(func() {
		l.tree, l.err = l.staged.Tree(ctx)
		l.done.Store(true)
	})
	return l.tree, l.err
}

// writeBase writes turn/0's staged tree ahead of the records, whose git
// may queue behind every other session's: while the session's turns
// follow each other, the counts of each are read against it as soon as
// its files are staged.
func (s *Session) writeBase(base *lazyTree, sh *shot) {
	if !base.done.Load() {
		ctx, cancel := context.WithTimeout(s.h.Ctx, gitTimeout)
		defer cancel()
		ctx, release, err := checkpoints.Acquire(ctx, checkpoints.At(checkpoints.Soon))
		if err != nil {
			return // the record tries
		}
		defer release()
		base.get(ctx)
	}
	tree, err := base.get(s.h.Ctx) // written: no git
	if err != nil {
		return // the record tries, and says why
	}
	sh.tree = tree
	q := &s.captures
	s.mu.Lock()
	if q.lastTree == "" {
		q.lastTree = tree
	}
	s.unlock()
}

// shot is what a capture's snapshot left for its record.
type shot struct {
	tree    string              // the tree, once written
	staged  *checkpoints.Staged // the files staged, when the tree is not written yet
	stats   checkpoints.Stats   // the session's counts as of it, when counted
	counted bool
	covers  int       // the turn ends it covers (capture.covers)
	base    *lazyTree // turn/0's: its staged files' tree is written through it
}

func (sh *shot) close() {
	if sh.staged != nil {
		sh.staged.Close()
	}
}

// snapshotCapture writes down the files of capture c once it has a git
// slot and is not deferred: nil if it could not, or the host stopped
// first (the next capture then covers its turns). Once they are, the
// next turn may go on; the tree follows now when a start may be compared
// with it (the session shares its tree), else in the record. While the
// session's checkpoints follow each other, its counts are the diff from
// turn/0's tree, read from the staged files under the same slot when no
// capture is queued behind this one (self); the record publishes them
// once the checkpoint's ref is written.
func (s *Session) snapshotCapture(c *capture, self chan struct{}) (*checkpoints.Repo, *shot) {
	q := &s.captures
	sh := &shot{}
	snapped := func() {
		s.mu.Lock()
		c.state = captureSnapped
		sh.covers = c.covers
		if q.newest == c {
			q.newest = nil
		}
		if q.lastEnd == self && sh.tree != "" {
			q.lastTree = sh.tree // what the next start compares with
		}
		base, wt := q.base, s.rec.Tree
		s.unlock()
		close(c.snapped)
		if base == nil || wt != nil || sh.staged == nil {
			return
		}
		s.mu.Lock()
		latest := q.lastEnd == self
		s.unlock()
		if !latest {
			return // the capture queued behind counts
		}
		from, err := base.get(c.slot) // under this slot, if not yet written
		if err != nil {
			return // the record counts, and says why
		}
		st, err := sh.staged.Diff(c.slot, from)
		if err != nil {
			s.h.Log.Warn("could not count a session's changes", "session", s.uri, "err", err)
			return
		}
		sh.stats, sh.counted = st, true
		if checkpoints.Backlogged() {
			// The record queues behind all that: the counts are what
			// the client waits for, and they are read.
			s.mu.Lock()
			if q.lastEnd == self {
				s.setChangesLocked(changesOf(st.Files, st.Additions, st.Deletions))
			}
			s.unlock()
		}
	}
	for c.release == nil {
		ctx, rel, err := checkpoints.Acquire(s.h.Ctx, c.priority)
		if err != nil {
			snapped()
			return nil, sh
		}
		s.mu.Lock()
		deferred := c.state == captureDeferred
		if !deferred {
			c.state = captureSnapping
		}
		s.unlock()
		if !deferred {
			c.slot, c.release = ctx, rel
			break
		}
		rel()
		select {
		case <-c.wake:
		case <-s.h.Ctx.Done():
			snapped()
			return nil, sh
		}
	}
	defer c.release()
	ctx, cancel := context.WithTimeout(c.slot, gitTimeout)
	defer cancel()
	c.slot = ctx
	repo, staged := s.snapshot(ctx, c.n)
	if staged != nil {
		sh.staged = staged
		if !c.alone {
			if tree, err := staged.Tree(c.slot); err != nil {
				s.h.Log.Warn("could not record a checkpoint", "session", s.uri, "turn", c.n, "err", err)
			} else {
				sh.tree = tree
			}
		}
	}
	snapped()
	return repo, sh
}

// wakeDeferredLocked lets a deferred capture go: the turn it waited for
// ended. It reports whether the newest capture has yet to write its tree,
// and so will write what this turn left. The caller holds s.mu.
func (s *Session) wakeDeferredLocked() bool {
	c := s.captures.newest
	if c == nil {
		return false
	}
	switch c.state {
	case captureDeferred:
		c.state = captureWaiting
		select {
		case c.wake <- struct{}{}:
		default:
		}
	case captureWaiting:
	default:
		return false
	}
	c.covers = s.captures.ends
	return true
}

// turnEndedLocked queues the checkpoint of a turn that completed or
// failed; a cancelled turn gets none, its edits staying in the next count.
// It runs as the turn's end is applied, before the chat can take another
// turn, so the next turn finds it queued. The caller holds s.mu.
func (s *Session) turnEndedLocked(a protocol.Action) {
	if s.nextCheckpointLocked() > 0 && !s.rec.Untracked && !s.disposed {
		// Until a checkpoint covers this end (owedLocked); the record
		// is written as the turn's end is.
		s.captures.ends++
		s.rec.Owed = true
	}
	// A capture deferred for this turn, or still waiting for git, writes
	// what it left: this turn's end, whatever its kind, folds into it.
	covered := s.wakeDeferredLocked()
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
	if covered {
		return
	}
	if n := s.nextCheckpointLocked(); n > 0 && !s.rec.Untracked && !s.disposed {
		s.queueCaptureLocked(nil, n, nil)
	}
}

// awaitCaptures waits until every capture queued so far is over.
func (s *Session) awaitCaptures() { s.AwaitCapturesCtx(context.Background()) }

// AwaitCapturesCtx waits until every capture queued so far is over, or
// ctx ends, and reports whether they are.
func (s *Session) AwaitCapturesCtx(ctx context.Context) bool {
	s.mu.Lock()
	recorded := s.captures.recorded
	if !s.running {
		// A capture deferred for a turn that never got going (its start
		// failed before the chat ran it) would wait for no end.
		s.wakeDeferredLocked()
	}
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
		repo, disposed := q.repo, s.disposed
		s.unlock()
		if !disposed {
			s.h.Repos.join(s, dir)
		}
		return repo, nil
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
	disposed := s.disposed
	s.unlock()
	if !disposed {
		s.h.Repos.join(s, dir)
	}
	return repo, nil
}

// warmRepo opens the repository of a session just made, in the
// background and after the git somebody waits for, so that its first
// send, which the agent waits on, runs no git to find it. It changes
// nothing else: a provisional session works nowhere yet (Repos).
func (s *Session) warmRepo() {
	dir := s.WorkDir()
	ctx, cancel := context.WithTimeout(s.h.Ctx, gitTimeout)
	defer cancel()
	ctx, release, err := checkpoints.Acquire(ctx, checkpoints.At(checkpoints.Later))
	if err != nil {
		return
	}
	defer release()
	s.mu.Lock()
	q, wt, opened := &s.captures, s.rec.Tree, s.captures.repo != nil
	s.unlock()
	if opened || wt != nil {
		return
	}
	repo, err := openRepo(ctx, dir)
	if err != nil {
		return // the first send finds out, and notes a folder that is none
	}
	s.mu.Lock()
	if q.repo == nil && s.WorkDir() == dir {
		q.repo, q.repoDir = repo, dir
	}
	s.unlock()
}

// snapshot stages the files turn n left, under ctx (which holds the
// capture's git slot); nil if it could not.
func (s *Session) snapshot(ctx context.Context, n int) (*checkpoints.Repo, *checkpoints.Staged) {
	s.mu.Lock()
	disposed := s.disposed
	s.unlock()
	if disposed {
		return nil, nil // its refs are gone, or going
	}
	repo, err := s.RepoFor(ctx)
	var staged *checkpoints.Staged
	if err == nil {
		staged, err = repo.Stage(ctx)
	}
	if err != nil && !errors.Is(err, checkpoints.ErrNotRepository) {
		s.h.Log.Warn("could not record a checkpoint", "session", s.uri, "turn", n, "err", err)
	}
	return repo, staged
}
