package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

// Trees and checkpoints.
//
// A worktree session works in its folder until its first send, which makes
// its tree and moves it there before the turn runs. Every session whose
// folder is a git repository has its turns written down as commits under
// refs/agents/<sid>/checkpoints/turn/<N>: turn/0 when its first turn is
// sent, one more each time a turn completes or fails (a folder session's
// after the tree its turn started from, captures.go). The counts a client
// draws beside the session are read when a turn ends: a worktree session's
// Branch Changes, a folder session's Session Changes (what its own turns
// changed), or, in a folder that is no repository, the files its tools
// were seen to write.
//
// The session's git queue (gitwork.go) runs this git work one job at a
// time.

// gitTimeout bounds one capture or count, so a wedged git never holds a
// session's turns.
const gitTimeout = 2 * time.Minute

// prepare readies the session for a turn (chats.Options.Prepare): the
// tree the last turn left is written down first, and on the first send it
// stores the session, makes the worktree the session asked for and
// records the tree it starts from.
func (s *Session) prepare(ctx context.Context) error {
	fresh, err := s.awaitEnd(ctx, s.h.Repos.alone(s))
	if err != nil {
		return err
	}
	s.mu.Lock()
	first := s.firstSendLocked()
	s.unlock()
	if !first {
		// The last turn's capture may be recording it: nothing this turn
		// does waits for that, but the tree it starts from.
		return s.openStart(ctx, fresh)
	}
	s.inGit(func() { err = s.firstSend(ctx) })
	alone := s.h.Repos.alone(s) // it is in its tree now
	s.mu.Lock()
	s.captures.alone = alone || s.rec.Tree != nil
	s.unlock()
	return err
}

// firstSend stores the session, makes its worktree and snapshots the tree
// it starts from, as a git job.
func (s *Session) firstSend(ctx context.Context) error {
	// A session is stored before anything is made for it: one that cannot
	// be kept gets no tree, checkpoint or agent to leave behind.
	if err := s.storeFirst(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.disposed {
		s.unlock()
		return errors.New("the session has been disposed")
	}
	needTree := StringValue(s.configValuesLocked()[KeyIsolation]) == IsolationTree && s.rec.Tree == nil
	needStart := s.nextCheckpointLocked() == 0 && !s.rec.Untracked
	var spec worktree.Spec
	if needTree {
		spec = worktree.SpecFromConfig(s.rec.Dir(), s.id, decodeValues(s.configValuesLocked()))
		spec.Log = s.h.Log.With("session", s.uri)
	}
	s.unlock()
	if needTree {
		t, err := s.h.Trees.Create(ctx, spec)
		if err != nil {
			return fmt.Errorf("making the worktree: %w", err)
		}
		s.moveInto(t)
	}
	if needStart {
		s.startCheckpoint(ctx)
	}
	return nil
}

// firstSendLocked reports whether the session still owes what its first
// send does: its worktree, or the tree it starts from.
func (s *Session) firstSendLocked() bool {
	needTree := StringValue(s.configValuesLocked()[KeyIsolation]) == IsolationTree && s.rec.Tree == nil
	return s.disposed || needTree || (s.nextCheckpointLocked() == 0 && !s.rec.Untracked)
}

// moveInto makes t the session's primary working directory: the folder is
// replaced in place, and agents started in the folder start again in the
// tree.
func (s *Session) moveInto(t *worktree.Tree) {
	s.mu.Lock()
	old := s.WorkDir()
	s.rec.Tree = t
	s.setWorkDir(t.Path)
	if len(s.rec.WorkingDirectories) > 0 {
		s.rec.WorkingDirectories[0] = t.Path
	}
	from, to := FileURI(old), FileURI(t.Path)
	s.emitSessionLocked(&protocol.SessionWorkingDirectoryReplacedAction{Directory: from, Replacement: to}, nil)
	s.persistLocked()
	// Once a record holds the tree it is the session's for good; until
	// then a crash leaves it to be swept (orphans.go). A write that failed
	// leaves it claimed, and a sweep after a restart reads what was kept.
	recorded := !s.disposed && !s.storeFailing
	entries := make([]*ChatEntry, 0, len(s.chats))
	for _, e := range s.chats {
		entries = append(entries, e)
	}
	s.unlock()
	if recorded {
		s.h.Trees.Settle(t)
	}
	s.h.Log.Info("session moved into its worktree", "session", s.uri, "tree", t.Path, "branch", t.Branch)
	for _, e := range entries {
		if err := e.chat.Close(); err != nil {
			s.h.Log.Warn("an agent did not close cleanly", "chat", e.rec.URI, "err", err)
		}
	}
}

// setChangesLocked sets the session's counts: on its row, in its record,
// and on its default chat's entry.
func (s *Session) setChangesLocked(ch *protocol.ChangesSummary) {
	if s.disposed || SameJSON(s.rec.Changes, ch) {
		return
	}
	s.rec.Changes = ch
	if s.state.DefaultChat != nil {
		s.setChatChangesLocked(*s.state.DefaultChat, ch)
	}
	s.refreshSummaryLocked()
	s.persistLocked()
}

// setChatChangesLocked sets a chat's own counts on its entry in the
// session's state, kept in its record. No chat action carries them, so the
// chat channel's own state leaves them out rather than let a client's copy
// go stale; the session's entry and the listing row carry them.
func (s *Session) setChatChangesLocked(chat string, ch *protocol.ChangesSummary) {
	e := s.chats[chat]
	if e == nil || ch == nil {
		return
	}
	e.rec.Changes = ch
	s.emitSessionLocked(&protocol.SessionChatUpdatedAction{
		Chat:    chat,
		Changes: protocol.PartialChatSummary{Changes: ch},
	}, nil)
}

// CleanUpGit removes the session's checkpoints and, when it holds no
// uncommitted work, its tree, keeping the tree's branch. Called on
// dispose.
func (s *Session) CleanUpGit(ctx context.Context) error {
	// A capture queued before the session was disposed of ends at once
	// or, in git, soon: none must write a ref after its refs are gone.
	s.awaitCaptures()
	var err error
	s.inGit(func() { err = s.removeGit(ctx) })
	return err
}

// removeGit removes the session's checkpoints and tree, as a git job.
func (s *Session) removeGit(ctx context.Context) error {
	s.mu.Lock()
	tree, untracked, n := s.rec.Tree, s.rec.Untracked, s.rec.Checkpoints
	dir := s.WorkDir()
	s.unlock()
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	var errs []error
	if n > 0 && !untracked {
		repoDir := dir
		if tree != nil {
			repoDir = tree.Repo
		}
		repo, err := checkpoints.Open(ctx, repoDir)
		if err == nil {
			err = repo.Delete(ctx, s.id)
		}
		if err == nil {
			s.h.PushRemoval(s, repo) // off the dispose's path
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing the session's checkpoints: %w", err))
		}
	}
	if tree != nil {
		kept, why, err := s.h.Trees.Remove(ctx, tree)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("removing the session's worktree: %w", err))
		case kept:
			s.h.Log.Warn("kept a disposed session's worktree: it holds work nobody committed",
				"session", s.uri, "tree", tree.Path, "why", why)
		default:
			s.h.Log.Info("removed a disposed session's worktree", "session", s.uri, "tree", tree.Path, "branch", tree.Branch)
		}
	}
	return errors.Join(errs...)
}

// openRepo opens the repository dir is in. A folder with no .git above it
// is told apart without running git, which most sessions outside a
// repository would otherwise pay for on their first send.
func openRepo(ctx context.Context, dir string) (*checkpoints.Repo, error) {
	for d := filepath.Clean(dir); ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return checkpoints.Open(ctx, dir)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return nil, checkpoints.ErrNotRepository
		}
		d = parent
	}
}

func changesOf(files, additions, deletions int) *protocol.ChangesSummary {
	f, a, d := int64(files), int64(additions), int64(deletions)
	return &protocol.ChangesSummary{Files: &f, Additions: &a, Deletions: &d}
}

// decodeValues turns config values into what worktree.SpecFromConfig
// reads.
func decodeValues(values protocol.Object) map[string]any {
	out := make(map[string]any, len(values))
	for k, v := range values {
		var x any
		if json.Unmarshal(v, &x) == nil {
			out[k] = x
		}
	}
	return out
}
